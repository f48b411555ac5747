"""The run's side of ``--workers N`` in LangFuse mode: N worker processes
(``workers/langfuse_worker.py``), each running its share of the items through the SDK's own
``run_experiment`` with the run's experiment id and run name, so LangFuse shows one
experiment whose item traces the SDK linked, exactly as with one process.

The run's process keeps what a run has one of: the store writer (each result a worker sends
back is recorded by the shared ``Driver``, as one process records it), the progress bar, the
lock, Ctrl-C, the summary, the run-level scores (posted once, after every worker finished)
and the read-back (each result carries its trace id, and its task observation id comes with
it). ``--max-cost`` is a question to this process before each item: the ceiling is then the
one ``Driver.may_start`` of a single process, judged on every result recorded before the
question, whichever worker ran it (tickets handed out ahead would let items start on spend
not yet recorded, so more could run past the ceiling than with one process).

The items are split up front (the SDK takes a list), round-robin over the workers that set up;
each gets its part of ``--concurrency``. A worker whose setup fails is left out (a warning);
with none set up the run's own process runs the items. A worker that exits mid-run turns
each of its items not yet back into an error row, and the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import pickle
import sys
import threading
from typing import TYPE_CHECKING, Any

from extraction_eval.backends.langfuse import experiment_id_for
from extraction_eval.backends.local import LocalStore, SQLiteResponseCache
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.driver import Driver
from extraction_eval.experiments.summary import RunSummary
from extraction_eval.types import DatasetItem, ItemResult
from extraction_eval.workers.child import (
    await_setup,
    exit_reason,
    reap,
    relay,
    settle,
    start_python,
)
from extraction_eval.workers.item_pool import WorkerDied, start_timeout
from extraction_eval.workers.item_worker import FAILED, LOST, READY, job_for
from extraction_eval.workers.langfuse_worker import ASK, CODE, DONE, END, GONE, HELD, Share

if TYPE_CHECKING:
    from langfuse import Langfuse

    from extraction_eval.backends.langfuse import RunDataset
    from extraction_eval.experiments.langfuse_mode import LangfuseScores

_STOP_WAIT_S = 5.0  # a worker told to stop may take this long to deliver and exit
_HELD = object()  # an item not run at the ceiling: no row


def worker_count(config: RunConfig) -> int:
    """As local mode's: ``workers``, at most one per item in flight; one for ``--batch``."""
    from extraction_eval.experiments.local_mode import worker_count as local_count

    return local_count(config)


class _Worker:
    """One worker process: its pipes, a thread reading its messages onto the run's loop."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc, self.errors = start_python(CODE)
        self.pending: dict[str, DatasetItem] = {}  # sent in its share, not back yet
        self.ready: asyncio.Future[bool] | None = None
        self.finished: asyncio.Future[tuple[str | None, str | None]] | None = None
        self.dead: str | None = None
        self.set_up = False
        self.ran = False  # it was given a share
        self._lock = threading.Lock()
        self.send(list(sys.path))  # first: the child imports nothing before it

    def send(self, message: Any) -> None:
        """Small messages (the job, a share once, budget answers); never from two threads."""
        stdin = self.proc.stdin
        assert stdin is not None
        with self._lock, contextlib.suppress(OSError, ValueError):  # it exited: its reader says
            pickle.dump(message, stdin, protocol=pickle.HIGHEST_PROTOCOL)
            stdin.flush()

    def why(self) -> str:
        return exit_reason(self.proc, self.errors)


class LangfuseWorkers:
    """``count`` worker processes, started before the run's setup (their imports overlap it)."""

    def __init__(self, count: int) -> None:
        self.workers: list[_Worker] = []
        self.warnings: list[str] = []
        self.start_timeout = start_timeout()  # a bad value: refused before any process starts
        self._stopped = False
        try:
            for i in range(count):
                self.workers.append(_Worker(i))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Tell every worker to stop (it delivers what it queued), kill what is left after a
        while; ``warnings`` then says which could not start or exited during the run."""
        if self._stopped:
            return
        self._stopped = True
        for worker in self.workers:
            if worker.dead is not None:
                what = "exited during the run" if worker.ran else "could not start"
                self.warnings.append(f"worker process {worker.index + 1} {what} ({worker.dead})")
            worker.send(None)
        for worker in self.workers:
            reap(worker.proc, _STOP_WAIT_S)
            for stream in (worker.proc.stdin, worker.proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            worker.errors.close()


def start_workers(config: RunConfig) -> LangfuseWorkers | None:
    """The run's worker processes, or None for one process."""
    count = worker_count(config)
    return LangfuseWorkers(count) if count > 1 else None


