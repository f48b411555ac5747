"""LangFuse mode's item worker process (``--workers N``): a fresh interpreter that runs its
share of the run's items through the SDK's own ``run_experiment``, with the run's experiment
id and run name, so the SDK links each item's trace to its dataset item and to the one
experiment exactly as a single process does. It has its own event loop (the SDK's), model
client, LangFuse client (keys from the inherited environment), tracer and score batches; it
stores nothing: the run's process (``experiments/langfuse_workers.py``) records each result
it sends back, answers its ``--max-cost`` question before each item, and posts the
run-level scores once every worker finished.

The wire, as the local item worker's (``workers/item_worker.py``, whose setup and outbox this
reuses): stdin carries ``sys.path``, the :class:`~extraction_eval.workers.item_worker.Job`,
then the :class:`Share` (``None``: stop), then budget answers ``(item_id, may_start)``;
stdout carries lists of messages: ``READY`` / ``(FAILED, why)`` after the setup,
``(ASK, item_id)`` before an item when the run has a ceiling, ``(HELD, item_id)`` for an
item not run at the ceiling, ``(DONE, item_id, result, score, cache_rows, observation_id)``,
``(LOST, item_id, why)``, and ``(END, experiment_id, experiment_url)`` once its spans and
scores are delivered (``(GONE, why)`` when ``run_experiment`` itself raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from extraction_eval.errors import one_line
from extraction_eval.types import DatasetItem
from extraction_eval.workers.child import settle
from extraction_eval.workers.item_worker import (
    FAILED,
    LOST,
    READY,
    Job,
    Outbox,
    open_wire,
    set_up,
)

ASK, HELD, DONE, END, GONE = "ask", "held", "lf-done", "end", "gone"
_TURN_WAIT_S = 1.0  # a stop waits this long at most for the loop's current step to end
CODE = (
    "import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer);"
    " from extraction_eval.workers.langfuse_worker import work; work()"
)


@dataclass(frozen=True)
class Share:
    """One worker's part of the run: its items (ours, and the SDK's dataset items the traces
    link to) and what its ``run_experiment`` call needs to write into the run's experiment."""

    items: list[tuple[DatasetItem, Any]]
    experiment_id: str
    run_name: str
    description: str
    metadata: dict[str, str]
    max_concurrency: int
    pinned: datetime | None  # the dataset version the run is pinned to
    trace_url_prefix: str | None
    config_ids: dict[str, str]
    ask_budget: bool  # the run has a ceiling: ask before each item


def work() -> None:
    """The worker's entry (after ``sys.path`` was read): the job (set up, say so), then the
    share, run to its end; a stop or the run's process gone ends it early."""
    source, outbox = open_wire()
    try:
        # all before the job arrives, so it overlaps the run's own setup: the imports and the
        # client (keys and server from the inherited environment); scipy's solver is not
        # preloaded, as in local mode's workers (workers/item_worker.py: the first item
        # whose alignment needs it imports it)
        from extraction_eval.backends.langfuse import LangfuseTracer
        from extraction_eval.experiments.langfuse_mode import connect_for_run

        lf, _ = connect_for_run()
        job: Job = pickle.load(source)
        runner, cache, store = set_up(job, LangfuseTracer(lf, error_level="WARNING"))
    except BaseException as exc:
        outbox.put((FAILED, one_line(exc, with_type=True)))
        outbox.close()
        raise SystemExit(1) from None
    outbox.put((READY,))
    import gc

    gc.freeze()  # the imports' objects are never garbage (see experiments.driver.gc_frozen)
    try:
        share = pickle.load(source)
        if share is not None:
            _run_share(lf, runner, cache, share, source, outbox)
    except Exception as exc:
        outbox.put((GONE, one_line(exc, with_type=True)))
    finally:
        outbox.close()
        if store is not None:
            store.close()


