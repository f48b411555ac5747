"""``run --workers N``: the items run and are scored in N worker processes, the run's process
stores them. Through the CLI on a temp store (conftest), with the test pipelines of
``tests/support/pipelines.py`` and the scripted fake provider; each run starts real worker
processes, so the tests are few and small."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.workers.item_pool import WORKERS_ONLY_ENV
from tests.support.fake_log import read_fake_log
from tests.support.resume import resume_runs_the_rest

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _run(*args: str) -> Result:
    return runner.invoke(_run_app, ["--backend", "local", *args])


def _export(name: str) -> str:
    out = runner.invoke(app, ["runs", "export", name, "--deterministic"])
    assert out.exit_code == 0, out.stderr
    return str(out.stdout)


def test_workers_store_what_one_process_stores_and_each_failure_is_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte-identical exports (per-invocation fields left out: latency, ...), and two items
    failing differently in the two workers (a raise, an answer that is not an extraction)
    are two error rows, the summaries equal."""
    items = LocalStore().get_items("extraction-eval")[:12]
    monkeypatch.setenv("E2E_FAIL", items[0].id)
    monkeypatch.setenv("E2E_BAD", items[1].id)
    monkeypatch.setenv(WORKERS_ONLY_ENV, "1")  # no item runs here while the workers start
    pids = tmp_path / "pids.log"
    common = ["--limit", "12", "--pipeline", "tests.support.pipelines:fails_two_ways"]
    one = _run(*common, "--name", "one", "--concurrency", "4")
    assert one.exit_code == 0, one.stderr
    monkeypatch.setenv("E2E_PID_LOG", str(pids))
    two = _run(*common, "--name", "two", "--concurrency", "4", "--workers", "2")
    assert two.exit_code == 0, two.stderr

    ran_in = dict(line.split() for line in pids.read_text().splitlines())
    assert len(ran_in) == 12 and str(os.getpid()) not in ran_in.values()
    assert len(set(ran_in.values())) == 2  # both workers ran items
    assert ran_in[items[0].id] != ran_in[items[1].id]  # the two failures in two workers
    assert _export("one") == _export("two")
    store = LocalStore()
    rows = {r.item_id: r for r in store.results(store.get_run("two").id)}  # type: ignore[union-attr]
    assert len(rows) == 12
    assert rows[items[0].id].error_kind == "pipeline"
    assert "scripted failure" in (rows[items[0].id].error or "")
    assert rows[items[1].id].error_kind == "schema"
    assert sum(r.error is not None for r in rows.values()) == 2
    first, second = store.get_run("one"), store.get_run("two")
    assert first is not None and second is not None
    assert first.summary is not None and second.summary is not None
    assert first.summary["values"] == second.summary["values"]


