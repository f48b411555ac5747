"""The parent and child plumbing of the worker processes (``workers/``): an item whose run
raises in a worker is still answered (else the run waits for it forever), a worker that
cannot start leaves no open file, and a worker's failure line never carries a secret."""

from __future__ import annotations

import asyncio
import io
import pickle
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Any

import pytest

from extraction_eval.types import DatasetItem
from extraction_eval.workers.item_pool import ItemPool
from extraction_eval.workers.item_worker import DONE, LOST, READY, _serve
from extraction_eval.workers.report_worker import Worker


class _Raising:
    """A runner whose ``run_scored`` raises (a scorer's bug, not the pipeline's failure)."""

    pipeline = None

    async def run_scored(self, item: DatasetItem) -> Any:
        raise RuntimeError(f"scoring {item.id} broke")


class _Outbox:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def put(self, message: Any) -> None:
        self.sent.append(message)


def test_an_item_whose_run_raises_in_a_worker_is_answered_as_lost() -> None:
    items = [DatasetItem(id="a", text="Ada."), DatasetItem(id="b", text="Bob.")]
    source = io.BytesIO(pickle.dumps(items) + pickle.dumps(None))
    outbox = _Outbox()
    asyncio.run(_serve(_Raising(), None, source, outbox))  # type: ignore[arg-type]
    assert outbox.sent[0] == (READY,)
    lost = {m[1]: m[2] for m in outbox.sent if m[0] == LOST}
    assert set(lost) == {"a", "b"} and not [m for m in outbox.sent if m[0] == DONE]
    assert "RuntimeError: scoring a broke" in lost["a"]


