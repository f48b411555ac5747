"""The driver both modes share: each item run, mirrored, shown and scored as it finishes;
the run then closed, summarised and handed back the same way.

A mode supplies only what differs (see ``local_mode`` and ``langfuse_mode``): where the items
and prompt come from and the tracer (both go into ``prepare``), a ``ScoreSink`` for scores
that go somewhere besides the mirror, and the scheduler that calls ``Driver.run_item`` then
``Driver.record`` for every item, at most ``concurrency`` at a time on one event loop.

Between its neighbours: ``run`` (the entry point) picks the mode that builds this driver;
``runner`` does each item's work (pipeline call, scoring) that this driver schedules and
records.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol

from extraction_eval.backends.base import ResultStore
from extraction_eval.backends.local import LocalStore, SQLiteResponseCache
from extraction_eval.errors import BackendError, one_line
from extraction_eval.evaluators import ItemScore
from extraction_eval.experiments.prepare import PreparedRun, discard_if_empty, release_lock
from extraction_eval.experiments.repair import MASKED_SCORE, REPAIRED_SCORE, clean_result
from extraction_eval.experiments.runner import USAGE_SCORE, RunOutcome, finalize, stored_results
from extraction_eval.experiments.summary import RunSummary, SummaryAccumulator
from extraction_eval.types import DatasetItem, ItemResult

log = logging.getLogger(__name__)

# The run status when the --max-cost ceiling stopped it (the rest of its items unrun).
STOPPED_BUDGET = "stopped: budget"


class ProgressHook(Protocol):
    def start(self, *, total: int, done: int) -> None: ...

    def advance(self, result: ItemResult) -> None: ...


class NoProgress:
    def start(self, *, total: int, done: int) -> None:
        return None

    def advance(self, result: ItemResult) -> None:
        return None


RunScored = Callable[[DatasetItem], Awaitable[tuple[ItemResult, ItemScore]]]


class Recorded(NamedTuple):
    """What the run keeps of an item it recorded: enough for the read-back, and small (a
    whole result per item kept in memory slows the run through the garbage collector)."""

    trace_id: str | None
    score_names: tuple[str, ...]


class ScoreSink(Protocol):
    """Where scores go besides the local mirror. ``bind`` and ``post_item`` are called in the
    item's own context (in LangFuse mode: inside the item's task span)."""

    def bind(self, result: ItemResult) -> ItemResult:
        """The result tied to where its scores go (e.g. its trace id and URL)."""
        ...

    def post_item(self, result: ItemResult) -> None: ...

    def post_run(self, summary: RunSummary) -> None:
        """The run-level scores, once the run is finalized (finished or interrupted)."""
        ...


class MirrorOnly:
    """Local mode: every score lives in the local store, nowhere else."""

    def bind(self, result: ItemResult) -> ItemResult:
        return result

    def post_item(self, result: ItemResult) -> None:
        return None

    def post_run(self, summary: RunSummary) -> None:
        return None


async def close_pipeline(pipeline: object) -> None:
    """Close SDK clients on the loop that used them (otherwise transports leak)."""
    aclose = getattr(pipeline, "aclose", None)
    if aclose is not None:
        await aclose()


async def answer_by_batch(prep: PreparedRun, store: LocalStore) -> None:
    """Send the run's remaining model calls through the Batch API and wait for the answers;
    the items then run as usual, answered from the batch (errors become item errors)."""
    from extraction_eval.llm.batch import batch_pipeline, summary_line

    todo = list(prep.iter_todo())  # a batch file holds them all anyway; not the offline path
    results = await batch_pipeline(
        prep.runner.pipeline,
        todo,
        store,
        owner=f"run {prep.run.name} (dataset {prep.run.dataset})",
        cache=getattr(prep.runner.pipeline, "cache", None),  # as the run's cache mode has it
    )
    asked = len(results.answers) + len(results.errors)
    prep.warnings.append(summary_line(results, asked))


class _Freeze:
    """How many runs of this process are inside ``gc_frozen``, and whether we froze."""

    lock = threading.Lock()
    depth = 0
    ours = False


@contextmanager
def gc_frozen() -> Iterator[None]:
    """Keep the collector's full passes off everything alive before the run.

    Imports (the SDKs, pydantic's schemas) leave about a million tracked objects that are
    never garbage; every full collection during the run walked them all again, which cost
    about a fifth of the loop's CPU at high concurrency (``benchmarks/bench_vs_peers.py``).
    Frozen, they are skipped; they go back to the collector when the last run of the process
    ends (runs side by side, or a matrix's cells, share one freeze). A freeze made by someone
    else is left as it is.
    """
    with _Freeze.lock:
        if _Freeze.depth == 0:
            _Freeze.ours = gc.get_freeze_count() == 0
            if _Freeze.ours:
                gc.freeze()
        _Freeze.depth += 1
    try:
        yield
    finally:
        with _Freeze.lock:
            _Freeze.depth -= 1
            if _Freeze.depth == 0 and _Freeze.ours:
                gc.unfreeze()
                _Freeze.ours = False


class _Fold:
    """The summary of the results this invocation stored, folded as each was recorded
    (scored once, in ``Driver.run_item``): finalize re-scores only what earlier invocations
    stored. ``broken``: the fold cannot be trusted (an item recorded twice, or a fold cut
    short); finalize then re-scores every stored result."""

    def __init__(self, prep: PreparedRun) -> None:
        self.prep = prep
        self.summary = SummaryAccumulator(prep.runner.scoring)
        self.ids: set[str] = set()
        self.broken = False

    def add(self, result: ItemResult, scored: ItemScore | None) -> None:
        if scored is None or result.item_id in self.ids:
            self.broken = True  # recorded twice, or not run through ``run_item``
            return
        unfinished, self.broken = self.broken, True  # stays set if the fold is cut short
        self.summary.add(result, scored)
        self.ids.add(result.item_id)
        self.broken = unfinished

    def unfolded(self) -> Iterator[DatasetItem]:
        """The run's items whose results are not folded yet (none, unless resumed)."""
        if len(self.ids) == len(self.prep.item_ids):
            return iter(())  # every item folded: the items need not be read again
        return (i for i in self.prep.iter_items() if i.id not in self.ids)


def size_thread_pool(loop: asyncio.AbstractEventLoop, concurrency: int) -> None:
    """``loop``'s default executor as wide as ``concurrency`` + 4 (the SDK's own calls in
    threads) when that is more than asyncio's default (see ``Driver._size_thread_pool``)."""
    workers = concurrency + 4
    if workers > min(32, (os.cpu_count() or 1) + 4):
        loop.set_default_executor(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="extraction-eval")
        )


class Driver:
    """One run's per-item steps and its close; the scheduler of a mode calls them. It needs
    of the store only what a :class:`~extraction_eval.backends.base.ResultStore` offers."""

    def __init__(
        self,
        prep: PreparedRun,
        store: ResultStore,
        *,
        progress: ProgressHook | None = None,
        scores: ScoreSink | None = None,
        group_commits: bool = False,
    ) -> None:
        self.prep = prep
        # one item run and scored: here, or in a worker process (``use``)
        self._run_scored: RunScored = prep.runner.run_scored
        self.store = store
        self.progress = progress or NoProgress()
        self.scores: ScoreSink = scores or MirrorOnly()
        self.recorded: dict[str, Recorded] = {}  # this invocation's items, by id
        self._fold = _Fold(prep)
        self._scored: dict[str, ItemScore] = {}  # between an item's run and its record
        self.write_errors: list[str] = []
        self.repaired = 0  # items whose text needed repair (lone surrogates) to be stored
        self.masked = 0  # items whose answer held a secret, stored masked
        self.estimated = 0  # items whose reported usage could not be true: priced by estimate
        self._names: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple per name set
        self._sized_loop: asyncio.AbstractEventLoop | None = None
        self._closed: RunSummary | None = None
        # the run's response cache: an item's writes are committed with its result
        cache = getattr(prep.runner.pipeline, "cache", None)
        cache = getattr(cache, "inner", cache)  # --refresh-cache wraps it (write-only)
        self._cache = cache if isinstance(cache, SQLiteResponseCache) else None
        # local store, one event loop: the results recorded in one turn of the loop are
        # committed together at its end (``_commit``), not one transaction each; never more
        # than ``concurrency`` of them (a pipeline that never awaits never ends a turn)
        self._group = group_commits and isinstance(store, LocalStore)
        self._group_cap = max(prep.config.concurrency, 1)
        self._uncommitted: list[str] = []  # item ids written into the open group
        self._commit_due = False  # a ``_commit`` is scheduled at the end of this turn

    def use(self, run_scored: RunScored) -> None:
        """Run and score each item with ``run_scored`` (``--workers``: in a worker process)
        instead of the runner here; recording stays here."""
        self._run_scored = run_scored

    # per item ---------------------------------------------------------------------------------

    async def run_item(self, item: DatasetItem) -> ItemResult:
        """The pipeline call, scored (never raises for the item's own failure)."""
        self._size_thread_pool()
        result, scored = await self._run_scored(item)
        bound = self.scores.bind(result)  # may raise (LangFuse): then nothing is kept here
        self._scored[item.id] = scored
        return bound

    def record(self, result: ItemResult) -> None:
        """The result sink: the mirror first (never lose an item), then progress and scores.

        Runs on the loop thread, one result at a time and with no ``await``: a Ctrl-C lands
        before or after it, so a row that is written also gets its scores.
        """
        if self.prep.budget is not None:
            self.prep.budget.add(result.usage)
        scored = self._scored.pop(result.item_id, None)
        cache = self._cache
        cache_rows = cache.take(result.item_id) if cache is not None else []
        try:
            try:
                self._write(result, cache_rows)
            except UnicodeEncodeError:  # text the runner did not clean: clean it all, again
                result = clean_result(result) or result
                self._write(result, cache_rows)
        except Exception as exc:  # reported after the run; the other items go on
            self.write_errors.append(f"{result.item_id}: {one_line(exc)}")
        else:
            self._fold.add(result, scored)
        if any(s.name == REPAIRED_SCORE for s in result.scores):
            self.repaired += 1
        if any(s.name == MASKED_SCORE for s in result.scores):
            self.masked += 1
        if result.usage.problem is not None:
            self.estimated += 1
        names = tuple(sorted({s.name for s in result.scores}))
        self.recorded[result.item_id] = Recorded(
            result.trace_id, self._names.setdefault(names, names)
        )
        self.progress.advance(result)
        self.scores.post_item(result)

    def _write(self, result: ItemResult, cache_rows: list[Any]) -> None:
        cache = self._cache
        if self._group and isinstance(self.store, LocalStore):
            # into the loop turn's group, the item's cache writes with it (all or none); the
            # commit is scheduled first, so a group is never left open by a failed write
            if not self._commit_due:
                self._commit_due = True
                asyncio.get_running_loop().call_soon(self._commit)
            self.store.record_result(self.prep.run.id, result, cache_rows=cache_rows, group=True)
            self._uncommitted.append(result.item_id)
            if len(self._uncommitted) >= self._group_cap:
                self._commit()
        elif cache_rows and isinstance(self.store, LocalStore):
            # the item's cache writes join its result's transaction
            self.store.record_result(self.prep.run.id, result, cache_rows=cache_rows)
        else:
            self.store.record_result(self.prep.run.id, result)
            if cache is not None and cache_rows:  # another result store: on their own
                cache.write(cache_rows)

    def _commit(self) -> None:
        """Commit the results written in this turn of the loop (called at its end, and
        before the run closes). A failed commit loses them: each is a write error (the run
        then fails, and ``--resume`` runs them), and the summary is re-read from the store."""
        self._commit_due = False
        ids, self._uncommitted = self._uncommitted, []
        if not self._group or not isinstance(self.store, LocalStore):
            return
        try:
            self.store.commit_group()  # nothing when no group is open
        except Exception as exc:
            lost = ids or ["(no result)"]
            self.write_errors.extend(f"{i}: {one_line(exc)}" for i in lost)
            self._fold.broken = True

    def may_start(self) -> bool:
        """Whether a new item may start: False once the spend reached ``--max-cost`` (the
        items in flight still finish; the rest stay unrun, for ``--resume``)."""
        budget = self.prep.budget
        if budget is None or not budget.exhausted:
            return True
        budget.held_back += 1
        return False

    @property
    def stopped_by_budget(self) -> bool:
        budget = self.prep.budget
        return budget is not None and budget.held_back > 0 and self._not_run() > 0

    def _not_run(self) -> int:
        return sum(1 for i in self.prep.todo_ids if i not in self.recorded)

    def _size_thread_pool(self) -> None:
        """Give the running loop a thread pool as wide as the run's concurrency.

        Blocking work in ``asyncio.to_thread`` (SDK calls, providers' sync parts) uses the
        loop's default executor, which has min(32, CPUs + 4) workers: on a 2-CPU machine at
        most 6 such calls would overlap whatever the concurrency says (sync user pipelines
        run in daemon threads of their own: ``pipeline.user``). Done in the first item on
        each loop (LangFuse mode's loop is created inside the SDK's ``run_experiment``),
        before any thread work.
        """
        loop = asyncio.get_running_loop()
        if self._sized_loop is loop:
            return
        self._sized_loop = loop
        size_thread_pool(loop, self.prep.config.concurrency)

    # the run ----------------------------------------------------------------------------------

    @contextmanager
    def running(self) -> Iterator[None]:
        """Around the scheduler: progress starts; at the end (finished, or interrupted by an
        exception, which goes on) the run is finalized from the store and its run-level
        scores go to the sink. A run this invocation created that ended before its first
        item is deleted instead."""
        prep = self.prep
        total = len(prep.item_ids)
        self.progress.start(total=total, done=total - len(prep.todo_ids))
        status = "interrupted"
        try:
            with gc_frozen():
                yield
            status = STOPPED_BUDGET if self.stopped_by_budget else "finished"
        finally:
            try:
                self._close(status)
            finally:
                release_lock(self.store, prep)  # also when closing failed: never left held

    def _close(self, status: str) -> None:
        """Finalize the run (or delete it, when it ended before its first item)."""
        prep = self.prep
        self._commit()  # the last turn's results (before anything else reads the store)
        if self._cache is not None:
            self._cache.flush()  # writes of items whose result was not stored
        if not (status != "finished" and discard_if_empty(self.store, prep)):
            if self._fold.broken or status == "interrupted":  # an exception may have cut a
                # fold short (a Ctrl-C lands anywhere): re-score everything stored
                summary = finalize(
                    self.store, prep.run, prep.iter_items(), prep.runner, status=status
                )
            else:
                summary = finalize(
                    self.store, prep.run, self._fold.unfolded(), prep.runner, status=status,
                    folded=self._fold.summary,
                )  # fmt: skip
            self._closed = summary
            self.scores.post_run(summary)

    def outcome(self, *, experiment_url: str | None = None) -> RunOutcome:
        """The finished run; raises ``BackendError`` when results could not be stored."""
        assert self._closed is not None, "outcome() after a finished running() block"
        prep = self.prep
        lost = [i for i in prep.todo_ids if i not in self.recorded]
        budget = None
        if prep.budget is not None:
            budget = prep.budget.to_json() | {"stopped": self.stopped_by_budget}
            budget["not_run"] = len(lost) if self.stopped_by_budget else 0
        if lost and not self.stopped_by_budget:
            # cannot happen unless a scheduler dropped an item before it ran: say so
            prep.warnings.append(
                f"{len(lost)} items produced no result in this run ({', '.join(lost[:5])});"
                " resume the run to run them"
            )
        if self.repaired:
            prep.warnings.append(
                f"{self.repaired} items had lone UTF-16 surrogates in their text, stored as"
                f" U+FFFD (score {REPAIRED_SCORE}: which fields)"
            )
        if self.masked:
            prep.warnings.append(
                f"{self.masked} items' answers held a configured secret or token-shaped text,"
                f" stored masked as *** and scored so (score {MASKED_SCORE}: which fields)"
            )
        if self.estimated:
            prep.warnings.append(
                f"{self.estimated} items' model calls reported usage that is missing or cannot"
                f" be true; their tokens and cost are estimated (score {USAGE_SCORE}: why)"
            )
        if self.write_errors:
            raise BackendError(
                f"{len(self.write_errors)} results could not be written to the local store"
                f" (first: {self.write_errors[0]})"
            )
        run = self.store.get_run(prep.run.name, prep.run.dataset) or prep.run
        return RunOutcome(
            run=run,
            summary=self._closed,
            read_results=stored_results(self.store, prep.run.id, prep.item_ids),
            ran=len(prep.todo_ids) - (len(lost) if self.stopped_by_budget else 0),
            warnings=prep.warnings,
            experiment_url=experiment_url,
            estimate=prep.estimate,
            budget=budget,
        )
