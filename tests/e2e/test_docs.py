"""The front door stays true: the CLI reference matches --help, every documented command line
parses against the real CLI, and the blocks marked ``<!-- docs-test -->`` run (no keys needed).

A marked block's commands run in order, per page, in one temp folder with a fresh store; install
steps (``python3 -m venv``, ``pip install``) are skipped because the test runs in the installed
venv. ``<!-- docs-test: exit=N -->`` expects exit code N from the block.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
ENTRY = {"extraction-eval": (), "run-experiment": ("run",), "seed-from-trace": ("seed",)}
MARK = re.compile(r"<!-- docs-test(?::\s*exit=(\d+))? -->")


def _blocks(page: Path) -> list[tuple[int, str, int | None]]:
    """(line number, code, expected exit or None when unmarked) of every ```bash block."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[tuple[int, str, int | None]] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            start, body = i + 1, []
            mark = MARK.fullmatch(lines[i - 1].strip()) if i else None
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            expected = int(mark.group(1) or 0) if mark else None
            out.append((start + 1, "\n".join(body), expected))
        i += 1
    return out


def _commands(code: str) -> list[list[str]]:
    """Our CLI's invocations in a block: continuations joined, comments, env prefixes and
    optional ``[...]`` parts dropped, ``&&`` chains split."""
    out = []
    joined = re.sub(r"\\\n\s*", " ", code)
    for raw in joined.splitlines():
        line = re.sub(r"\s\[[^\]]*\]", "", raw)
        for part in line.split("&&"):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                words = words[1:]
            if words and Path(words[0]).name in ENTRY:
                out.append([Path(words[0]).name, *words[1:]])
    return out


DOCUMENTED = [
    pytest.param(cmd, id=f"{page.name}:{lineno}:{' '.join(cmd)[:60]}")
    for page in PAGES
    for lineno, code, _ in _blocks(page)
    for cmd in _commands(code)
]
MARKED = [
    pytest.param(page, id=page.name)
    for page in PAGES
    if any(expected is not None for _, _, expected in _blocks(page))
]


def test_generated_pages_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_docs_have_commands_and_marked_blocks() -> None:
    """Guards the extraction itself: a parser that found nothing would pass every test below."""
    assert len(DOCUMENTED) > 50
    assert "README.md" in {p.values[0].name for p in MARKED}


@pytest.mark.parametrize("argv", DOCUMENTED)
def test_documented_command_parses(argv: list[str]) -> None:
    """Each documented command line is accepted by the real parser (options exist, types
    convert, required arguments are there); nothing runs."""
    import typer

    from extraction_eval.cli import app

    cmd = typer.main.get_command(app)
    args = [*ENTRY[argv[0]], *argv[1:]]
    path = []
    while args and hasattr(cmd, "commands") and args[0] in cmd.commands:
        path.append(args[0])
        cmd = cmd.commands[args.pop(0)]
    assert not hasattr(cmd, "commands") or "--help" in args, f"no such command: {argv}"
    if "--help" in args:
        return
    cmd.make_context(" ".join(["extraction-eval", *path]), args)


@pytest.mark.parametrize("page", MARKED)
def test_marked_blocks_run(page: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGFUSE_", "OPENAI_"))}
    env.update(
        EXTRACTION_EVAL_HOME=str(tmp_path / "home"),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="100",
    )
    for f in ("examples",):
        (tmp_path / f).symlink_to(ROOT / f)
    for lineno, code, expected in _blocks(page):
        if expected is None:
            continue
        script = "\n".join(
            " && ".join(
                p for p in line.split("&&") if not re.search(r"python3 -m venv|pip install", p)
            ).replace(".venv/bin/", "")
            for line in code.splitlines()
        )
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == expected, (
            f"{page.name}:{lineno} exited {done.returncode}, expected {expected}\n"
            f"{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
