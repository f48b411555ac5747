"""``run --workers N`` in LangFuse mode: each worker process runs its share of the items
through the real SDK's ``run_experiment`` against the loopback fake server, with the run's
experiment id and run name; the run's process stores, asks the budget, posts the run-level
scores and reads back. Assertions are on what the server received and on the mirror. Each run
starts real worker processes, so the tests are few and small."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.langfuse import experiment_id_for
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.integration.test_langfuse_experiment import (
    DATASET,
    expected_experiment_id,
    item_runs,
    mirror,
    run_cli,
    run_scores,
    upload,
    use_langfuse,
)
from tests.support.fake_log import read_fake_log
from tests.support.langfuse_server import FakeLangfuse

REPO = Path(__file__).resolve().parents[2]
cli = CliRunner()
_TIMES = ("start_time_unix_nano", "end_time_unix_nano", "events", "resource", "scope")
_SCORE_TIMES = ("timestamp", "createdAt", "updatedAt", "environment")


def _export(name: str) -> str:
    out = cli.invoke(app, ["runs", "export", name, "--dataset", DATASET, "--deterministic"])
    assert out.exit_code == 0, out.stderr
    return str(out.stdout).replace(json.dumps(name), '"RUN"')


def received(server: FakeLangfuse, run_name: str) -> dict[str, Any]:
    """What the server holds of one run, ids made symbolic: a trace is its dataset item, a
    span its item and name, the experiment and run name placeholders; times left out. Two runs
    of the same items then compare equal exactly when the same traces, spans (with their
    attributes and links), item scores and run scores arrived."""
    run, _ = mirror(run_name)
    experiment = run.experiment_id
    roots = item_runs(server, experiment)
    item_of = {t: s["attributes"]["langfuse.experiment.item.id"] for t, s in roots.items()}
    assert len(item_of) == len(set(item_of.values())), "one trace per item"
    spans = [s for s in server.spans if s["trace_id"] in item_of]
    span_of = {s["span_id"]: f"{item_of[s['trace_id']]}/{s['name']}" for s in spans}
    ids = {**item_of, **span_of, experiment: "EXP"}

    def symbolic(value: Any) -> Any:
        text = json.dumps(value, sort_keys=True)
        text = re.sub(r"[0-9a-f]{32}|[0-9a-f]{16}", lambda m: ids.get(m[0], m[0]), text)
        return json.loads(text.replace(run_name, "RUN"))

    def view(record: dict[str, Any], drop: tuple[str, ...]) -> str:
        return json.dumps(symbolic({k: v for k, v in record.items() if k not in drop}))

    score_fields = (*_SCORE_TIMES, "id")  # an item score's id derives from its trace id
    view_spans = sorted(view(s, _TIMES) for s in spans)
    scores = server.scores
    item_scores = sorted(view(s, score_fields) for s in scores if s.get("traceId") in item_of)
    run_level = sorted(view(s, score_fields) for s in scores if s.get("datasetRunId") == experiment)
    posted_run_level = [s for s in server.posted_scores if s.get("datasetRunId") == experiment]
    return {
        "spans": view_spans,
        "item_scores": item_scores,
        "run_scores": run_level,
        "run_scores_posted": len(posted_run_level),  # once each, not once per worker
    }


def test_workers_send_and_store_what_one_process_does(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two workers: byte-identical exports, and the server received the same traces, spans
    (linked to their dataset items and the one experiment), item scores on the same task
    observations and run scores as from one process; the two items failing differently (a
    raise, an answer that is not an extraction) ran in the two workers and are error rows."""
    items = LocalStore().get_items(DATASET)[:12]
    dataset_id = upload(server, items)
    use_langfuse(server, monkeypatch, "workers")
    monkeypatch.setenv("E2E_FAIL", items[0].id)
    monkeypatch.setenv("E2E_BAD", items[1].id)
    common = ["--pipeline", "tests.support.pipelines:fails_two_ways", "--concurrency", "4"]
    one = run_cli("--name", "in-one", *common)
    assert one.exit_code == 0, one.stderr
    pids = tmp_path / "pids.log"
    monkeypatch.setenv("E2E_PID_LOG", str(pids))
    two = run_cli("--name", "in-workers", *common, "--workers", "2")
    assert two.exit_code == 0, two.stderr
    assert "verified in LangFuse: 12 traces" in two.stdout
    assert "local mode only" not in two.stderr

    ran_in = dict(line.split() for line in pids.read_text().splitlines())
    assert len(ran_in) == 12 and str(os.getpid()) not in ran_in.values()
    assert len(set(ran_in.values())) == 2  # both workers ran items
    assert ran_in[items[0].id] != ran_in[items[1].id]  # the two failures in two workers
    assert _export("in-one") == _export("in-workers")
    assert received(server, "in-one") == received(server, "in-workers")
    run, rows = mirror("in-workers")
    by_id = {r.item_id: r for r in rows}
    assert by_id[items[0].id].error_kind == "pipeline"
    assert by_id[items[1].id].error_kind == "schema"
    assert sum(r.error is not None for r in rows) == 2
    assert all(r.trace_id and r.trace_url and r.trace_url.endswith(r.trace_id) for r in rows)
    assert {s["attributes"]["langfuse.experiment.id"] for s in item_runs(server).values()} == {
        mirror("in-one")[0].experiment_id,
        run.experiment_id,
    }
    assert run.config.get("langfuse_experiment_url", "").endswith(f"={run.experiment_id}")
    # a fresh run's experiment: the id the SDK (and the server) derive for its name
    assert run.experiment_id == expected_experiment_id(server, dataset_id, "in-workers")