def run_in_workers(lf: Langfuse, driver: Driver, scores: LangfuseScores, dataset: RunDataset,
                   pool: LangfuseWorkers) -> bool:  # fmt: skip
    """The driver's items in ``pool``'s workers; False (nothing run) when none set up. The
    experiment id is fixed first: the stored one (a resume), else the one the SDK derives."""
    prep = driver.prep
    experiment_id = scores.experiment_id or experiment_id_for(
        lf, dataset.langfuse_id, prep.run.name
    )
    assert isinstance(driver.store, LocalStore), "LangFuse mode mirrors into a local store"
    job = job_for(prep.runner, driver.store, prep.config.pipeline)
    prompt = getattr(prep.runner.pipeline, "prompt", None)
    if prompt is not None and getattr(prompt, "client", None) is not None:
        from dataclasses import replace

        job = replace(job, prompt=prompt)  # with its client: generations link the version
    try:
        return asyncio.run(_drive(lf, driver, scores, dataset, pool, job, experiment_id))
    finally:
        pool.stop()
        prep.warnings.extend(pool.warnings)


async def _drive(lf: Langfuse, driver: Driver, scores: LangfuseScores, dataset: RunDataset,
                 pool: LangfuseWorkers, job: Any, experiment_id: str) -> bool:  # fmt: skip
    from extraction_eval.experiments.langfuse_mode import experiment_metadata

    loop = asyncio.get_running_loop()
    prep = driver.prep
    state = _State(driver, scores)
    for worker in pool.workers:
        worker.ready = loop.create_future()
        worker.finished = loop.create_future()
        relay(
            worker.proc,
            loop,
            functools.partial(_deliver, worker, state=state),
            functools.partial(_exited, worker, state),
            _STOP_WAIT_S,
        )
        worker.send(job)
    await await_setup(pool.workers, pool.start_timeout)
    ready = [w for w in pool.workers if w.set_up and w.dead is None]
    if not ready:
        prep.warnings.append("no worker process could start: the items ran in this process")
        return False
    scores.experiment_done(experiment_id, None)  # into the mirror before any item
    todo = list(prep.iter_todo())
    concurrency = prep.config.concurrency
    state.expect(len(todo))
    driver.use(state.run_scored)
    sink = driver.scores
    driver.scores = _Posted(scores)  # the workers bound and posted each item's scores
    try:
        for n, worker in enumerate(ready):
            part = todo[n :: len(ready)]
            if not part:
                settle(worker.finished, (None, None))
                continue
            worker.pending.update((item.id, item) for item in part)
            worker.ran = True
            worker.send(Share(
                items=[(i, dataset.raw_by_id[i.id]) for i in part],
                experiment_id=experiment_id,
                run_name=prep.run.name,
                description=f"extraction-eval run {prep.run.name!r} on {prep.config.dataset!r}"
                f" ({prep.run.config.get('model') or prep.config.pipeline.model})",
                metadata=experiment_metadata(prep.run.config),
                max_concurrency=concurrency // len(ready) + (n < concurrency % len(ready)),
                pinned=dataset.pinned,
                trace_url_prefix=scores.trace_url_prefix,
                config_ids=dict(scores.config_ids),
                ask_budget=prep.budget is not None,
            ))  # fmt: skip
        await state.all_recorded()
        ends = await asyncio.gather(*(w.finished for w in ready if w.finished is not None))
        scores.experiment_done(experiment_id, next((url for _, url in ends if url), None))
    finally:
        driver.scores = sink
    return True


