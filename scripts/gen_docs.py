"""Write the generated docs pages (run with --check to diff instead; a test does).

- docs/cli.md from the CLI's own --help, rendered in a child process with typer's plain
  (non-rich) formatter at a fixed width, so the page is the same on every machine;
- docs/index.md from README.md (links into docs/ made relative; the README is the source).

Generated, never written by hand, so neither can drift: a test regenerates both and fails
with the command to run when a checked-in page differs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "cli.md"
INDEX = ROOT / "docs" / "index.md"

HEADER = """# CLI reference

Generated from each command's `--help` by `scripts/gen_docs.py`; a test fails when this
page and the code disagree (run `python scripts/gen_docs.py` after changing an option).
`run-experiment` is `extraction-eval run`; `seed-from-trace` is `extraction-eval seed`.
"""


def _paths(cmd: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, depth first, in the order the group registered them."""
    out = [prefix]
    for name, sub in getattr(cmd, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            out.extend(_paths(sub, (*prefix, name)))
    return out


def _emit() -> str:
    """Runs in the child (TYPER_USE_RICH=0 must be set before typer is imported)."""
    import typer
    from typer.testing import CliRunner

    from extraction_eval.cli import app

    runner = CliRunner()
    parts = [HEADER]
    for path in _paths(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"], prog_name="extraction-eval")
        if result.exit_code != 0:
            raise RuntimeError(f"{' '.join(path)} --help exited {result.exit_code}")
        title = " ".join(("extraction-eval", *path))
        text = "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines())
        parts.append(f"## `{title}`\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def render() -> str:
    env = {**os.environ, "TYPER_USE_RICH": "0", "COLUMNS": "100", "NO_COLOR": "1"}
    for name in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL"):
        env.pop(name, None)  # help text must not depend on the caller's mode
    done = subprocess.run(
        [sys.executable, __file__, "--emit"], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def render_index() -> str:
    """The README as the site's home page: links into docs/ relative to it (its docs-test
    marks stay: they are HTML comments, and the docs test runs the README's own blocks)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = text.replace("](docs/index.md)", "](index.md)").replace("](docs/", "](")
    text = text.replace(
        "The full documentation is the MkDocs site in [`docs/`](index.md)",
        "These pages are the MkDocs site built from `docs/`",
    )
    return text


def main(argv: list[str]) -> int:
    if "--emit" in argv:
        sys.stdout.write(_emit())
        return 0
    stale = []
    for page, text in ((PAGE, render()), (INDEX, render_index())):
        if "--check" in argv:
            if not page.is_file() or page.read_text(encoding="utf-8") != text:
                stale.append(str(page.relative_to(ROOT)))
        else:
            page.write_text(text, encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")
    if stale:
        print(f"{', '.join(stale)} out of date: run python scripts/gen_docs.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
