"""Hostile pipelines, kill -9 with ``--resume``, two processes resuming one run, a full disk:
every item keeps its row, no item runs twice, no file is left half written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.tally import Tally

REPO = Path(__file__).resolve().parents[2]
DATASET = "extraction-eval"
SLOW = "tests.support.pipelines:first_entity"
runner = CliRunner()

HOSTILE = [
    "system_exit",
    "keyboard_interrupt",
    "async_keyboard_interrupt",
    "async_system_exit",
    "generator_exit",
    "own_base_exception",
    "stop_iteration",
    "unprintable",
    "hostile_attributes",
    "surrogate_output",
    "surrogate_string",
    "surrogate_error",
    "hang",
    "async_hang",
    "huge_message",
]


def _rows(name: str) -> dict[str, dict[str, object]]:
    result = runner.invoke(app, ["runs", "export", name])
    assert result.exit_code == 0, result.output
    return {json.loads(x)["item_id"]: json.loads(x) for x in result.stdout.splitlines()}


@pytest.mark.parametrize("function", HOSTILE)
def test_a_hostile_pipeline_costs_no_row_and_never_stops_the_run(
    function: str, tally: Tally
) -> None:
    timeout = "0.3" if "hang" in function else "30"  # a loaded machine never trips the rest
    args = ["run", "--name", function, "--limit", "4", "--timeout", timeout, "--concurrency", "4"]
    result = runner.invoke(
        app, [*args, "--pipeline", f"tests.support.hostile_pipelines:{function}"]
    )
    rows = _rows(function) if result.exit_code == 0 else {}
    tally.faults(injected=4, lost=4 - len(rows))
    assert result.exit_code == 0, result.output
    assert len(rows) == 4
    expected = {"hang": "timeout", "async_hang": "timeout"}.get(function, "pipeline")
    if function in ("surrogate_output", "surrogate_string"):
        assert {r["error"] for r in rows.values()} == {None}  # kept, repaired
    else:
        assert {r["error_kind"] for r in rows.values()} == {expected}
    resumed = runner.invoke(
        app, [*args, "--resume", "--pipeline", f"tests.support.hostile_pipelines:{function}"]
    )
    assert resumed.exit_code == 0, resumed.output  # and the run can be resumed afterwards


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "extraction_eval", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_rows(store: LocalStore, name: str, at_least: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = store.get_run(name, DATASET)
        if run is not None and (n := len(store.result_ids(run.id))) >= at_least:
            return n
        time.sleep(0.05)
    raise AssertionError(f"run {name} never reached {at_least} rows")


def test_kill_9_three_times_then_resume_loses_no_item(tmp_path: Path, tally: Tally) -> None:
    """Each kill lands mid-run (the run's lock is left behind: the next invocation takes it
    over, since its holder is dead); the last resume finishes every item exactly once."""
    store = LocalStore()
    items = 24
    base = ["run", "--name", "killed", "--limit", str(items), "--pipeline", SLOW]
    base += ["--concurrency", "2"]
    calls = tmp_path / "calls.log"
    env = _env(tmp_path, E2E_CALL_LOG=str(calls), E2E_DELAY="0.1")
    done = 0
    for kill in range(3):
        proc = _cli(*base, *(["--resume"] if kill else []), env=env)
        done = _wait_for_rows(store, "killed", done + 3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finish = subprocess.run(
        [sys.executable, "-m", "extraction_eval", *base, "--resume"],
        cwd=REPO,
        env={**env, "E2E_DELAY": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    run = store.get_run("killed", DATASET)
    assert run is not None
    rows = store.result_ids(run.id)
    tally.faults(injected=3, lost=items - len(set(rows)))
    assert finish.returncode == 0, finish.stderr
    assert "took over the lock of run 'killed'" in finish.stderr
    assert sorted(rows) == sorted(set(rows)) and len(rows) == items
    assert store.run_lock(run.id) is None


def test_two_processes_resuming_one_run_never_both_run_its_items(
    tmp_path: Path, tally: Tally
) -> None:
    store = LocalStore()
    first = runner.invoke(app, ["run", "--name", "twice", "--limit", "2", "--pipeline", SLOW])
    assert first.exit_code == 0, first.output
    calls = tmp_path / "calls.log"
    env = _env(tmp_path, E2E_CALL_LOG=str(calls), E2E_DELAY="0.25")
    args = ["run", "--name", "twice", "--limit", "16", "--pipeline", SLOW, "--resume"]
    procs = [_cli(*args, "--concurrency", "2", env=env) for _ in range(2)]
    outcomes = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    codes = sorted(code for code, _ in outcomes)
    called = calls.read_text().split()
    run = store.get_run("twice", DATASET)
    assert run is not None
    tally.faults(injected=1, lost=16 - len(store.result_ids(run.id)))
    assert len(called) == len(set(called)) == 14  # every item still to run, run once
    assert codes == [0, 2], outcomes
    [refused] = [err for code, err in outcomes if code == 2]
    assert refused.startswith("error: --take-over-lock is needed to run 'twice' now: it is being")
    assert len(refused.strip().splitlines()) == 1


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KB tmpfs (root only, where mounting is allowed); skipped with one line if not."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("full disk: needs root to mount a small tmpfs")
    mnt = tmp_path / "full"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"full disk: mounting a tmpfs is not allowed here ({done.stderr.strip()!r})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_leaves_the_old_file_and_says_so_in_one_line(
    full_disk: Path, tally: Tally
) -> None:
    assert runner.invoke(app, ["run", "--name", "big", "--limit", "20"]).exit_code == 0
    ballast = full_disk / "ballast"
    old = {"report.html": "old report\n", "export.jsonl": "old export\n", "score.json": "{}\n"}
    for name, text in old.items():
        (full_disk / name).write_text(text)
    with ballast.open("wb", buffering=0) as fh:  # fill the disk, then free its last few KB
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    os.truncate(ballast, max(ballast.stat().st_size - 8192, 0))
    attempts = [
        ["report", "big", "--out", str(full_disk / "report.html")],
        ["runs", "export", "big", "--out", str(full_disk / "export.jsonl")],
        ["datasets", "export", DATASET, "--out", str(full_disk / "new.jsonl")],
        ["score", "--out", str(full_disk / "score.json"), "--per-item", str(full_disk / "x")],
    ]
    for args in attempts:
        result = runner.invoke(app, args)
        lines = [x for x in result.stderr.splitlines() if not x.startswith("scoring the bundled")]
        held = (
            result.exit_code == 2
            and len(lines) == 1
            and lines[0].startswith("error: --")
            and "No space left on device" in lines[0]
            and "Traceback" not in result.output
        )
        tally.input(held=held)
        assert held, (args, result.output)
    for name, text in old.items():
        assert (full_disk / name).read_text() == text
    assert sorted(p.name for p in full_disk.iterdir()) == ["ballast", *sorted(old)]
