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
