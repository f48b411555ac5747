"""Local mode: items and prompt from the local store, no tracer, scores in the mirror only,
and our own bounded loop (``run_bounded``) as the scheduler of the shared driver; with
``workers`` > 1 the items run and are scored in worker processes (``workers/item_pool.py``)
while this process schedules, stores and shows them."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from extraction_eval.backends.local import LocalStore, SQLiteResponseCache
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.driver import (
    Driver,
    ProgressHook,
    answer_by_batch,
    close_pipeline,
)
from extraction_eval.experiments.prepare import PreparedRun, prepare
from extraction_eval.experiments.runner import RunOutcome, run_bounded

if TYPE_CHECKING:
    from extraction_eval.workers.item_pool import ItemPool


def worker_count(config: RunConfig) -> int:
    """How many worker processes the run uses: ``workers``, at most one per item in flight;
    one (this process) for a Batch API run, whose answers are all fetched here first."""
    if config.batch:
        return 1
    return max(1, min(config.workers, config.concurrency))


async def arun(
    config: RunConfig, *, store: LocalStore, progress: ProgressHook | None
) -> RunOutcome:
    count = worker_count(config)
    pool = _start_pool(count)  # their imports overlap the setup
    try:
        # with workers, they score (and import scipy if an item needs it), not the setup
        prep = prepare(config, store, scores_here=pool is None)
    except BaseException:
        if pool is not None:
            pool.stop()
        raise
    driver = Driver(prep, store, progress=progress, group_commits=True)
    with driver.running():
        try:
            if pool is not None:
                await _use_pool(pool, prep, store, driver)
            if config.batch:
                await answer_by_batch(prep, store)
            await run_bounded(
                prep.iter_todo(),
                driver.run_item,
                concurrency=prep.config.concurrency,
                on_result=driver.record,
                may_start=driver.may_start,
            )
        finally:
            if pool is not None:
                pool.stop()
                prep.warnings.extend(pool.warnings)
            await close_pipeline(prep.runner.pipeline)
    return driver.outcome()


def _start_pool(count: int) -> ItemPool | None:
    if count <= 1:
        return None
    from extraction_eval.workers.item_pool import ItemPool

    return ItemPool(count)


async def _use_pool(pool: ItemPool, prep: PreparedRun, store: LocalStore, driver: Driver) -> None:
    """The driver's items run in ``pool``'s workers (each told the run's setup first)."""
    from extraction_eval.workers.item_pool import remote_scorer
    from extraction_eval.workers.item_worker import job_for

    if not prep.todo_ids:
        return
    starting = pool.begin(job_for(prep.runner, store, prep.config.pipeline))
    starting.add_done_callback(lambda task: _none_started(task, prep))
    cache = getattr(prep.runner.pipeline, "cache", None)
    cache = getattr(cache, "inner", cache)  # --refresh-cache wraps it (write-only)
    held = cache if isinstance(cache, SQLiteResponseCache) else None
    driver.use(remote_scorer(pool, prep.runner, held))  # here until a worker is ready


def _none_started(task: asyncio.Task[bool], prep: PreparedRun) -> None:
    if not task.cancelled() and task.exception() is None and not task.result():
        prep.warnings.append("no worker process could start: the items ran in this process")