def test_the_budget_holds_across_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One ceiling for the run: an item starts only while the spend of every worker's results
    is below it ($0.01 a call: two in flight, then one more per finished item below $0.025:
    four calls, the other two items not run)."""
    script = {
        "default": {
            "json": {"entities": [], "relationships": []},
            "usage": {"input": 5000, "output": 5000},
        }
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(path))
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_LOG", str(log))
    monkeypatch.setenv(WORKERS_ONLY_ENV, "1")  # every call in a worker
    prices = ["--price-in", "1", "--price-out", "1"]
    stopped = _run(
        "--limit", "6", "--model", "fake:budget", *prices, "--name", "capped",
        "--max-cost", "0.025", "--concurrency", "2", "--workers", "2",
    )  # fmt: skip
    assert stopped.exit_code == 1, stopped.stderr
    assert "stopped: budget" in stopped.stderr and "2 items not run" in stopped.stderr
    assert len(read_fake_log(log)) == 4
    run = LocalStore().get_run("capped")
    assert run is not None and run.status == "stopped: budget"
    assert run.summary is not None and run.summary["cost_usd"] == pytest.approx(0.04)


def test_a_model_run_in_workers_fills_the_one_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers' answers (and the response-format probe's) go to the run's store with each
    result: the same run again, in one process, answers every item from the cache, makes no
    model call, and stores the same results."""
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig
    from tests.support.openai_server import LoopbackServer, baseline_answer

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    store = LocalStore()
    with LoopbackServer(answer=baseline_answer) as server:

        def config(name: str, workers: int) -> RunConfig:
            pipeline = PipelineConfig(model="openai:smollm2", base_url=server.url)
            return RunConfig(name=name, pipeline=pipeline, limit=10, concurrency=4,
                             workers=workers, backend="local")  # fmt: skip

        first = run_experiment(config("in-workers", 2), store=store)
        calls = len(server.chat_requests)
        assert calls == 1 + 10  # the probe, then each item once (in a worker)
        again = run_experiment(config("in-one", 1), store=store)
        # in workers again (every item in one): the answers the estimate read go with them
        monkeypatch.setenv(WORKERS_ONLY_ENV, "1")
        hits = run_experiment(config("hits-in-workers", 2), store=store)
        assert len(server.chat_requests) == calls
    assert first.summary.cache_hits == 0 and again.summary.cache_hits == 10
    assert hits.summary.cache_hits == 10
    one = _export("in-one").replace('"in-one"', "N")
    assert _export("in-workers").replace('"in-workers"', "N") == one
    assert _export("hits-in-workers").replace('"hits-in-workers"', "N") == one


def _workers_of(home: Path) -> list[int]:
    """Worker processes still alive that were started for the store under ``home``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"item_worker" in cmdline and str(home).encode() in environ:
            found.append(int(proc.name))
    return found


def _start_killable(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[str], dict[str, str]]:
    """A 30-item CLI run with 2 workers in a session of its own (a terminal's Ctrl-C goes to
    the whole process group); returned once it has stored 6 results."""
    env = {**os.environ, "E2E_CALL_LOG": str(tmp_path / "calls.log"), "E2E_DELAY": "0.15"}
    env["PYTHONPATH"] = str(REPO)
    env[WORKERS_ONLY_ENV] = "1"  # the workers run every item (one is killed mid-run)
    cmd = [sys.executable, "-m", "extraction_eval", "run", "--name", "killed", "--limit", "30"]
    cmd += ["--pipeline", "tests.support.pipelines:first_entity", "--concurrency", "2"]
    cmd += ["--workers", "2", "--backend", "local"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    store = LocalStore()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        run = store.get_run("killed", "extraction-eval")
        if run is not None and len(store.results(run.id)) >= 6:
            break
        time.sleep(0.05)
    return proc, cmd, env


def _resume_finishes(tmp_path: Path, cmd: list[str], env: dict[str, str], home: Path) -> None:
    """No worker left running; ``--resume`` runs the rest, each item once, none again."""
    deadline = time.monotonic() + 20
    while _workers_of(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _workers_of(home) == []  # no orphan left running
    resume_runs_the_rest(tmp_path, cmd, env)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_sigkill_mid_run_then_resume_with_workers(tmp_path: Path, isolated_home: Path) -> None:
    """kill -9 of the run's process: its workers exit (their input ended), the results stored
    stay, ``--resume`` runs the rest, each item once."""
    proc, cmd, env = _start_killable(tmp_path)
    assert _workers_of(isolated_home), "the run has worker processes"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    _resume_finishes(tmp_path, cmd, env, isolated_home)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_ctrl_c_stops_the_run_and_its_workers_then_resume(
    tmp_path: Path, isolated_home: Path
) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it): the workers
    ignore it, the run's process stops them, closes the run as interrupted, exits 130."""
    proc, cmd, env = _start_killable(tmp_path)
    assert _workers_of(isolated_home), "the run has worker processes"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    run = LocalStore().get_run("killed", "extraction-eval")
    assert run is not None and run.status == "interrupted"
    _resume_finishes(tmp_path, cmd, env, isolated_home)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_a_worker_killed_mid_run_turns_its_items_into_rows_and_the_run_goes_on(
    tmp_path: Path, isolated_home: Path
) -> None:
    """kill -9 of one worker: each item it held is an error row saying so, the other worker
    runs the rest, the run finishes with every item a row and a warning."""
    proc, _, _ = _start_killable(tmp_path)
    workers = _workers_of(isolated_home)
    assert len(workers) == 2
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert "worker process" in err.decode() and "exited during the run" in err.decode()
    store = LocalStore()
    run = store.get_run("killed", "extraction-eval")
    assert run is not None and run.status == "finished"
    rows = store.results(run.id)
    assert len(rows) == 30 and len({r.item_id for r in rows}) == 30
    lost = [r for r in rows if r.error is not None]
    assert 1 <= len(lost) <= 2  # what the killed worker held (concurrency 2 over 2 workers)
    assert all("worker process exited" in (r.error or "") for r in lost)