def test_the_experiment_id_for_a_run_is_the_sdks(server: FakeLangfuse, lf: Any) -> None:
    """What every worker is given is what one ``run_experiment`` would derive: the SDK's own
    derivation, on the project the keys belong to."""
    dataset_id = upload(server, LocalStore().get_items(DATASET)[:1])
    ours = experiment_id_for(lf, dataset_id, "a run")
    assert ours == lf._create_experiment_id(
        project_id=server.project_id, dataset_id=dataset_id, run_name="a run"
    )
    assert len(experiment_id_for(lf, None, "a run")) == 16  # no dataset: random, as the SDK's


def test_the_budget_holds_across_langfuse_workers(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One ceiling for the run, asked of the run's process before each item: $0.01 a call,
    two in flight (one per worker), then one more per result recorded while the spend is
    below $0.025. Three or four calls (four when both first results are recorded before
    either worker asks again, three when one worker's second call is back first; one process
    has the same race), never more whichever worker asks; every item not run is a WARNING
    trace and no row."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": {
        "json": {"entities": [], "relationships": []},
        "usage": {"input": 5000, "output": 5000},
    }}))  # fmt: skip
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(script))
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_LOG", str(log))
    items = LocalStore().get_items(DATASET)[:6]
    upload(server, items)
    use_langfuse(server, monkeypatch, "workers-budget")
    stopped = run_cli(
        "--name", "capped", "--model", "fake:budget", "--price-in", "1", "--price-out", "1",
        "--max-cost", "0.025", "--concurrency", "2", "--workers", "2",
    )  # fmt: skip
    assert stopped.exit_code == 1, stopped.stderr
    calls = len(read_fake_log(log))
    assert calls in (3, 4)
    assert "stopped: budget" in stopped.stderr and f"{6 - calls} items not run" in stopped.stderr
    run, rows = mirror("capped")
    assert run.status == "stopped: budget" and len(rows) == calls
    assert run.summary is not None and run.summary["cost_usd"] == pytest.approx(calls / 100)
    tasks = server.spans_named("experiment-item-task")
    held = [s for s in tasks if s["attributes"].get("langfuse.observation.level") == "WARNING"]
    assert len(held) == 6 - calls
    # the items ran in the two workers (each process has its own OTel resource)
    assert len({s["resource"].get("service.instance.id") for s in tasks}) == 2
    assert run_scores(server, run.experiment_id or "")["items"]["value"] == calls