def test_a_worker_that_cannot_start_leaves_no_open_file(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[IO[bytes]] = []
    real = tempfile.TemporaryFile

    def recorded(*args: Any, **kwargs: Any) -> IO[bytes]:
        opened.append(real(*args, **kwargs))
        return opened[-1]

    def no_python(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        raise OSError("no interpreter here")

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    monkeypatch.setattr(subprocess, "Popen", no_python)
    with pytest.raises(OSError, match="no interpreter here"):
        ItemPool(2)
    assert opened and all(f.closed for f in opened)


def test_a_worker_failure_line_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "review1-worker-secret-5b7e2c9d"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    worker = Worker(tmp_path / "absent.db", [], 0)
    try:
        worker.proc.wait(timeout=60)
        worker.errors.write(f"ValueError: the gateway refused key {secret}\n".encode())
        why = worker.why()
    finally:
        worker.stop()
        worker.close()
    assert "gateway refused key" in why and secret not in why


def test_a_worker_gone_before_its_stop_leaves_no_pipe_open() -> None:
    """The child died; the next message met a broken pipe, so the writer never sent the
    stop (nor closed stdin): stopping the pool still closes both pipes."""
    pool = ItemPool(1)
    (worker,) = pool.workers
    worker.proc.kill()
    worker.proc.wait(timeout=60)
    worker.send(DatasetItem(id="a", text="Ada."))
    worker._writer.join(timeout=60)  # it met the broken pipe and returned
    pool.stop()
    assert worker.proc.stdin is not None and worker.proc.stdin.closed
    assert worker.proc.stdout is not None and worker.proc.stdout.closed


class _Reads:
    """The store's cache reads, counted (a worker's cache primed by the run's process makes
    none for the items it was told about)."""

    def __init__(self, store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[str] = []
        real = store._cache_get

        def counted(key: str) -> Any:
            self.keys.append(key)
            return real(key)

        monkeypatch.setattr(store, "_cache_get", counted)


class _LooksUp:
    """A runner whose item looks its key up in the worker's cache, as a model pipeline does."""

    pipeline = None

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.got: dict[str, Any] = {}

    async def run_scored(self, item: DatasetItem) -> Any:
        self.got[item.id] = self.cache.get(f"key-{item.id}")
        return item.id, None


def test_a_worker_told_what_the_estimate_read_reads_the_cache_no_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's cost estimate read each item's cache entry (``contains``); with ``--workers``
    the item's worker used to read it again. Now the run's process hands over what it read
    (a :class:`Task`: an answer, or "not cached") and keeps none of it; the worker's lookup
    reads nothing. A bare item (nothing known) is still looked up."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.llm.base import Completion
    from extraction_eval.workers.item_worker import Task

    answer = Completion(text='{"entities": []}', model="m")
    parent = LocalStore(tmp_path / "s.db", sample=False)
    parent.cache().write([("key-hit", answer)])
    estimate = parent.cache(defer_writes=True)
    assert estimate.contains("key-hit") and not estimate.contains("key-miss")
    told = {k: estimate.recall(k) for k in ("key-hit", "key-miss", "key-other")}
    assert told == {"key-hit": (True, answer), "key-miss": (True, None), "key-other": (False, None)}
    assert estimate.recall("key-hit") == (False, None)  # taken: the run's process holds none

    child = LocalStore(tmp_path / "s.db", sample=False)
    reads = _Reads(child, monkeypatch)
    cache = child.cache(defer_writes=True)
    runner = _LooksUp(cache)
    tasks = [
        Task(DatasetItem(id="hit", text="Ada."), "key-hit", told["key-hit"][1]),
        Task(DatasetItem(id="miss", text="Bob."), "key-miss", None),
        DatasetItem(id="other", text="Cy."),
    ]
    source = io.BytesIO(pickle.dumps(tasks) + pickle.dumps(None))
    outbox = _Outbox()
    asyncio.run(_serve(runner, cache, source, outbox))  # type: ignore[arg-type]
    assert runner.got == {"hit": answer, "miss": None, "other": None}
    assert reads.keys == ["key-other"]
    assert sorted(m[1] for m in outbox.sent if m[0] == DONE) == ["hit", "miss", "other"]
    assert cache.recall("key-hit") == cache.recall("key-miss") == (False, None)  # none left
    child.close()
    parent.close()


class _TellingPool:
    """An ``ItemPool`` with a ready worker that records what it was sent."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def settle(self) -> None:
        return None

    def runs_here(self) -> bool:
        return False

    async def run(self, item: DatasetItem, task: Any = None) -> Any:
        self.sent.append(task)
        return item.id, None, []


def test_the_run_s_process_sends_each_item_with_what_its_estimate_read(tmp_path: Path) -> None:
    """The run's side of the hand-over: the item's key as its pipeline looks it up and what
    ``contains`` read for it go with the item; an item the estimate did not look up goes
    bare (None), its worker reads the cache itself."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.evaluators import ScoringConfig
    from extraction_eval.experiments.runner import ItemRunner, asked_item
    from extraction_eval.pipeline.base import PipelineConfig
    from extraction_eval.pipeline.factory import make_pipeline
    from extraction_eval.prompts.template import load_local_prompt
    from extraction_eval.workers.item_pool import remote_scorer
    from extraction_eval.workers.item_worker import Task

    store = LocalStore(tmp_path / "s.db", sample=False)
    cache = store.cache(defer_writes=True)
    pipeline = make_pipeline(PipelineConfig(model="fake:test"), cache=cache,
                             prompt=load_local_prompt())  # fmt: skip
    runner = ItemRunner(pipeline=pipeline, scoring=ScoringConfig())
    looked_up, unknown = DatasetItem(id="a", text="Ada."), DatasetItem(id="b", text="Bob.")
    key = pipeline.key_for(asked_item(runner.view.item(looked_up)))  # type: ignore[attr-defined]
    assert not cache.contains(key)  # the estimate's question: not cached
    pool = _TellingPool()
    run_scored = remote_scorer(pool, runner, cache)  # type: ignore[arg-type]

    async def both() -> None:
        await run_scored(looked_up)
        await run_scored(unknown)

    asyncio.run(both())
    assert pool.sent == [Task(looked_up, key, None), None]
    assert cache.recall(key) == (False, None)  # handed over, not kept here
    store.close()


def test_an_item_whose_cache_key_cannot_be_made_here_goes_bare(tmp_path: Path) -> None:
    """The hand-over never costs an item: should making its key fail in the run's process,
    the item goes without it and its worker (which makes its row) looks it up itself."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.evaluators import ScoringConfig
    from extraction_eval.experiments.runner import ItemRunner
    from extraction_eval.workers.item_pool import remote_scorer

    class _NoKey:
        cache = None

        def key_for(self, item: DatasetItem) -> str:
            raise ValueError("no key for this item")

    store = LocalStore(tmp_path / "s.db", sample=False)
    runner = ItemRunner(pipeline=_NoKey(), scoring=ScoringConfig())  # type: ignore[arg-type]
    pool = _TellingPool()
    run_scored = remote_scorer(pool, runner, store.cache(defer_writes=True))  # type: ignore[arg-type]
    assert asyncio.run(run_scored(DatasetItem(id="a", text="Ada."))) == ("a", None)
    assert pool.sent == [None]
    store.close()