class _State:
    """What the run's loop keeps about the items out in the workers: each answer that came
    back, recorded by the driver in a task of its own (created as it arrives, so a run holds
    no task per item still out); a budget question waits until those are recorded (its answer
    then counts them all)."""

    def __init__(self, driver: Driver, scores: LangfuseScores) -> None:
        self.driver = driver
        self.observations = scores.observations  # trace id -> task observation (read-back)
        cache = getattr(driver.prep.runner.pipeline, "cache", None)
        cache = getattr(cache, "inner", cache)  # --refresh-cache wraps it (write-only)
        # a worker's cache writes, held for its result's transaction (as local mode's)
        self.cache = cache if isinstance(cache, SQLiteResponseCache) else None
        self.answers: dict[str, Any] = {}
        self.unrecorded: set[str] = set()
        self._questions: list[tuple[_Worker, str]] = []  # budget questions waiting for those
        self._tasks: set[asyncio.Task[None]] = set()
        self._out = 0  # items not back and recorded (or held back) yet
        self._done: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None

    def expect(self, count: int) -> None:
        self._out = count
        self._done = asyncio.get_running_loop().create_future()
        if count == 0:
            self._done.set_result(None)

    async def all_recorded(self) -> None:
        """Every item back and recorded (or held back); a recording that raised, raised."""
        assert self._done is not None
        await self._done
        if self._failure is not None:
            raise self._failure

    async def run_scored(self, item: DatasetItem) -> Any:
        return self.answers.pop(item.id)

    def arrived(self, item: DatasetItem, answer: Any) -> None:
        """An item's result (or, from a worker that lost it, its error row) to record."""
        self.answers[item.id] = answer
        self.unrecorded.add(item.id)
        task = asyncio.get_running_loop().create_task(self._record(item))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def lost(self, item: DatasetItem, why: str) -> None:
        self.arrived(item, self.driver.prep.runner.failed(item, WorkerDied(why)))

    def back(self) -> None:
        """One item fewer out (recorded, or not run at the ceiling: no row)."""
        self._out -= 1
        if self._out <= 0 and self._done is not None:
            settle(self._done)

    async def _record(self, item: DatasetItem) -> None:
        try:
            result = await self.driver.run_item(item)
            self.driver.record(result)
        except Exception as exc:  # said by all_recorded; the other items go on
            self._failure = self._failure or exc
        finally:
            self.unrecorded.discard(item.id)
            self.answers.pop(item.id, None)
            self.back()
            if not self.unrecorded:
                questions, self._questions = self._questions, []
                for worker, item_id in questions:
                    self.answer(worker, item_id)

    def answer(self, worker: _Worker, item_id: str) -> None:
        """``may_start`` once every result that came back before the question is recorded
        (held until the last of them is: ``_record`` answers it then)."""
        if self.unrecorded:
            self._questions.append((worker, item_id))
            return
        worker.send((item_id, self.driver.may_start()))


def _deliver(worker: _Worker, batch: list[Any], state: _State) -> None:
    for message in batch:
        kind = message[0]
        if kind in (DONE, HELD, LOST):
            item = worker.pending.pop(message[1], None)
            if item is None:
                continue  # already turned into a row (cannot happen twice)
            if kind == DONE:
                _, item_id, result, scored, rows, observation_id = message
                if rows and state.cache is not None:
                    state.cache.hold(item_id, rows)
                if result.trace_id and observation_id:
                    state.observations[result.trace_id] = observation_id
                state.arrived(item, (result, scored))
            elif kind == HELD:
                state.back()
            else:
                state.lost(item, message[2])
        elif kind == ASK:
            state.answer(worker, message[1])
        elif kind == READY:
            worker.set_up = True
            settle(worker.ready, True)
        elif kind == FAILED:
            worker.dead = str(message[1])
            settle(worker.ready, False)
        elif kind == END:  # after every item it sent back (one pipe, in order)
            for _ in worker.pending:  # items the SDK never gave the task: no row, as in
                state.back()  # one process (the run's outcome names them)
            worker.pending.clear()
            settle(worker.finished, (message[1], message[2]))
        elif kind == GONE:
            worker.dead = f"its experiment failed: {message[1]}"


def _exited(worker: _Worker, state: _State) -> None:
    _died(worker, worker.why(), state)


def _died(worker: _Worker, why: str, state: _State) -> None:
    if worker.finished is not None and worker.finished.done():
        return  # it finished its share, then exited: nothing lost
    worker.dead = worker.dead or why
    settle(worker.ready, False)
    settle(worker.finished, (None, None))
    lost, worker.pending = list(worker.pending.values()), {}
    for item in lost:
        state.lost(item, f"its worker process exited ({worker.dead})")


class _Posted:
    """The run's score sink while workers run the items: each result came back bound to its
    trace and its item scores posted by its worker; the run-level scores are posted here."""

    def __init__(self, scores: LangfuseScores) -> None:
        self.scores = scores

    def bind(self, result: ItemResult) -> ItemResult:
        return result

    def post_item(self, result: ItemResult) -> None:
        return None

    def post_run(self, summary: RunSummary) -> None:
        self.scores.post_run(summary)
