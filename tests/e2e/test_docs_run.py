"""The docs run as written: every shell, terminal-session and Python block of README.md and
docs/*.md runs, page by page, in a fresh folder with a fresh store, no key and the CLI from
this venv, and prints what the page quotes (``tests/support/docs_blocks.py`` has the rules and
the marks that keep a block out: keys, a server, slowness, placeholders).

A page's blocks run in order in one folder, as a reader would run them: a run made by one
block is there for the next. The folder holds ``examples`` and ``tests`` (the repository's,
linked) and, beside it, ``../shared`` when the shared gold data exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.docs_blocks import (
    GENERATED,
    PAGES,
    ROOT,
    Block,
    blocks,
    console_steps,
    missing_lines,
)

BIN = Path(sys.executable).parent
SHARED = Path(os.environ.get("EXTRACTION_EVAL_SHARED_DATA") or ROOT.parent / "shared" / "data")
KEYS = ("LANGFUSE_", "OPENAI_", "GEMINI_", "GOOGLE_", "ANTHROPIC_", "EXTRACTION_EVAL_")
TIMEOUT = 300
STEP = "@@docs-test-step"  # printed after each command of a session: its number, its exit code


RUN_PAGES = [
    pytest.param(page, id=page.name)
    for page in PAGES
    if page not in GENERATED and any(b.runs for b in blocks(page))
]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(KEYS)}
    env.update(
        EXTRACTION_EVAL_HOME=str(tmp / "home"),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        COLUMNS="100",
        NO_COLOR="1",
    )
    return env


def _folder(tmp: Path) -> Path:
    """The reader's working folder: the repository's examples and test data, ../shared."""
    work = tmp / "repo"
    work.mkdir()
    for name in ("examples", "tests"):
        (work / name).symlink_to(ROOT / name)
    if SHARED.is_dir():
        (tmp / "shared").mkdir()
        (tmp / "shared" / "data").symlink_to(SHARED)
    return work


def _run(argv: list[str], work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        timeout=TIMEOUT,
    )


def _shell(code: str) -> list[str]:
    """A block as a reader pastes it; install steps dropped (the test runs in this venv)."""
    lines = [
        " && ".join(
            p for p in line.split("&&") if "python3 -m venv" not in p and "pip install" not in p
        ).replace(".venv/bin/", "")
        for line in code.splitlines()
    ]
    return ["bash", "-e", "-o", "pipefail", "-c", "\n".join(lines)]


def _check_output(shown: str, out: str, what: str) -> None:
    missing = missing_lines(shown.splitlines(), out)
    assert not missing, (
        f"{what}: {len(missing)} quoted line(s) not printed, first: {missing[0]!r}\n"
        f"--- printed ---\n{out[-6000:]}"
    )


def _run_console(block: Block, work: Path, env: dict[str, str]) -> str:
    """A session in one shell, as typed (an ``export`` or ``cd`` holds for the next command):
    each command's exit code and its quoted output checked."""
    steps = console_steps(block.code)
    script = ["exec 2>&1"]
    for n, step in enumerate(steps):
        script += [step.command, f"printf '\\n{STEP} {n} %s\\n' $?"]
    done = _run(["bash", "-o", "pipefail", "-c", "\n".join(script)], work, env)
    parts = re.split(rf"\n{STEP} (\d+) (\d+)\n", done.stdout)
    ended = {
        int(n): (int(code), out)
        for out, n, code in zip(parts[:-1:3], parts[1::3], parts[2::3], strict=True)
    }
    for n, step in enumerate(steps):
        assert n in ended, f"{block.where}: the session stopped before `{step.command}`"
        code, out = ended[n]
        expected = step.expected_exit
        ok = code != 0 if expected is None else code == expected
        assert ok, (
            f"{block.where}: `{step.command}` exited {code}"
            f" (expected {'non-zero' if expected is None else expected})\n{out[-4000:]}"
        )
        _check_output("\n".join(step.quoted), out, f"{block.where}: `{step.command}`")
    return ended[len(steps) - 1][1] if steps else ""


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    """Every runnable block of the page, in order; quoted output compared with what the last
    block that ran printed (a block that is not run is passed over). A block marked
    ``shared-data`` is left out when the data is absent, and so is the output quoted after it."""
    work, env = _folder(tmp_path), _env(tmp_path)
    last: tuple[Block, str] | None = None
    ran = 0
    for block in blocks(page):
        if block.kind == "output":
            if last is not None:
                # a ``$ command`` line names the command whose output follows: not printed
                shown = "\n".join(x for x in block.code.splitlines() if not x.startswith("$ "))
                what = f"{block.where} (output of {last[0].where})"
                _check_output(shown, last[1], what)
            continue
        if block.kind not in ("shell", "console", "python"):
            continue
        if not block.runs or ("shared-data" in block.marks and not SHARED.is_dir()):
            last = None if "shared-data" in block.marks else last
            continue
        ran += 1
        env["COLUMNS"] = str(block.columns or 100)
        if block.kind == "console":
            last = (block, _run_console(block, work, env))
            continue
        argv = [sys.executable, "-c", block.code] if block.kind == "python" else _shell(block.code)
        done = _run(argv, work, env)
        assert done.returncode == block.exit, (
            f"{block.where} exited {done.returncode}, expected {block.exit}\n"
            f"{block.code}\n{done.stdout[-6000:]}"
        )
        last = (block, done.stdout)
    if not ran:
        pytest.skip(f"shared gold data not found at {SHARED}")
