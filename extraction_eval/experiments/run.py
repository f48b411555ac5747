"""``run_experiment``: the public entry point, shared by the CLI and notebooks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import UsageError
from extraction_eval.evaluators import ContextIndex
from extraction_eval.experiments.config import RunConfig, check_fail_under_attributes, describe
from extraction_eval.experiments.runner import (
    ItemRunner,
    RunOutcome,
    finalize,
    run_bounded,
    select_items,
)
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.prompts.versions import select_run_prompt
from extraction_eval.types import DatasetItem, ItemResult

log = logging.getLogger(__name__)

# Config keys that must not change when a run is resumed: results would mix two experiments.
_RESUME_INVARIANTS = ("model", "temperature", "prompt_hash", "pipeline_ref", "price_override")


class ProgressHook(Protocol):
    def start(self, *, total: int, done: int) -> None: ...

    def advance(self, result: ItemResult) -> None: ...


class _NoProgress:
    def start(self, *, total: int, done: int) -> None:
        return None

    def advance(self, result: ItemResult) -> None:
        return None


@dataclass
class PreparedRun:
    """Everything resolved before the first model call; shared by local and LangFuse mode."""

    config: RunConfig
    run: RunRecord
    items: list[DatasetItem]
    todo: list[DatasetItem]
    runner: ItemRunner
    prompt: PromptTemplate
    warnings: list[str]
    created: bool = False  # this invocation created the run (see ``discard_if_empty``)


def default_run_name(config: RunConfig) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{config.pipeline.model.replace(':', '-')}-{stamp}"


def run_record(config: RunConfig, prompt: PromptTemplate, **extra: Any) -> dict[str, Any]:
    return describe(
        config,
        prompt={
            "name": prompt.name,
            "label": prompt.label,
            "version": prompt.version,
            "source": prompt.source,
        },
        prompt_hash=prompt.content_hash,
        pipeline_ref=config.pipeline.pipeline,
        **extra,
    )


def open_run(
    store: LocalStore,
    config: RunConfig,
    items: Sequence[DatasetItem],
    *,
    dataset_version: int | str | None,
    record: dict[str, Any],
    backend: str = "local",
) -> tuple[RunRecord, list[DatasetItem]]:
    """Create the run, or reopen it for ``--resume`` / ``--retry-errors``; return what to do."""
    existing = check_reuse(store, config, record)
    if existing is None:
        assert config.name is not None
        run = store.create_run(
            name=config.name,
            dataset=config.dataset,
            dataset_version=dataset_version,
            config=record,
            backend=backend,
        )
        return run, list(items)
    store.update_run(existing.id, status="running")
    done = {r.item_id: r for r in store.results(existing.id)}
    return existing, select_items(items, done, retry_errors=config.retry_errors)


def check_reuse(store: LocalStore, config: RunConfig, record: dict[str, Any]) -> RunRecord | None:
    """The stored run this invocation continues (None: a new one); raise when the name is
    taken without ``--resume`` / ``--retry-errors`` or the resumed run's setup changed."""
    assert config.name is not None
    existing = store.get_run(config.name, config.dataset)
    if existing is None:
        return None
    if not (config.resume or config.retry_errors):
        raise UsageError(
            f"run {config.name!r} already exists on dataset {config.dataset!r}; "
            "pass --resume to continue it, --retry-errors to re-run its failures, "
            "or choose another --name"
        )
    changed = [k for k in _RESUME_INVARIANTS if existing.config.get(k) != record.get(k)]
    if changed:
        raise UsageError(
            f"cannot resume run {config.name!r}: {', '.join(changed)} differ from the original run"
        )
    return existing


def discard_if_empty(store: LocalStore, prep: PreparedRun) -> bool:
    """A run this invocation created that ended before its first item leaves nothing behind:
    it is deleted, so the same ``--name`` works again without ``--resume``."""
    return prep.created and store.delete_empty_run(prep.run.id)


