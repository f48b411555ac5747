"""Ensemble gold: several models extract every item, a weighted vote keeps what they agree on,
people override the rest, and the result becomes a new version of the dataset.

The models run through the same pipelines as ``run-experiment`` (prompt, provider, retries,
response cache); runs of one model differ only by their run index, which is part of the cache
key, so a rebuild calls a model only for an item whose text, schema or prompt changed (the
response cache's key covers exactly those) and re-votes only items whose answers, vote
settings or overrides changed.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from extraction_eval.backends.base import DatasetBackend, UploadReport, canonical_json
from extraction_eval.backends.local import LocalStore
from extraction_eval.datasets.jsonl import write_items
from extraction_eval.datasets.schema import with_dataset_schema
from extraction_eval.errors import InvalidValue, UsageError, one_line
from extraction_eval.evaluators.vote import (
    JUDGE_ACTIONS,
    GoldObject,
    ItemVote,
    Vote,
    apply_overrides,
    gold_extraction,
    vote_item,
)
from extraction_eval.experiments.budget import CostEstimate, estimate_cost, sum_estimates
from extraction_eval.experiments.repair import clean_extraction
from extraction_eval.llm.batch import BATCH_DISCOUNT
from extraction_eval.pipeline.base import Pipeline
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.prompts.versions import select_run_prompt
from extraction_eval.seeds.ensemble.config import GoldConfig
from extraction_eval.types import DatasetItem, Extraction, GoldOverride


@dataclass
class GoldPlan:
    """What a build would do before it spends anything (``--dry-run``)."""

    items: int
    runs: int  # model runs per item
    calls: int  # model calls needed (not in the response cache)
    cached: int  # answers already in the cache
    offline: int  # answers from pipelines that make no model call
    calls_by_model: dict[str, int]
    schema_hash: str
    # the calls' estimated cost (the same estimate as run-experiment --dry-run; halved with
    # the Batch API)
    estimate: CostEstimate = field(default_factory=CostEstimate)
    batch: bool = False


@dataclass
class GoldBuild:
    plan: GoldPlan
    items: list[DatasetItem]  # the dataset's items with the built gold as expected output
    votes: dict[str, ItemVote]
    errors: list[str]  # "item X: run Y failed: ..." (that run abstained on that item)
    override_problems: list[str]
    review: list[tuple[str, float]]  # (item id, min confidence) below review_below
    revoted: int  # items voted in this build (the rest reused their stored aggregate)
    upload: UploadReport | None = None
    ties: int = 0
    notes: list[str] = field(default_factory=list)  # e.g. what the Batch API did


def _sha(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


class _Runs:
    """The pipelines of every model run, built once (a missing key fails here, before any call)."""

    def __init__(self, config: GoldConfig, store: LocalStore) -> None:
        self.entries: list[tuple[str, float, Pipeline]] = []
        self._prompts: dict[str, PromptTemplate] = {}
        self.pricers: list[Pricer] = []
        self.batch = config.batch
        for label, weight, pconfig in config.runs():
            prompt = select_run_prompt(store, pconfig)
            pipeline = make_pipeline(pconfig, cache=store.cache(), prompt=prompt)
            self.entries.append((label, weight, pipeline))
            self._prompts[label] = prompt
            self.pricers.append(Pricer.for_config(pconfig))

    def prompt(self, label: str) -> PromptTemplate:
        return self._prompts[label]

    def key(self, index: int, item: DatasetItem) -> str | None:
        """The response-cache key of this run on this item; None: the pipeline calls no model."""
        key_for = getattr(self.entries[index][2], "key_for", None)
        return None if key_for is None else str(key_for(item))

    def schema_hash(self, items: Sequence[DatasetItem]) -> str:
        """Entity/relationship types, attribute enums and prompts: what invalidates all gold."""
        schemas = sorted(
            {canonical_json(i.schema_.model_dump(mode="json")) for i in items if i.schema_}
        )
        prompts = sorted({p.content_hash for p in self._prompts.values()})
        return _sha({"schemas": schemas, "prompts": prompts})[:16]

    async def aclose(self) -> None:
        for _, _, p in self.entries:
            close = getattr(p, "aclose", None)
            if close is not None:
                await close()


def _load_items(config: GoldConfig, backend: DatasetBackend) -> list[DatasetItem]:
    try:
        items = backend.get_items(config.dataset, version=config.dataset_version)
    except InvalidValue as exc:  # the backend's ``version`` is this config's dataset_version
        if exc.field != "version":
            raise
        raise InvalidValue("dataset_version", exc.problem) from None
    if not items:
        raise UsageError(f"dataset {config.dataset!r} has no items")
    return items


def _asked(
    config: GoldConfig, backend: DatasetBackend, items: list[DatasetItem]
) -> list[DatasetItem]:
    """The items as the models are asked about them: one without a schema of its own gets
    the dataset's, as a run of the dataset gives it (types, labels). The built items keep
    the schema they had (the dataset's still applies to them)."""
    return list(with_dataset_schema(items, backend.get_dataset(config.dataset).schema))


def plan_gold(
    config: GoldConfig, store: LocalStore, backend: DatasetBackend | None = None
) -> GoldPlan:
    """Count the model calls a build would make (answers not in the response cache)."""
    target = backend or store
    items = _asked(config, target, _load_items(config, target))
    runs = _Runs(config, store)
    return _plan(items, runs, store)


def _plan(items: Sequence[DatasetItem], runs: _Runs, store: LocalStore) -> GoldPlan:
    cache = store.cache()
    calls = cached = offline = 0
    by_model: dict[str, int] = {}
    estimates: list[CostEstimate] = []
    for k, (label, _, _) in enumerate(runs.entries):

        def in_cache(item: DatasetItem, k: int = k) -> bool:
            key = runs.key(k, item)
            return key is not None and cache.get(key) is not None

        one = estimate_cost(
            items, prompt=runs.prompt(label), pricer=runs.pricers[k], cached=in_cache
        )
        if runs.batch and one.usd is not None:
            one = replace(one, usd=one.usd * BATCH_DISCOUNT)
        estimates.append(one)
    for item in items:
        for k, (label, _, _) in enumerate(runs.entries):
            key = runs.key(k, item)
            if key is None:
                offline += 1
            elif cache.get(key) is not None:
                cached += 1
            else:
                calls += 1
                model = label.rsplit("#", 1)[0]
                by_model[model] = by_model.get(model, 0) + 1
    return GoldPlan(
        items=len(items),
        runs=len(runs.entries),
        calls=calls,
        cached=cached,
        offline=offline,
        calls_by_model=by_model,
        schema_hash=runs.schema_hash(items),
        estimate=sum_estimates(estimates),
        batch=runs.batch,
    )


async def abuild_gold(
    config: GoldConfig,
    store: LocalStore,
    backend: DatasetBackend | None = None,
    *,
    write: bool = True,
    out: TextIO | None = None,
) -> GoldBuild:
    """Run every model on every item, vote, apply overrides; then upload the result as a new
    dataset version (``write``) and/or write it as JSONL to ``out``."""
    target = backend or store
    items = _load_items(config, target)
    asked = _asked(config, target, items)
    runs = _Runs(config, store)
    plan = _plan(asked, runs, store)
    errors: list[str] = []
    answers: dict[tuple[str, int], Extraction | None] = {}
    sem = asyncio.Semaphore(config.concurrency)

    repaired: list[str] = []

    async def one(item: DatasetItem, k: int) -> None:
        label, _, pipeline = runs.entries[k]
        async with sem:
            try:
                answer = (await pipeline.extract(item)).extraction
                # a lone surrogate (truncated emoji) in an answer: no store row takes it
                answers[item.id, k], changed = clean_extraction(answer)
                if changed:
                    repaired.append(f"{item.id} ({label})")
            except Exception as exc:  # one failed run abstains on one item; the build goes on
                answers[item.id, k] = None
                errors.append(f"item {item.id}: {label} failed: {one_line(exc)}")

    notes: list[str] = []
    try:
        if config.batch:
            from extraction_eval.llm.batch import batch_pipeline, summary_line

            for label, _, pipeline in runs.entries:
                got = await batch_pipeline(
                    pipeline,
                    asked,
                    store,
                    owner=f"gold {config.dataset} {label}",
                    cache=store.cache(),
                )
                notes.append(f"{label}: {summary_line(got, len(got.answers) + len(got.errors))}")
        await asyncio.gather(*(one(item, k) for item in asked for k in range(len(runs.entries))))
    finally:
        await runs.aclose()
    if repaired:
        notes.append(
            f"{len(repaired)} answers had lone UTF-16 surrogates, voted on as U+FFFD"
            f" (first: {', '.join(sorted(repaired)[:3])})"
        )
    errors.sort()

    overrides: dict[str, list[GoldOverride]] = {}
    for o in store.gold_overrides(config.dataset):
        if o.action not in JUDGE_ACTIONS:  # a judged pair's verdict changes no gold
            overrides.setdefault(o.item_id, []).append(o)
    known = {i.id for i in items}
    problems = [
        f"override #{o.id} names item {item_id!r}, which is not in the dataset; not applied"
        for item_id, os in sorted(overrides.items())
        if item_id not in known
        for o in os
    ]
    settings = {**config.record(), "schema_hash": plan.schema_hash}
    built: list[DatasetItem] = []
    votes: dict[str, ItemVote] = {}
    review: list[tuple[str, float]] = []
    revoted = ties = 0
    for item in items:
        ballots = [
            Vote(label, weight, answers[item.id, k])
            for k, (label, weight, _) in enumerate(runs.entries)
        ]
        mine = overrides.get(item.id, [])
        input_hash = _sha(
            {
                "settings": settings,
                "answers": [
                    None if b.output is None else b.output.model_dump(mode="json") for b in ballots
                ],
                "overrides": [o.model_dump(mode="json") for o in mine],
            }
        )
        if store.gold_aggregate_hash(config.dataset, item.id) != input_hash:
            revoted += 1
        vote = vote_item(ballots, config.scoring, min_agreement=config.min_agreement)
        objects, item_problems = apply_overrides(vote, mine)
        problems += [f"item {item.id}: {p}" for p in item_problems]
        ties += len(vote.ties)
        votes[item.id] = vote
        gold_meta = _gold_metadata(vote, objects, config, plan.schema_hash)
        store.put_gold_aggregate(
            config.dataset,
            item.id,
            input_hash,
            {
                "vote": vote.to_json(),
                "gold": gold_meta,
                "overrides": [o.model_dump(mode="json", exclude_none=True) for o in mine],
            },
        )
        if not vote.voters:
            # every run failed on it: no vote is not a vote for "nothing here"; the item keeps
            # the expected output it had, marked unvoted (a person or a later build decides)
            notes.append(
                f"warning: item {item.id}: every run failed on it, nothing was voted; its"
                " expected output is kept as it was (metadata.gold.unvoted)"
            )
            kept_as_was = {"confidence": None, "source": "unvoted"}
            gold_meta = {
                **gold_meta,
                "unvoted": True,
                "entities": [kept_as_was for _ in item.expected.entities],
                "relationships": [kept_as_was for _ in item.expected.relationships],
            }
            built.append(item.model_copy(update={"metadata": {**item.metadata, "gold": gold_meta}}))
            continue
        if (
            gold_meta["min_confidence"] is not None
            and gold_meta["min_confidence"] < config.review_below
        ):
            review.append((item.id, gold_meta["min_confidence"]))
        built.append(
            item.model_copy(
                update={
                    "expected": gold_extraction(objects),
                    "metadata": {**item.metadata, "gold": gold_meta},
                }
            )
        )
    upload = target.upload_items(config.dataset, built) if write else None
    if out is not None:
        write_items(built, out)
    return GoldBuild(
        plan=plan,
        items=built,
        votes=votes,
        errors=errors,
        override_problems=problems,
        review=review,
        revoted=revoted,
        upload=upload,
        ties=ties,
        notes=notes,
    )


def build_gold(
    config: GoldConfig,
    store: LocalStore,
    backend: DatasetBackend | None = None,
    *,
    write: bool = True,
    out: TextIO | None = None,
) -> GoldBuild:
    return asyncio.run(abuild_gold(config, store, backend, write=write, out=out))


def _gold_metadata(
    vote: ItemVote, objects: Sequence[GoldObject], config: GoldConfig, schema_hash: str
) -> dict[str, Any]:
    """What the item's metadata says about its gold: one entry per expected object, in the
    same order as ``expected`` (so a scorer can drop objects below a confidence)."""
    ents = [g for g in objects if g.kind == "entity"]
    rels = [g for g in objects if g.kind == "relationship"]
    confidences = [g.confidence for g in objects] + [
        f.confidence
        for o in vote.kept
        for f in o.fields.values()
        if any(g.source == "vote" and g.obj == o.obj for g in objects)
    ]
    # an object the vote left out is a decision too: 1 − its weight agreed it is not there
    confidences += [1.0 - o.confidence for o in vote.objects if not o.kept]
    return {
        "models": [m.spec() for m in config.models],
        "min_agreement": config.min_agreement,
        "schema_hash": schema_hash,
        "entities": [g.meta() for g in ents],
        "relationships": [g.meta() for g in rels],
        "min_confidence": round(min(confidences), 6) if confidences else None,
        "mean_confidence": round(sum(g.confidence for g in objects) / len(objects), 6)
        if objects
        else None,
        "abstained": list(vote.abstained),
        "ties": len(vote.ties),
    }
