"""Small files a user names are hostile input too: a FIFO, a device or a huge file as the
``--schema``, the fake model's script or the current folder's ``.env`` is one line, never a
hang. Each case runs the real CLI in a subprocess with a timeout, so a blocking read fails the
test instead of stalling the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from extraction_eval.limits import MAX_DOTENV_BYTES, MAX_FAKE_SCRIPT_BYTES, MAX_SCHEMA_BYTES
from tests.support.tally import Tally

REPO = Path(__file__).resolve().parents[2]


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "extraction_eval", *args],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return -1, "hung"
    return done.returncode, done.stderr


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _huge(path: Path, size: int) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size + 1)  # sparse: no disk, but stat says it is over the bound
    return path


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_schema_that_is_not_a_small_regular_file(kind: str, tmp_path: Path, tally: Tally) -> None:
    schema = (
        _fifo(tmp_path / "s.json")
        if kind == "fifo"
        else _huge(tmp_path / "s.json", MAX_SCHEMA_BYTES)
    )
    code, err = _cli(["score", "--schema", str(schema)], tmp_path)
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    held = code == 2 and len(lines) == 1 and "s.json" in lines[0]
    tally.input(held)
    assert held, (code, err)


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_fake_script_that_is_not_a_small_regular_file(
    kind: str, tmp_path: Path, tally: Tally
) -> None:
    script = (
        _fifo(tmp_path / "script.json")
        if kind == "fifo"
        else _huge(tmp_path / "script.json", MAX_FAKE_SCRIPT_BYTES)
    )
    code, err = _cli(
        ["run", "--name", "f", "--model", "fake:x", "--limit", "1"],
        tmp_path,
        {"EXTRACTION_EVAL_FAKE_SCRIPT": str(script)},
    )
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    held = code not in (0, -1) and len(lines) == 1 and "script.json" in lines[0]
    tally.input(held)
    assert held, (code, err)


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_dotenv_that_is_not_a_small_regular_file_is_one_warning(
    kind: str, tmp_path: Path, tally: Tally
) -> None:
    if kind == "fifo":
        _fifo(tmp_path / ".env")
    else:
        _huge(tmp_path / ".env", MAX_DOTENV_BYTES)
    code, err = _cli(["runs", "list"], tmp_path)
    lines = [x for x in err.splitlines() if ".env not read" in x]
    held = code == 0 and len(lines) == 1
    tally.input(held)
    assert held, (code, err)