def prepare(
    config: RunConfig,
    store: LocalStore,
    *,
    items: Sequence[DatasetItem] | None = None,
    dataset_version: int | str | None = None,
    prompt: PromptTemplate | None = None,
    tracer: Any = None,
    backend: str = "local",
    extra_record: dict[str, Any] | None = None,
) -> PreparedRun:
    warnings: list[str] = []
    if items is None:
        info = store.get_dataset(config.dataset)
        dataset_version = config.dataset_version or info.version
        items = store.get_items(config.dataset, version=config.dataset_version)
    if config.limit is not None:
        items = list(items)[: config.limit]
    if not items:
        raise UsageError(f"dataset {config.dataset!r} has no items to run")
    check_fail_under_attributes(config.fail_under, items, config.dataset)
    if config.name is None:
        config = replace(config, name=default_run_name(config))
    # local mode: the local store's version asked for by --prompt-label/--prompt-version (an
    # unknown one is an error before the run exists), else the bundled template
    prompt = prompt or select_run_prompt(store, config.pipeline)
    record = run_record(config, prompt, **(extra_record or {}))
    # Everything that can refuse the setup (name taken, unknown provider, missing key, bad
    # --pipeline) runs before the run record exists: a refused setup leaves nothing behind.
    created = check_reuse(store, config, record) is None
    pipeline = make_pipeline(config.pipeline, cache=store.cache(), prompt=prompt, tracer=tracer)
    runner = ItemRunner(
        pipeline=pipeline,
        scoring=config.scoring,
        context_texts=ContextIndex({item.id: item.text for item in items}),
        pricer=Pricer.for_config(config.pipeline),
    )
    run, todo = open_run(
        store, config, items, dataset_version=dataset_version, record=record, backend=backend
    )
    started_with = (run.config.get("pricing") or {}).get("version")
    now_with = record["pricing"].get("version")
    if todo and started_with != now_with:  # a resumed run, priced by another database version
        warnings.append(
            f"items run now are priced with genai-prices {now_with}; run {config.name!r}"
            f" started with {started_with} (its record keeps that)"
        )
    return PreparedRun(config, run, list(items), todo, runner, prompt, warnings, created)


async def close_pipeline(pipeline: object) -> None:
    """Close SDK clients on the loop that used them (otherwise transports leak)."""
    aclose = getattr(pipeline, "aclose", None)
    if aclose is not None:
        await aclose()


async def arun_local(
    config: RunConfig,
    *,
    store: LocalStore | None = None,
    progress: ProgressHook | None = None,
) -> RunOutcome:
    """Local mode: our bounded loop over the local store. Await this from a notebook."""
    store = store or LocalStore()
    progress = progress or _NoProgress()
    prep = prepare(config, store)
    progress.start(total=len(prep.items), done=len(prep.items) - len(prep.todo))

    def on_result(result: ItemResult) -> None:
        store.record_result(prep.run.id, result)
        progress.advance(result)

    # Sync user pipelines run in the loop's default executor: make it as wide as the run's
    # concurrency (asyncio's default is min(32, CPUs + 4) threads, 6 on a 2-core machine).
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=prep.config.concurrency, thread_name_prefix="pipeline")
    )
    status = "interrupted"
    try:
        await run_bounded(
            prep.todo,
            prep.runner.run_item,
            concurrency=prep.config.concurrency,
            on_result=on_result,
        )
        status = "finished"
    finally:
        await close_pipeline(prep.runner.pipeline)
        # died before its first item (the exception goes on): nothing to finalize
        discarded = status != "finished" and discard_if_empty(store, prep)
        if not discarded:
            results, summary = finalize(store, prep.run, prep.items, prep.runner, status=status)
    run = store.get_run(prep.run.name, prep.run.dataset) or prep.run
    return RunOutcome(
        run=run, results=results, summary=summary, ran=len(prep.todo), warnings=prep.warnings
    )


def run_experiment(
    config: RunConfig,
    *,
    store: LocalStore | None = None,
    progress: ProgressHook | None = None,
) -> RunOutcome:
    """Run an experiment to the end (blocking). LangFuse mode when keys are configured."""
    from extraction_eval.backends.langfuse import langfuse_configured

    use_langfuse = config.backend == "langfuse" or (
        config.backend == "auto" and langfuse_configured()
    )
    if use_langfuse:
        from extraction_eval.experiments.langfuse_mode import run_langfuse

        return run_langfuse(config, store=store or LocalStore(), progress=progress)
    return asyncio.run(arun_local(config, store=store, progress=progress))
