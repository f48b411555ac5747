"""The run's side of ``--workers N``: N item worker processes (``workers/item_worker.py``),
started before the run's setup so their imports overlap it, then fed the run's items; until
one is ready the run's process runs the items itself (:meth:`ItemPool.runs_here`).

The run's process keeps everything a run has one of: the scheduler (``run_bounded``, at most
``concurrency`` items in flight over all workers, the next item going to the worker with the
fewest), the budget (asked before each item, as with one process), the store writer (each
result with its cache writes, in the loop turn's group), the summary, the progress bar, the
lock and Ctrl-C. A worker runs and scores an item and sends it back; so the results are the
ones one process makes. Fresh interpreters (``python -I -c``), never a fork: the run's
process has threads. A worker that exits turns each item it held into an error row; with no
worker left the run stops (``--resume`` runs the rest).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import os
import pickle
import queue
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from extraction_eval.backends.local import SQLiteResponseCache
from extraction_eval.backends.local.cache import CacheRow
from extraction_eval.errors import BackendError, ConfigError
from extraction_eval.evaluators import ItemScore
from extraction_eval.experiments.runner import ItemRunner, asked_item
from extraction_eval.types import DatasetItem, ItemResult
from extraction_eval.workers.child import (
    await_setup,
    exit_reason,
    reap,
    relay,
    settle,
    start_python,
)
from extraction_eval.workers.item_worker import DONE, FAILED, LOST, READY, Job, Task

Answer = tuple[ItemResult, ItemScore, list[CacheRow]]
_CODE = (
    "import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer);"
    " from extraction_eval.workers.item_worker import work; work()"
)
_NOTHING = object()  # no message held back by the writer
# how long a worker told to stop may take to exit before it is killed
_STOP_WAIT_S = 5.0
# How long the workers may take to be set up (imports, pipeline, clients: about 2 s of CPU
# each, far more on a loaded machine) before one still not ready is killed and counted as
# a worker that could not start; the run goes on without it. A setup that hangs (a pipeline
# whose import waits on a lock or the network) would otherwise hang the run before any item.
# Overridden by the environment variable below (seconds; for slow machines and the tests).
START_TIMEOUT_S = 120.0
START_TIMEOUT_ENV = "EXTRACTION_EVAL_WORKER_START_TIMEOUT"
# Tests only (not a user setting): "1" makes every item wait for a worker, none run in the
# run's process while the workers start, so which process ran an item is deterministic.
WORKERS_ONLY_ENV = "_EXTRACTION_EVAL_WORKERS_ONLY"


def start_timeout() -> float:
    """:data:`START_TIMEOUT_S`, or the environment's number of seconds (> 0); anything else
    is the run's one-line error, before a worker starts."""
    raw = os.environ.get(START_TIMEOUT_ENV, "").strip()
    if not raw:
        return START_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{START_TIMEOUT_ENV} must be a number of seconds > 0, got {raw!r}")
    return value


class WorkerDied(Exception):
    """An item's error when the worker process running it exited, or could not send it."""