def test_workers_dying_differently_turn_their_items_into_rows_each_saying_why(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of the two workers exits mid-run, for its own reason: every item it had not sent
    back is an error row naming its worker's reason, the other items are stored, the run
    finishes with a warning per worker, and the read-back says which items LangFuse lacks."""
    items = LocalStore().get_items(DATASET)[:8]
    upload(server, items)
    use_langfuse(server, monkeypatch, "workers-die")
    monkeypatch.setenv("E2E_RUN_PID", str(os.getpid()))
    # round-robin: items 4 and 5 are the third of worker 1 and of worker 2
    monkeypatch.setenv("E2E_DIE", json.dumps({
        items[4].id: "first worker: out of memory", items[5].id: "second worker: segfault",
    }))  # fmt: skip
    result = run_cli(
        "--name", "dying", "--pipeline", "tests.support.dies_in_worker:first_entity",
        "--concurrency", "2", "--workers", "2",
    )  # fmt: skip
    err = " ".join(result.stderr.split())
    assert "worker process 1 exited during the run (exit status 3: first worker: out of" in err
    assert "worker process 2 exited during the run (exit status 3: second worker: segf" in err
    run, rows = mirror("dying")
    assert run.status == "finished" and len(rows) == 8
    lost = {r.item_id: r.error or "" for r in rows if r.error is not None}
    # what each worker held from its fatal item on; an item it finished just before may be
    # lost with it too (its answer still queued for the pipe when the process went)
    assert {i.id for i in items[4:]} <= set(lost) <= {i.id for i in items[2:]}
    for n, item in enumerate(items):
        if item.id in lost:
            assert "worker process exited" in lost[item.id]
            reason = "out of memory" if n % 2 == 0 else "segfault"  # round-robin: whose
            assert reason in lost[item.id], lost[item.id]
    assert all(r.trace_id for r in rows if r.error is None)
    # a worker that dies takes what it had not delivered yet with it (as kill -9 of one
    # process would): the read-back says what LangFuse lacks, the lost items first
    assert result.exit_code == 3 and "LangFuse is missing data from run 'dying'" in err, err
    assert f"missing {len(lost)} items without a trace" in err


def _workers_of(home: Path) -> list[int]:
    """LangFuse-mode worker processes still alive started for the store under ``home``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"langfuse_worker" in cmdline and str(home).encode() in environ:
            found.append(int(proc.name))
    return found


def _started_mid_run(
    name: str, calls: Path, home: Path
) -> tuple[subprocess.Popen[bytes], dict[str, str], list[str]]:
    """``run-experiment --workers 2`` in a process group of its own (a slow pipeline), once it
    stored 4 results with its workers running; its environment and command, for the resume."""
    env = {**os.environ, "E2E_CALL_LOG": str(calls), "E2E_DELAY": "0.2", "PYTHONPATH": str(REPO)}
    code = "from extraction_eval.cli import run_experiment_main; run_experiment_main()"
    cmd = [sys.executable, "-c", code, "--name", name, "--concurrency", "2", "--workers", "2"]
    cmd += ["--pipeline", "tests.support.pipelines:first_entity"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    store = LocalStore()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        run = store.get_run(name, DATASET)
        if run is not None and len(store.results(run.id)) >= 4:
            break
        time.sleep(0.05)
    assert _workers_of(home), "the run has worker processes"
    return proc, env, cmd


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_sigkill_mid_run_then_resume_with_langfuse_workers(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated_home: Path
) -> None:
    """kill -9 of the run's process: its workers exit (their input ended), the results stored
    stay, ``--resume`` runs the rest into the same experiment, each item once."""
    items = LocalStore().get_items(DATASET)[:20]
    upload(server, items)
    use_langfuse(server, monkeypatch, "workers-kill")
    proc, env, cmd = _started_mid_run("killed", tmp_path / "calls.log", isolated_home)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.stderr is not None
    proc.stderr.close()
    deadline = time.monotonic() + 20
    while _workers_of(isolated_home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _workers_of(isolated_home) == []  # no orphan left running

    run, done = mirror("killed")
    done_before = {r.item_id for r in done}
    assert 4 <= len(done_before) < 20 and run.experiment_id
    env["E2E_CALL_LOG"] = str(tmp_path / "resume.log")
    env["E2E_DELAY"] = "0"
    resumed = subprocess.run([*cmd, "--resume"], cwd=REPO, env=env, capture_output=True)
    assert resumed.returncode == 0, resumed.stderr.decode()
    again, rows = mirror("killed")
    assert len(rows) == 20 and len({r.item_id for r in rows}) == 20
    resumed_calls = (tmp_path / "resume.log").read_text().split()
    assert not set(resumed_calls) & done_before
    assert len(resumed_calls) == len(set(resumed_calls))
    assert again.experiment_id == run.experiment_id
    traced = {s["attributes"]["langfuse.experiment.id"] for s in item_runs(server).values()}
    assert traced == {run.experiment_id}  # one experiment, both invocations
    assert run_scores(server, run.experiment_id)["items"]["value"] == 20


def test_workers_that_cannot_set_up_leave_the_items_to_the_run_process(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers stuck in their setup are stopped after the start bound, each said to have not
    started; the run's own process runs every item, as with one process."""
    items = LocalStore().get_items(DATASET)[:3]
    upload(server, items)
    use_langfuse(server, monkeypatch, "workers-setup")
    monkeypatch.setenv("E2E_RUN_PID", str(os.getpid()))
    monkeypatch.setenv("EXTRACTION_EVAL_WORKER_START_TIMEOUT", "3")
    result = run_cli(
        "--name", "fallback", "--pipeline", "tests.support.hangs_in_worker:first_entity",
        "--concurrency", "2", "--workers", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    for n in (1, 2):
        assert f"worker process {n} could not start (it was not set up after 3" in result.stderr
    assert "the items ran in this process" in result.stderr
    run, rows = mirror("fallback")
    assert run.status == "finished" and len(rows) == 3 and all(r.trace_id for r in rows)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_ctrl_c_stops_the_workers_keeps_what_they_sent_then_resume(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated_home: Path
) -> None:
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it): the workers ignore
    it, the run's process stops them (each delivers what it queued first), closes the run as
    interrupted with its run scores, exits 130; every stored result's trace is in LangFuse;
    ``--resume`` finishes the run into the same experiment."""
    items = LocalStore().get_items(DATASET)[:20]
    upload(server, items)
    use_langfuse(server, monkeypatch, "workers-ctrl-c")
    proc, _, _ = _started_mid_run("cc", tmp_path / "calls.log", isolated_home)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err
    assert _workers_of(isolated_home) == []  # stopped with the run

    run, done = mirror("cc")
    assert run.status == "interrupted" and 4 <= len(done) < 20 and run.experiment_id
    assert {r.trace_id for r in done} <= set(item_runs(server, run.experiment_id))
    assert run_scores(server, run.experiment_id)["items"]["value"] == len(done)
    monkeypatch.setenv("E2E_DELAY", "0")
    resumed = run_cli("--name", "cc", "--pipeline", "tests.support.pipelines:first_entity",
                      "--resume", "--workers", "2")  # fmt: skip
    assert resumed.exit_code == 0, resumed.stderr
    run, rows = mirror("cc")
    assert run.status == "finished" and len(rows) == 20
    assert run_scores(server, run.experiment_id or "")["items"]["value"] == 20