def test_a_worker_stuck_in_its_setup_is_stopped_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers whose setup never ends (a pipeline whose import hangs there): after the start
    bound each is killed and said to have not started, and the run's own process runs every
    item, storing what one process stores."""
    monkeypatch.setenv("E2E_RUN_PID", str(os.getpid()))
    monkeypatch.setenv("EXTRACTION_EVAL_WORKER_START_TIMEOUT", "3")
    monkeypatch.setenv(WORKERS_ONLY_ENV, "1")  # the items wait for the workers' start
    common = ["--limit", "5", "--pipeline", "tests.support.hangs_in_worker:first_entity"]
    one = _run(*common, "--name", "one")
    assert one.exit_code == 0, one.stderr
    started = time.monotonic()
    two = _run(*common, "--name", "two", "--concurrency", "2", "--workers", "2")
    assert two.exit_code == 0, two.stderr
    assert time.monotonic() - started < 60
    for n in (1, 2):
        assert f"worker process {n} could not start (it was not set up after 3" in two.stderr
    assert "the items ran in this process" in two.stderr, two.stderr
    assert _export("one").replace('"one"', "N") == _export("two").replace('"two"', "N")


def test_the_run_runs_items_itself_until_a_worker_is_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers slow to start (their pipeline's import takes 40 s there): the run's own
    process runs the items meanwhile, so a small run does not wait for them; they are
    stopped unused, no warning, and the export is that of one process."""
    monkeypatch.setenv("E2E_RUN_PID", str(os.getpid()))
    monkeypatch.setenv("E2E_WORKER_SETUP_S", "40")
    pids = tmp_path / "pids.log"
    monkeypatch.setenv("E2E_PID_LOG", str(pids))
    common = ["--limit", "6", "--pipeline", "tests.support.hangs_in_worker:first_entity"]
    one = _run(*common, "--name", "one")
    assert one.exit_code == 0, one.stderr
    started = time.monotonic()
    two = _run(*common, "--name", "two", "--concurrency", "2", "--workers", "2")
    assert two.exit_code == 0, two.stderr
    assert time.monotonic() - started < 30
    assert "worker process" not in two.stderr, two.stderr
    ran_in = [line.split()[1] for line in pids.read_text().splitlines()]
    assert ran_in == [str(os.getpid())] * 12
    assert _export("one").replace('"one"', "N") == _export("two").replace('"two"', "N")


def test_a_bad_start_bound_is_one_line_before_any_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A start bound that is not a positive number of seconds: one line naming it, no run."""
    monkeypatch.setenv("EXTRACTION_EVAL_WORKER_START_TIMEOUT", "soon")
    out = _run("--limit", "2", "--name", "bad-bound", "--workers", "2")
    assert out.exit_code != 0
    assert "EXTRACTION_EVAL_WORKER_START_TIMEOUT must be a number of seconds > 0, got 'soon'" in (
        out.stderr
    )
    assert "Traceback" not in out.stderr
    assert LocalStore().get_run("bad-bound") is None
