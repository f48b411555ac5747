"""The response cache on a run's per-item hot path, watched statement by statement on the
store's own SQLite connection: one read of the cache per item (the cost estimate's question;
the item's own lookup then reads nothing, whether the key was missing or its answer was found
and held), and each item's cache write is committed in its result's transaction, not in one of
its own."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore, cache
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig

ITEMS = 6


@pytest.fixture
def traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalStore, list[str]]:
    script = {"default": {"entities": [{"name": "Ada", "type": "person"}], "relationships": []}}
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(path))
    store = LocalStore(tmp_path / "store.db")
    statements: list[str] = []
    assert store._conn is not None
    store._conn.set_trace_callback(lambda sql: statements.append(" ".join(sql.split())))
    return store, statements


def _run(store: LocalStore, name: str) -> None:
    config = RunConfig(
        dataset="extraction-eval",
        name=name,
        pipeline=PipelineConfig(model="fake:hot"),
        limit=ITEMS,
        concurrency=2,
    )
    outcome = run_experiment(config, store=store)
    assert len(outcome.results) == ITEMS and outcome.summary.errors == 0


def _transactions(statements: list[str]) -> list[list[str]]:
    """Statements grouped by transaction; a statement outside BEGIN..COMMIT is its own."""
    out: list[list[str]] = []
    current: list[str] | None = None
    for sql in statements:
        if sql.startswith("BEGIN"):
            current = []
        elif sql in ("COMMIT", "ROLLBACK"):
            if current is not None:
                out.append(current)
            current = None
        elif current is not None:
            current.append(sql)
        else:
            out.append([sql])
    return out


def _item_writes(statements: list[str]) -> list[list[str]]:
    """The statements of each item's writes: a savepoint of a run's group of writes, or a
    transaction of its own."""
    out: list[list[str]] = []
    for tx in _transactions(statements):
        current: list[str] | None = None
        for sql in tx:
            if sql.startswith("SAVEPOINT"):
                current = []
            elif sql.startswith("RELEASE"):
                if current is not None:
                    out.append(current)
                current = None
            elif current is not None:
                current.append(sql)
        if not any(sql.startswith("SAVEPOINT") for sql in tx):
            out.append(tx)
    return out


def test_each_cache_write_joins_its_results_transaction(
    traced: tuple[LocalStore, list[str]],
) -> None:
    store, statements = traced
    _run(store, "hot-1")
    writes = [w for w in _item_writes(statements) if any("INTO response_cache" in s for s in w)]
    assert len(writes) == ITEMS  # one per item: every answer was new
    for w in writes:
        assert any(s.startswith("INSERT INTO results") for s in w), w
    for tx in _transactions(statements):  # never committed apart from its result
        if any("INTO response_cache" in s for s in tx):
            assert any(s.startswith("INSERT INTO results") for s in tx), tx


def test_results_finished_in_one_turn_of_the_loop_share_one_commit(
    traced: tuple[LocalStore, list[str]],
) -> None:
    """The fake model answers without waiting: items finish together, their results are
    committed together (never more than --concurrency of them), each under its savepoint."""
    store, statements = traced
    _run(store, "grouped")
    with_results = [tx for tx in _transactions(statements) if any("INTO results" in s for s in tx)]
    assert sum(1 for tx in with_results for s in tx if "INTO results" in s) == ITEMS
    assert len(with_results) < ITEMS  # not one transaction per item
    assert max(sum(1 for s in tx if "INTO results" in s) for tx in with_results) <= 2


def test_the_cache_is_read_once_per_item(traced: tuple[LocalStore, list[str]]) -> None:
    store, statements = traced
    _run(store, "hot-2")
    reads = [s for s in statements if s.startswith("SELECT") and "FROM response_cache" in s]
    assert len(reads) == ITEMS, reads  # the estimate asked; the items did not ask again
    statements.clear()
    _run(store, "hot-3")  # every answer cached now: the items read their answers
    hits = [s for s in statements if "SELECT text, model, usage FROM response_cache" in s]
    assert len(hits) == ITEMS
    with store._tx(write=False) as conn:
        cached = conn.execute("SELECT COUNT(*) FROM response_cache").fetchone()[0]
        answered = conn.execute(
            "SELECT COUNT(*) FROM results r JOIN runs ON runs.id = r.run_id"
            " WHERE runs.name = 'hot-3' AND r.cache_hit = 1"
        ).fetchone()[0]
    assert cached == ITEMS and answered == ITEMS


def _cache_reads(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith("SELECT") and "FROM response_cache" in s]


def test_a_cache_hit_is_read_once_per_item(traced: tuple[LocalStore, list[str]]) -> None:
    store, statements = traced
    _run(store, "hit-1")  # fills the cache
    statements.clear()
    _run(store, "hit-2")  # every answer cached: the estimate reads each, the item not again
    reads = _cache_reads(statements)
    assert len(reads) == ITEMS, reads
    assert len(set(reads)) == ITEMS  # each item's key once
    assert all(r.startswith("SELECT text, model, usage FROM response_cache") for r in reads)


def test_past_the_hold_limit_a_hit_is_read_again_and_answered_the_same(
    traced: tuple[LocalStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, statements = traced
    _run(store, "held-1")
    statements.clear()
    monkeypatch.setattr(cache, "HOLD_FOUND_CHARS", 0)  # nothing held: the item reads again
    _run(store, "held-2")
    assert len(_cache_reads(statements)) == 2 * ITEMS
    first, second = (store.get_run(n, "extraction-eval") for n in ("held-1", "held-2"))
    assert first is not None and second is not None
    ids = [f"sample-{i:03d}" for i in range(1, ITEMS + 1)]
    outputs = [[r.output for r in store.iter_item_results(run.id, ids)] for run in (first, second)]
    assert outputs[0] == outputs[1] and all(o is not None for o in outputs[1])


def test_a_failed_group_commit_is_a_write_error_and_resume_runs_those_items(
    traced: tuple[LocalStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from extraction_eval.backends.local.connection import StoreConnection
    from extraction_eval.errors import BackendError

    store, _ = traced
    real = StoreConnection._end_group
    failures: list[int] = []

    def fail_once(self: StoreConnection) -> None:
        if self._group and not failures and self._conn is not None:
            failures.append(1)  # what a failed COMMIT leaves: the group rolled back, an error
            self._group = False
            self._conn.execute("ROLLBACK")
            raise BackendError("local store: disk I/O error")
        real(self)

    monkeypatch.setattr(StoreConnection, "_end_group", fail_once)
    config = RunConfig(
        dataset="extraction-eval",
        name="lost-commit",
        pipeline=PipelineConfig(model="fake:hot"),
        limit=ITEMS,
        concurrency=2,
    )
    with pytest.raises(BackendError, match="could not be written"):
        run_experiment(config, store=store)
    run = store.get_run("lost-commit", "extraction-eval")
    assert run is not None and run.status == "finished"
    stored = store.result_ids(run.id)
    assert 0 < len(stored) < ITEMS  # the failed group's results are not there ...
    assert run.summary is not None and run.summary["items"] == len(stored)  # nor counted
    resumed = run_experiment(dataclasses.replace(config, resume=True), store=store)
    assert resumed.ran == ITEMS - len(stored) and len(resumed.results) == ITEMS


def test_a_failed_write_does_not_hold_the_store_while_the_run_waits(
    traced: tuple[LocalStore, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first item's row cannot be written; while the next item waits for its model, the
    store's write lock is free (another process could write): the group that the failed
    write opened was committed at the end of its turn, not held until the next row."""
    import asyncio
    import sqlite3

    from extraction_eval.backends.local import runs
    from extraction_eval.errors import BackendError
    from extraction_eval.llm.fake import FakeProvider

    store, _ = traced
    real_write, real_complete = runs._write_result, FakeProvider.complete
    seen: list[str] = []

    def write(conn: sqlite3.Connection, run_id: int, result: Any) -> None:
        if result.item_id == "sample-001":
            raise OSError("disk I/O error")
        real_write(conn, run_id, result)

    async def complete(self: FakeProvider, request: Any) -> Any:
        await asyncio.sleep(0)  # the model call is under way: the loop turns
        other = sqlite3.connect(tmp_path / "store.db", timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            seen.append("free")
        except sqlite3.OperationalError as exc:
            seen.append(str(exc))
        finally:
            other.close()
        return await real_complete(self, request)

    monkeypatch.setattr(runs, "_write_result", write)
    monkeypatch.setattr(FakeProvider, "complete", complete)
    config = RunConfig(
        dataset="extraction-eval",
        name="write-fails",
        pipeline=PipelineConfig(model="fake:hot"),
        limit=3,
        concurrency=1,
    )
    with pytest.raises(BackendError, match="1 results could not be written"):
        run_experiment(config, store=store)
    assert seen == ["free", "free", "free"], seen


def test_what_the_caches_hold_is_bounded_for_the_whole_process(
    traced: tuple[LocalStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two caches (a matrix's cells, both prepared before either runs) share one bound on the
    answers held for their items; a cache dropped while holding some gives them back."""
    import gc

    from extraction_eval.llm.base import Completion
    from extraction_eval.types import Usage

    store, _ = traced
    answer = Completion(text="x" * 100, model="m", usage=Usage())
    store.cache().write([("k1", answer), ("k2", answer), ("k3", answer)])
    gc.collect()
    base = cache._Held.total  # what other caches of this process hold
    monkeypatch.setattr(cache, "HOLD_FOUND_CHARS", base + 250)  # room for two answers
    first, second = store.cache(), store.cache()
    assert first.contains("k1") and first.contains("k2") and second.contains("k3")
    assert cache._Held.total == base + 200  # the third was not held: it will be read again
    del first
    gc.collect()
    assert cache._Held.total == base  # given back
    assert second.contains("k3") and cache._Held.total == base + 100
    assert second.get("k3") == answer and cache._Held.total == base
