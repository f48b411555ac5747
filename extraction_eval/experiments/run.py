"""``run_experiment``: the public entry point, shared by the CLI and notebooks. The one place
that decides the mode; both modes run the same driver (``experiments/driver.py``).

The three run modules, outermost first: ``run`` decides *where* a run happens (local or
LangFuse mode) and is the only entry; ``driver`` is the loop both modes share, *when* each
item runs and where its result goes (mirror, console, score sinks, summary); ``runner`` is
*one item's* work (pipeline call, error capture, scoring) and the re-scoring of stored
results into a summary."""

from __future__ import annotations

import asyncio

from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments import local_mode
from extraction_eval.experiments.budget import CostEstimate
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.driver import ProgressHook
from extraction_eval.experiments.runner import RunOutcome


def uses_langfuse(config: RunConfig) -> bool:
    """LangFuse mode when asked for, or on ``auto`` when LangFuse keys are configured."""
    if config.backend != "auto":  # a local run does not import the LangFuse backend at all
        return config.backend == "langfuse"
    from extraction_eval.backends.langfuse import langfuse_configured

    return langfuse_configured()


async def arun_local(
    config: RunConfig,
    *,
    store: LocalStore | None = None,
    progress: ProgressHook | None = None,
) -> RunOutcome:
    """Local mode, whatever the keys say. Await this from a notebook (a running loop)."""
    return await local_mode.arun(config, store=store or LocalStore(), progress=progress)


def run_experiment(
    config: RunConfig,
    *,
    store: LocalStore | None = None,
    progress: ProgressHook | None = None,
) -> RunOutcome:
    """Run an experiment to the end (blocking). LangFuse mode when keys are configured."""
    if uses_langfuse(config):
        from extraction_eval.experiments.langfuse_mode import run_langfuse

        return run_langfuse(config, store=store or LocalStore(), progress=progress)
    return asyncio.run(arun_local(config, store=store, progress=progress))


def estimate_run(config: RunConfig, *, store: LocalStore | None = None) -> CostEstimate:
    """The cost estimate of ``run_experiment(config)`` (``--dry-run``): the same setup checks
    and the same items still to run (a resumed run's done items and cached answers are not
    counted); no model call, nothing created or changed."""
    from extraction_eval.experiments.driver import close_pipeline
    from extraction_eval.experiments.prepare import plan

    store = store or LocalStore()
    if uses_langfuse(config):
        from extraction_eval.experiments.langfuse_mode import plan_langfuse

        p = plan_langfuse(config, store=store)
    else:
        p = plan(config, store, detect=False)
    asyncio.run(close_pipeline(p.runner.pipeline))
    return p.estimate
