"""End to end through the CLI on a temp store (EXTRACTION_EVAL_HOME set by conftest)."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.resume import resume_runs_the_rest

REPO = Path(__file__).resolve().parents[2]
PIPE = "tests.support.pipelines:first_entity"
runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _export(name: str, fmt: str = "jsonl") -> str:
    code, out, err = _invoke("runs", "export", name, "--format", fmt)
    assert code == 0, err
    return out


def test_baseline_run_on_bundled_dataset_then_export_and_show() -> None:
    result = runner.invoke(_run_app, ["--dataset", "extraction-eval", "--name", "baseline-v1"])
    assert result.exit_code == 0, result.stderr
    assert "offline baseline" in result.stdout
    store = LocalStore()
    n_items = len(store.get_items("extraction-eval"))
    lines = _export("baseline-v1").splitlines()
    assert len(lines) == n_items
    rows = [json.loads(line) for line in lines]
    assert {"item_id", "output", "error", "attempts", "latency_ms", "scores"} <= set(rows[0])
    assert all(r["error"] is None for r in rows)
    f1s = [r["scores"]["entity_f1"] for r in rows]
    # a real, imperfect baseline: neither all-perfect nor all-zero
    assert 0 < sum(f1s) / len(f1s) < 1
    assert _export("baseline-v1") == "\n".join(lines) + "\n"  # byte-stable
    table = list(csv.reader(io.StringIO(_export("baseline-v1", "csv"))))
    assert table[0][0] == "item_id" and len(table) == n_items + 1
    code, out, _ = _invoke("runs", "list")
    assert code == 0 and "baseline-v1" in out


def test_same_name_twice_needs_resume_and_resume_runs_nothing_new(tmp_path: Path) -> None:
    args = ["run", "--name", "r1", "--limit", "5", "--pipeline", PIPE]
    assert _invoke(*args)[0] == 0
    code, _, err = _invoke(*args)
    assert code == 2 and "--resume" in err and len(err.strip().splitlines()) == 1
    log = tmp_path / "calls.log"
    os.environ["E2E_CALL_LOG"] = str(log)
    try:
        code, _out, err = _invoke(*args, "--resume")
    finally:
        del os.environ["E2E_CALL_LOG"]
    assert code == 0, err
    assert not log.exists()  # every item was finished: no pipeline call


def test_failures_are_rows_and_retry_errors_reruns_only_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    items = LocalStore().get_items("extraction-eval")[:6]
    failing = [items[1].id, items[4].id]
    monkeypatch.setenv("E2E_FAIL", ",".join(failing))
    code, out, err = _invoke("run", "--name", "f1", "--limit", "6", "--pipeline", PIPE)
    assert code == 0, err
    assert "2 (0 schema failures)" in out
    rows = {json.loads(x)["item_id"]: json.loads(x) for x in _export("f1").splitlines()}
    assert len(rows) == 6
    for item_id in failing:
        assert rows[item_id]["error"] == f"RuntimeError: scripted failure for {item_id}"
        assert rows[item_id]["scores"]["extraction_error"] is True
    code, out, _ = _invoke("runs", "show", "f1")
    assert code == 0
    assert out.index(failing[0]) < out.index(items[0].id)  # failing items first

    monkeypatch.setenv("E2E_FAIL", "")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("E2E_CALL_LOG", str(log))
    code, _, err = _invoke(
        "run", "--name", "f1", "--limit", "6", "--pipeline", PIPE, "--retry-errors"
    )
    assert code == 0, err
    assert sorted(log.read_text().split()) == sorted(failing)
    rows = {json.loads(x)["item_id"]: json.loads(x) for x in _export("f1").splitlines()}
    assert len(rows) == 6 and all(r["error"] is None for r in rows.values())


def test_fail_under_sets_exit_code_and_unknown_name_is_usage_error() -> None:
    code, _, err = _invoke(
        "run", "--name", "fu", "--limit", "3", "--pipeline", PIPE, "--fail-under", "entity_f1=1"
    )
    assert code == 1 and "entity_f1" in err
    code, _, err = _invoke(
        "run", "--name", "fu2", "--limit", "3", "--pipeline", PIPE, "--fail-under", "nope=0.5"
    )
    assert code == 2 and "unknown score" in err
    assert LocalStore().get_run("fu2") is None  # refused before anything ran


def test_compare_two_runs() -> None:
    assert _invoke("run", "--name", "a", "--limit", "8")[0] == 0
    assert _invoke("run", "--name", "b", "--limit", "8", "--pipeline", PIPE)[0] == 0
    code, out, err = _invoke("compare", "a", "b")
    assert code == 0, err
    assert "entity_f1" in out and "items with the most broken objects" in out
    code, _, err = _invoke("compare", "a", "missing-run")
    assert code == 2 and "missing-run" in err


def test_unknown_dataset_is_one_line_exit_2() -> None:
    code, _, err = _invoke("run", "--dataset", "nope", "--name", "x")
    assert code == 2 and "nope" in err and len(err.strip().splitlines()) == 1


def test_sigkill_mid_run_then_resume_finishes_each_item_once(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {
        **os.environ,
        "E2E_CALL_LOG": str(log),
        "E2E_DELAY": "0.15",
        "PYTHONPATH": str(REPO),
    }
    cmd = [sys.executable, "-m", "extraction_eval", "run", "--name", "killed", "--limit", "30"]
    cmd += ["--pipeline", PIPE, "--concurrency", "2"]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    store = LocalStore()
    deadline = time.monotonic() + 60
    run = None
    while time.monotonic() < deadline:
        run = store.get_run("killed", "extraction-eval")
        if run is not None and len(store.results(run.id)) >= 6:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    resume_runs_the_rest(tmp_path, cmd, env)


@pytest.mark.parametrize("fn", ["timed_sync", "timed_async"])
def test_sync_and_async_pipelines_overlap_up_to_concurrency(
    fn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support import pipelines

    monkeypatch.setenv("E2E_DELAY", "1.0")  # long enough to overlap on a loaded machine
    pipelines.CALL_TIMES.clear()
    args = ["run", "--name", f"overlap-{fn}", "--limit", "16", "--concurrency", "16"]
    code, _, err = _invoke(*args, "--pipeline", f"tests.support.pipelines:{fn}")
    assert code == 0, err
    calls = pipelines.CALL_TIMES[-16:]
    assert len(calls) == 16
    # the most calls in flight at once: more than asyncio's default 6 threads on 2 cores
    in_flight = max(sum(1 for _, s, e in calls if s <= t < e) for _, t, _ in calls)
    assert in_flight == 16