def _run_share(lf: Any, runner: Any, cache: Any, share: Share, source: IO[bytes],
               outbox: Outbox) -> None:  # fmt: skip
    """``share`` through the SDK's ``run_experiment``: each item run, bound to its trace,
    sent back, its scores posted on the trace and task observation (as one process does)."""
    from extraction_eval.backends.langfuse.score_batches import ScoreBatches
    from extraction_eval.experiments.driver import close_pipeline
    from extraction_eval.experiments.langfuse_mode import NOT_RUN, item_output
    from extraction_eval.experiments.langfuse_verify import score_delivery_log

    by_raw_id = {str(raw.id): ours for ours, raw in share.items}
    answers: dict[str, asyncio.Future[bool]] = {}
    batches = ScoreBatches(lf, on_unconfirmed=score_delivery_log.add)
    unfinished = len(share.items)
    sized: list[asyncio.AbstractEventLoop] = []
    threading.Thread(
        target=_read_answers, args=(source, answers, lf, batches, sized), daemon=True,
        name="worker-answers",
    ).start()  # fmt: skip

    async def may_start(item_id: str) -> bool:
        future = asyncio.get_running_loop().create_future()
        answers[item_id] = future
        outbox.put((ASK, item_id))
        try:
            return bool(await future)
        finally:
            answers.pop(item_id, None)

    async def task(*, item: Any, **_: Any) -> Any:
        nonlocal unfinished
        ours = by_raw_id[str(item.id)]
        _size_thread_pool(sized, share.max_concurrency)
        try:
            if share.ask_budget and not await may_start(ours.id):
                lf.update_current_span(level="WARNING", status_message=NOT_RUN)
                outbox.put((HELD, ours.id))
                return {"not_run": NOT_RUN}
            try:
                result, scored = await runner.run_scored(ours)
                rows = cache.take(ours.id) if cache is not None else []
                trace_id = lf.get_current_trace_id()
                observation_id = lf.get_current_observation_id()  # the SDK's task span
                prefix = share.trace_url_prefix
                url = f"{prefix}{trace_id}" if prefix and trace_id else None
                result = result.model_copy(update={"trace_id": trace_id, "trace_url": url})
            except Exception as exc:  # unanswered, the run would wait for it forever
                why = f"it failed in its worker: {one_line(exc, with_type=True)}"
                outbox.put((LOST, ours.id, why))
                raise
            outbox.put((DONE, ours.id, result, scored, rows, observation_id))
            batches.add_item(
                result.scores,
                trace_id=trace_id,
                observation_id=observation_id,
                config_ids=share.config_ids,
            )
            return item_output(lf, result)
        finally:
            unfinished -= 1
            if unfinished == 0:  # the model client's connections belong to the SDK's loop
                await close_pipeline(runner.pipeline)

    extra: dict[str, Any] = {"_dataset_version": share.pinned} if share.pinned else {}
    try:
        res = lf.run_experiment(
            name=share.run_name,
            run_name=share.run_name,
            description=share.description,
            data=[raw for _, raw in share.items],
            task=task,
            max_concurrency=share.max_concurrency,
            metadata=share.metadata,
            experiment_id=share.experiment_id,
            **extra,
        )
    finally:
        batches.close()
        lf.flush()
    outbox.put((END, res.experiment_id, res.experiment_url))


def _read_answers(source: IO[bytes], answers: dict[str, asyncio.Future[bool]], lf: Any,
                  batches: Any, loops: list[asyncio.AbstractEventLoop]) -> None:  # fmt: skip
    """The run's answers to the budget questions, onto the SDK's loop. A stop (``None``)
    delivers what is queued and exits (the run was interrupted: the results it stored keep
    their traces); the run's process gone (end of input) exits at once."""
    while True:
        try:
            message = pickle.load(source)
        except Exception:  # the run's process is gone (kill -9): nobody to deliver for
            os._exit(1)
        if message is None:
            # one turn of the SDK's loop first: an item sent back ends its spans in the loop
            # step that sent it, so every item the run stored has its spans queued
            turned = threading.Event()
            with contextlib.suppress(Exception):
                loops[0].call_soon_threadsafe(turned.set)
                turned.wait(_TURN_WAIT_S)
            with contextlib.suppress(Exception):
                batches.close()
                lf.flush()
            os._exit(0)
        item_id, allowed = message
        future = answers.get(item_id)
        if future is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed
                future.get_loop().call_soon_threadsafe(settle, future, bool(allowed))


def _size_thread_pool(sized: list[asyncio.AbstractEventLoop], concurrency: int) -> None:
    """The SDK's loop gets a thread pool as wide as the worker's concurrency (as the run's
    process gives its loop: ``Driver._size_thread_pool``), before any thread work."""
    from extraction_eval.experiments.driver import size_thread_pool

    loop = asyncio.get_running_loop()
    if sized and sized[0] is loop:
        return
    sized[:] = [loop]
    size_thread_pool(loop, concurrency)
