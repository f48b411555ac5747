"""Local mode: items and prompt from the local store, no tracer, scores in the mirror only,
and our own bounded loop (``run_bounded``) as the scheduler of the shared driver."""

from __future__ import annotations

from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.driver import (
    Driver,
    ProgressHook,
    answer_by_batch,
    close_pipeline,
)
from extraction_eval.experiments.prepare import prepare
from extraction_eval.experiments.runner import RunOutcome, run_bounded


async def arun(
    config: RunConfig, *, store: LocalStore, progress: ProgressHook | None
) -> RunOutcome:
    prep = prepare(config, store)
    driver = Driver(prep, store, progress=progress, group_commits=True)
    with driver.running():
        try:
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
            await close_pipeline(prep.runner.pipeline)
    return driver.outcome()
