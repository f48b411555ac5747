"""Everything a run needs before its first model call, the same in both modes: the items,
the prompt, the pipeline, and the run record (new, or reopened by ``resume`` /
``retry_errors``). Whatever can refuse the setup does so before the record exists."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.evaluators import ContextIndex
from extraction_eval.evaluators.vote import trusted_gold
from extraction_eval.experiments.budget import (
    Budget,
    CostEstimate,
    check_estimate,
    estimate_cost,
    spent_before,
)
from extraction_eval.experiments.config import RunConfig, check_fail_under_attributes, describe
from extraction_eval.experiments.partition import shard_record
from extraction_eval.experiments.runner import ItemRunner, select_items
from extraction_eval.experiments.score import gold_ignored_warning
from extraction_eval.llm.base import Provider
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.prompts.versions import select_run_prompt
from extraction_eval.types import DatasetItem

# Config keys that must not change when a run is resumed: results would mix two experiments.
_RESUME_INVARIANTS = (
    "model",
    "temperature",
    "prompt_hash",
    "pipeline_ref",
    "price_override",
    "min_gold_confidence",
    "shard",
)


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
    estimate: CostEstimate | None = None  # of the items in ``todo`` (before any call)
    budget: Budget | None = None  # the --max-cost ceiling, with what the run spent before


@dataclass
class RunPlan:
    """What ``prepare`` resolved before opening the run record: enough to estimate the cost
    (``--dry-run``) without creating or touching anything."""

    config: RunConfig
    items: list[DatasetItem]
    todo: list[DatasetItem]
    runner: ItemRunner
    prompt: PromptTemplate
    record: dict[str, Any]
    existing: RunRecord | None
    estimate: CostEstimate
    spent: float  # what a resumed run spent already on the results it keeps
    dataset_version: int | str | None
    notes: list[str] = field(default_factory=list)  # warnings for the run (e.g. a shard's)


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
        raise InvalidValue(  # the CLI shows the field as its flag: "--resume is needed ..."
            "resume",
            f"is needed to continue run {config.name!r} on dataset {config.dataset!r}, which"
            " exists already (or retry its errors, or choose another name)",
        )
    changed = [k for k in _RESUME_INVARIANTS if existing.config.get(k) != record.get(k)]
    if changed:
        raise UsageError(
            f"cannot resume run {config.name!r}: {', '.join(changed)} differ from the original run"
        )
    return existing


def _shard_note(config: RunConfig, total: int, items: Sequence[DatasetItem]) -> str:
    """What a shard run's summary is (and is not): the shard's items only."""
    return (
        f"shard {config.shard} holds {len(items)} of the {total} items: this summary covers"
        " this shard only; fold the shard stores into one (runs merge) and compute the run's"
        f" scores from all items with `runs finalize {config.name}`"
    )


def discard_if_empty(store: LocalStore, prep: PreparedRun) -> bool:
    """A run this invocation created that ended before its first item leaves nothing behind:
    it is deleted, so the same ``--name`` works again without ``--resume``."""
    return prep.created and store.delete_empty_run(prep.run.id)


def plan(
    config: RunConfig,
    store: LocalStore,
    *,
    items: Sequence[DatasetItem] | None = None,
    dataset_version: int | str | None = None,
    prompt: PromptTemplate | None = None,
    tracer: Any = None,
    extra_record: dict[str, Any] | None = None,
    provider: Provider | None = None,
) -> RunPlan:
    """Everything up to the run record: items, prompt, pipeline, what is still to run and its
    cost estimate. Refuses a bad setup; creates and changes nothing."""
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
    warnings: list[str] = []
    # context_bleed looks at every item's text: a shard scores against all of them, exactly
    # as one process running every item would
    context = ContextIndex({item.id: item.text for item in items})
    extra = dict(extra_record or {})
    if config.shard is not None:
        extra.update(shard_record(config.shard, items))
        total = len(items)
        items = config.shard.select(items)
        warnings.append(_shard_note(config, total, items))
    # local mode: the local store's version asked for by --prompt-label/--prompt-version (an
    # unknown one is an error before the run exists), else the bundled template
    prompt = prompt or select_run_prompt(store, config.pipeline)
    record = run_record(config, prompt, **extra)
    # Everything that can refuse the setup (name taken, unknown provider, missing key, bad
    # --pipeline, --max-cost below the estimate) runs before the run record exists: a refused
    # setup leaves nothing behind.
    existing = check_reuse(store, config, record)
    cache = store.cache()
    pipeline = make_pipeline(
        config.pipeline, cache=cache, prompt=prompt, tracer=tracer, provider=provider
    )
    pricer = Pricer.for_config(config.pipeline)
    runner = ItemRunner(
        pipeline=pipeline,
        scoring=config.scoring,
        context_texts=context,
        pricer=pricer,
        min_gold_confidence=config.min_gold_confidence,
    )
    if config.min_gold_confidence is not None:
        ignored = sum(
            trusted_gold(i.expected, i.metadata, config.min_gold_confidence)[1] for i in items
        )
        warnings.append(gold_ignored_warning(ignored, config.min_gold_confidence))
    spent = 0.0
    if existing is None:
        todo = list(items)
    else:
        done = {r.item_id: r for r in store.iter_results(existing.id)}
        todo = select_items(items, done, retry_errors=config.retry_errors)
        spent = spent_before({i: r.usage.cost_usd for i, r in done.items()}, (i.id for i in todo))
    key_for = getattr(pipeline, "key_for", None)  # a model pipeline with a response cache

    def cached(item: DatasetItem) -> bool:
        return key_for is not None and cache.get(key_for(item)) is not None

    estimate = estimate_cost(
        todo,
        prompt=prompt,
        pricer=pricer,
        cached=cached,
        skipped_done=len(items) - len(todo),
    )
    return RunPlan(
        config, list(items), todo, runner, prompt, record, existing, estimate, spent,
        dataset_version, warnings,
    )  # fmt: skip


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
    provider: Provider | None = None,
) -> PreparedRun:
    warnings: list[str] = []
    p = plan(
        config,
        store,
        items=items,
        dataset_version=dataset_version,
        prompt=prompt,
        tracer=tracer,
        extra_record=extra_record,
        provider=provider,
    )
    config, record = p.config, p.record
    warnings.extend(p.notes)
    check_estimate(config.max_cost, p.estimate, p.spent)
    run, todo = open_run(
        store, config, p.items, dataset_version=p.dataset_version, record=record, backend=backend
    )
    started_with = (run.config.get("pricing") or {}).get("version")
    now_with = record["pricing"].get("version")
    if todo and started_with != now_with:  # a resumed run, priced by another database version
        warnings.append(
            f"items run now are priced with genai-prices {now_with}; run {config.name!r}"
            f" started with {started_with} (its record keeps that)"
        )
    budget = None if config.max_cost is None else Budget(config.max_cost, p.spent)
    return PreparedRun(
        config, run, p.items, todo, p.runner, p.prompt, warnings, p.existing is None,
        p.estimate, budget,
    )  # fmt: skip
