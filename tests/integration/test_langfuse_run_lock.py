"""A LangFuse-mode run is locked in the local mirror like a local one: a second process
resuming it is refused before it sends anything, and the lock is given back after the run."""

from __future__ import annotations

import pytest

from extraction_eval.backends.local import LocalStore
from tests.integration.test_langfuse_experiment import DATASET, run_cli, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse


def test_a_langfuse_run_held_by_another_process_is_refused_and_sends_nothing(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import socket

    items = LocalStore().get_items(DATASET)[:3]
    upload(server, items)
    use_langfuse(server, monkeypatch, "run-lock")
    first = run_cli("--name", "lf-locked", "--limit", "2")
    assert first.exit_code == 0, first.stderr
    store = LocalStore()
    run = store.get_run("lf-locked", DATASET)
    assert run is not None and run.backend == "langfuse" and store.run_lock(run.id) is None
    with store._tx(write=True) as conn:  # another live process on this host holds it
        conn.execute(
            "INSERT INTO run_locks VALUES (?, 'other', ?, ?, NULL, 'earlier')",
            (run.id, os.getppid(), socket.gethostname()),
        )
    spans = len(server.spans_named("experiment-item-task"))
    refused = run_cli("--name", "lf-locked", "--resume", "--retry-errors")
    assert refused.exit_code == 2
    assert f"it is being run by pid {os.getppid()}" in refused.stderr
    assert len(server.spans_named("experiment-item-task")) == spans  # nothing was run

    taken = run_cli("--name", "lf-locked", "--resume", "--take-over-lock")
    assert taken.exit_code == 0, taken.stderr
    assert store.run_lock(run.id) is None
    assert len(store.results(run.id)) == 3


def test_a_lone_surrogate_in_a_langfuse_items_text_costs_no_row(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Text from the server is outside input too: a lone surrogate in an item's text (an
    escape in its JSON) is replaced with U+FFFD when the item is read, and logged."""
    items = LocalStore().get_items(DATASET)[:3]
    upload(server, items)
    use_langfuse(server, monkeypatch, "surrogate-item")
    with server._lock:  # the server hands out "\ud800" (an escape in its JSON body)
        history = next(iter(server._state.items.values()))
        when, snapshot = history[-1]
        assert snapshot is not None
        bad = {**snapshot, "input": {**snapshot["input"], "text": "Broken emoji \ud83d"}}
        history.append((when, bad))
    result = run_cli(
        "--name", "lf-surrogate", "--pipeline", "tests.support.hostile_pipelines:echo_text"
    )
    assert result.exit_code == 0, result.stderr
    store = LocalStore()
    run = store.get_run("lf-surrogate", DATASET)
    assert run is not None
    rows = store.results(run.id)
    assert len(rows) == 3 and all(r.ok for r in rows)
    assert "oken emoji \ufffd" in {r.output.entities[0].name for r in rows if r.output}
    assert any("lone UTF-16 surrogates replaced" in r.getMessage() for r in caplog.records)


def test_an_interrupted_langfuse_run_hands_the_sigint_handler_back(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C mid-run: the SDK never starts the items still queued, so the run's SIGINT watch
    is removed after asyncio.run ends; the handler the process had before is put back (not
    asyncio's, which would keep the next run from handling Ctrl-C gracefully)."""
    import os
    import signal
    import time
    from typing import Any

    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig

    items = LocalStore().get_items(DATASET)[:4]
    upload(server, items)
    use_langfuse(server, monkeypatch, "sigint-handback")
    record = LocalStore.record_result

    def interrupting_record(self: LocalStore, run_id: int, result: Any, **how: Any) -> None:
        record(self, run_id, result, **how)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)

    monkeypatch.setattr(LocalStore, "record_result", interrupting_record)
    config = RunConfig(
        dataset=DATASET,
        name="handback",
        pipeline=PipelineConfig(pipeline="tests.support.pipelines:first_entity"),
        concurrency=1,
    )
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config)
    assert signal.getsignal(signal.SIGINT) is before