class _Worker:
    """One worker process: its pipes, a thread writing to it, one reading from it."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc, self.errors = start_python(_CODE)  # errors: closed by close()
        self.pending: dict[str, asyncio.Future[Answer]] = {}
        self.ready: asyncio.Future[bool] | None = None
        self.dead: str | None = None  # why it is not running items
        self.set_up = False  # it said it is ready (and did not fail since)
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outbox.put(list(sys.path))  # first: the child imports nothing before it
        self._writer = threading.Thread(target=self._write, daemon=True, name="pool-writer")
        self._writer.start()

    def send(self, message: Any) -> None:
        self._outbox.put(message)

    def _write(self) -> None:
        """Pickles to the child in the order sent; queued items go as one list (one write)."""
        stdin = self.proc.stdin
        assert stdin is not None
        held: Any = _NOTHING
        while True:
            message = self._outbox.get() if held is _NOTHING else held
            held = _NOTHING
            if isinstance(message, (DatasetItem, Task)):
                batch = [message]
                with contextlib.suppress(queue.Empty):
                    while True:
                        held = self._outbox.get_nowait()
                        if not isinstance(held, (DatasetItem, Task)):
                            break  # a stop (or the job) goes after these items
                        batch.append(held)
                        held = _NOTHING
                message = batch
            try:
                pickle.dump(message, stdin, protocol=pickle.HIGHEST_PROTOCOL)
                stdin.flush()
            except (OSError, ValueError):  # it exited: the reader says so
                return
            if message is None:
                with contextlib.suppress(OSError):
                    stdin.close()
                return

    @property
    def is_ready(self) -> bool:
        return self.set_up and self.dead is None

    def why(self) -> str:
        """Why it exited, in one line: the last line it wrote to stderr, else its status."""
        return exit_reason(self.proc, self.errors)

    def close(self) -> None:
        """Let go of its pipes and kept stderr, once it exited. Its stdin too: the writer
        closes it after a stop, but not when the child had gone first (a broken pipe)."""
        self._writer.join(timeout=_STOP_WAIT_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.errors.close()


class ItemPool:
    """``count`` worker processes; :meth:`start` gives them the run, :meth:`run` an item."""

    def __init__(self, count: int) -> None:
        self.workers: list[_Worker] = []
        self.warnings: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._start_timeout = start_timeout()  # a bad value: refused before any process
        self._starting: asyncio.Task[bool] | None = None
        self.started = False  # every worker is set up, failed or was stopped as late
        self._workers_only = os.environ.get(WORKERS_ONLY_ENV) == "1"
        try:
            for i in range(count):
                self.workers.append(_Worker(i))
        except BaseException:
            self.stop()
            raise

    async def start(self, job: Job) -> bool:
        """Send the run's job; wait until every worker is set up or failed (they start at
        once, so the last is ready soon after the first; the items are then spread over all
        from the start), at most :func:`start_timeout` seconds: a worker not ready by then
        is killed. A worker that did not start is left out (a warning); False when none
        started (the caller runs the items in its own process)."""
        loop = self._loop = asyncio.get_running_loop()
        for worker in self.workers:
            worker.ready = loop.create_future()
            relay(
                worker.proc,
                loop,
                functools.partial(self._deliver, worker),
                functools.partial(self._exited, worker),
                _STOP_WAIT_S,
            )
            worker.send(job)
        await await_setup(self.workers, self._start_timeout)
        self.started = True
        return any(w.is_ready for w in self.workers)

    def begin(self, job: Job) -> asyncio.Task[bool]:
        """:meth:`start` in the background: the run's process runs items itself meanwhile
        (:meth:`runs_here`), so a worker's start-up (about 2 s of CPU) delays no item."""
        self._starting = asyncio.get_running_loop().create_task(self.start(job))
        return self._starting

    async def settle(self) -> None:
        """Workers only (tests): wait until every worker is set up or failed, so the items
        spread over all from the start; otherwise nothing to wait for."""
        if self._workers_only and not self.started and self._starting is not None:
            with contextlib.suppress(Exception):  # its failure: no worker, said by run()
                await asyncio.shield(self._starting)

    def runs_here(self) -> bool:
        """Whether the next item runs in the run's process: while no worker is ready yet
        (they are starting), or when none could start; never once one ran items (with none
        left, :meth:`run` stops the run as before)."""
        if any(w.is_ready for w in self.workers):
            return False
        if any(w.set_up for w in self.workers):
            return False
        return self.started or not self._workers_only

    async def run(self, item: DatasetItem, task: Task | None = None) -> Answer:
        """``item`` run in the ready worker with the fewest items in flight (sent as ``task``
        when one is given: the item with what is known of its cached answer)."""
        alive = [w for w in self.workers if w.is_ready and w.dead is None]
        if not alive:
            reasons = "; ".join(sorted({w.dead or "" for w in self.workers}))
            raise BackendError(f"every worker process has exited ({reasons})")
        worker = min(alive, key=lambda w: len(w.pending))
        assert self._loop is not None
        future: asyncio.Future[Answer] = self._loop.create_future()
        worker.pending[item.id] = future
        worker.send(task if task is not None else item)
        try:
            return await future
        finally:
            worker.pending.pop(item.id, None)

    def _deliver(self, worker: _Worker, batch: list[Any]) -> None:
        for message in batch:
            kind = message[0]
            if kind == DONE:
                _, item_id, result, scored, rows = message
                settle(worker.pending.get(item_id), result=(result, scored, rows))
            elif kind == LOST:
                _, item_id, why = message
                settle(worker.pending.get(item_id), error=WorkerDied(why))
            elif kind == READY and worker.ready is not None:
                worker.set_up = True
                settle(worker.ready, result=True)
            elif kind == FAILED:
                worker.dead = str(message[1])
                settle(worker.ready, result=False)

    def _exited(self, worker: _Worker) -> None:
        self._died(worker, worker.why())

    def _died(self, worker: _Worker, why: str) -> None:
        worker.dead = worker.dead or why
        settle(worker.ready, result=False)
        for future in list(worker.pending.values()):
            settle(future, error=WorkerDied(f"its worker process exited ({worker.dead})"))

    def stop(self) -> None:
        """Tell every worker to stop, wait a little, kill what is left; no orphan stays.
        ``warnings`` then says which could not start. A worker still starting is killed at
        once (it holds no item: the run ended before it was needed)."""
        if self._starting is not None:
            self._starting.cancel()
        for worker in self.workers:
            if not worker.set_up and worker.dead is None and worker.proc.poll() is None:
                with contextlib.suppress(OSError):
                    worker.proc.kill()
            elif worker.dead is not None:
                what = "exited during the run" if worker.set_up else "could not start"
                self.warnings.append(f"worker process {worker.index + 1} {what} ({worker.dead})")
            worker.send(None)
        for worker in self.workers:
            reap(worker.proc, _STOP_WAIT_S)
            worker.close()


def remote_scorer(
    pool: ItemPool, runner: ItemRunner, cache: SQLiteResponseCache | None
) -> Callable[[DatasetItem], Awaitable[tuple[ItemResult, ItemScore]]]:
    """``runner.run_scored`` through the pool: the worker's result and score, its cache
    writes held for the result's transaction; an item whose worker died is an error row.
    While no worker is ready (:meth:`ItemPool.runs_here`) ``runner`` runs it here: the
    result is the same (a worker runs the same runner), so who ran an item does not show.
    What the cost estimate learned of the item's cache entry here goes with it (a
    :class:`Task`): the worker does not read it again, and this process holds nothing of it."""
    key_for = getattr(runner.pipeline, "key_for", None)

    def task_for(item: DatasetItem) -> Task | None:
        if cache is None or key_for is None:
            return None
        try:  # as the pipeline will look it up (the estimate did the same, so it cannot fail
            key = key_for(asked_item(runner.view.item(item)))  # here: a bug is no lost item)
        except Exception:
            return None  # the worker looks it up itself (and makes the item's error row)
        known, answer = cache.recall(key)
        return Task(item, key, answer) if known else None

    async def run_scored(item: DatasetItem) -> tuple[ItemResult, ItemScore]:
        await pool.settle()
        if pool.runs_here():
            return await runner.run_scored(item)
        try:
            result, scored, rows = await pool.run(item, task_for(item))
        except WorkerDied as exc:
            return runner.failed(item, exc)
        if rows and cache is not None:
            cache.hold(item.id, rows)
        return result, scored

    return run_scored
