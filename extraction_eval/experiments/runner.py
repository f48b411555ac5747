"""The experiment runner: every item through the pipeline, scored, and persisted as it finishes.

``ItemRunner.run_item`` (pipeline call + error capture + scoring) is what the shared driver
(``driver.py``) runs for every item in both modes; ``run_bounded`` is local mode's scheduler;
``finalize`` re-scores the stored results into the run summary.

Not to be confused with its neighbours: ``run`` picks the mode (the entry point), ``driver``
loops over the items and records them; this module is what happens to one item, and knows
nothing of modes or the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from typing import Any, Protocol, TypeVar

from extraction_eval.backends.base import ResultStore
from extraction_eval.backends.local import RunRecord
from extraction_eval.errors import OverLimit, ProviderError, SchemaFailure, one_line
from extraction_eval.evaluators import GoldView, ItemScore, ScoringConfig, item_scores
from extraction_eval.evaluators.counts import counts_key, encode_counts
from extraction_eval.evaluators.limits import check_object_cap
from extraction_eval.experiments.budget import CostEstimate
from extraction_eval.experiments.interrupts import sigints, watching_sigint
from extraction_eval.experiments.repair import (
    clean_dumped,
    clean_texts,
    masked_score,
    repaired_score,
)
from extraction_eval.experiments.summary import RunSummary, SummaryAccumulator
from extraction_eval.pipeline.base import Pipeline
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.redact import redact
from extraction_eval.types import DatasetItem, ItemResult, Schema, Score, TaxonomyTag, Usage

log = logging.getLogger(__name__)

# One CATEGORICAL score per repair the model's reply needed (value: fence, prose or wrapper)
ANSWER_REPAIR_SCORE = "answer_repair"
# One CATEGORICAL score per failure category present on an item (value = the category): LangFuse
# filters traces by one score name + "any of" values and charts one categorical distribution.
FAILURE_CATEGORY_SCORE = "failure_category"
_MAX_LABELS_IN_COMMENT = 10

# A BOOLEAN score on an item whose call's reported usage was missing or could not be true
# (negative, fractional, absurd): its tokens and cost are the estimate's; the comment says why.
USAGE_SCORE = "usage_estimated"

OnResult = Callable[[ItemResult], None]
T = TypeVar("T")
R = TypeVar("R")


def _attribute(exc: BaseException, name: str) -> Any:
    """An exception's attribute, or None when reading it raises (a hostile exception)."""
    try:
        return getattr(exc, name, None)
    except Exception:
        return None


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, SchemaFailure):
        return "schema"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, ProviderError):
        return "provider"
    if isinstance(exc, OverLimit):  # too many objects, a reply too long
        return "limit"
    return "pipeline"


@dataclass
class ItemRunner:
    """Runs one item end to end and never raises for the item's own failures."""

    pipeline: Pipeline
    scoring: ScoringConfig
    context_texts: Mapping[str, str] = field(default_factory=dict)
    pricer: Pricer | None = None  # fills in the cost of outputs that report tokens only
    # ensemble gold: gold objects below this confidence are ignore regions
    min_gold_confidence: float | None = None
    schema: Schema | None = None  # the run's schema, for every item (else the item's own)
    dataset_schema: Schema | None = None  # the dataset's, for items without their own

    @property
    def view(self) -> GoldView:
        return GoldView(self.min_gold_confidence, self.schema, self.dataset_schema)

    async def run_item(self, item: DatasetItem) -> ItemResult:
        return (await self.run_scored(item))[0]

    async def run_scored(self, item: DatasetItem) -> tuple[ItemResult, ItemScore]:
        """``run_item`` with the item's :class:`ItemScore`, for a caller that folds the run
        summary as items finish instead of re-scoring them at the end."""
        item = self.view.item(item)
        started, interrupts = time.perf_counter(), sigints()
        cap = self.scoring.max_objects
        try:
            check_object_cap(item.expected, cap, side="gold")  # before paying for a call
            # the pipeline is asked for the mapped labels; the gold is mapped when scoring
            out = await self.pipeline.extract(asked_item(item))
            check_object_cap(
                out.extraction,
                cap,
                side="prediction",
                raw=out.raw,
                usage=self.pricer.priced(out.usage, out.model) if self.pricer else out.usage,
                attempts=out.attempts,
            )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # every failure becomes a row, whatever raised it
            if isinstance(exc, KeyboardInterrupt) and sigints() > interrupts:
                raise  # a Ctrl-C at the terminal stops the run; a pipeline's own is its error
            return self._failed(item, exc, started)
        latency = (time.perf_counter() - started) * 1000
        extraction, dirty, dumped = clean_dumped(out.extraction)  # one JSON dump for both
        # a key a proxy or pipeline put in
        extraction, masked_output = extraction.redacted(text=dumped)
        raw = redact(out.raw) if out.raw else out.raw
        masked = [
            *(["output"] if masked_output else []),
            *(["raw_output"] if raw != out.raw else []),
        ]
        texts, repaired = clean_texts(raw_output=raw)
        repaired = ["output", *repaired] if dirty else repaired
        scored = self.score(item, extraction)
        tags = taxonomy_tags(scored)
        result = ItemResult(
            item_id=item.id,
            output=extraction,
            raw_output=texts["raw_output"],
            attempts=out.attempts,
            latency_ms=round(latency, 3),
            usage=self.pricer.priced(out.usage, out.model) if self.pricer else out.usage,
            cache_hit=out.cache_hit,
            scores=[
                *item_scores(scored),
                Score(name="extraction_error", value=False, data_type="BOOLEAN"),
                *category_scores(tags),
                *([repaired_score(repaired)] if repaired else []),
                *([masked_score(masked)] if masked else []),
                *answer_repair_scores(out.repairs),
                *usage_scores(out.usage),
            ],
            taxonomy=tags,
            counts=self.counts(scored),
            repairs=list(out.repairs),
        )
        return result, scored

    def failed(self, item: DatasetItem, exc: BaseException) -> tuple[ItemResult, ItemScore]:
        """The error row of an item that could not be run here (its worker process exited)."""
        return self._failed(self.view.item(item), exc, time.perf_counter())

    def _failed(
        self, item: DatasetItem, exc: BaseException, started: float
    ) -> tuple[ItemResult, ItemScore]:
        """The row of an item whose pipeline raised: whatever the exception is made of (a
        ``str()`` that raises, attributes that raise, text that cannot be stored)."""
        latency = (time.perf_counter() - started) * 1000
        kind = _error_kind(exc)
        raw = _attribute(exc, "raw")
        texts, repaired = clean_texts(
            error=one_line(exc, with_type=True),
            raw_output=redact(raw) if isinstance(raw, str) else None,
        )
        message = texts["error"] or type(exc).__name__
        scored = self.score(item, None)
        tags = taxonomy_tags(scored)
        spent = _attribute(exc, "usage")  # a schema failure's answer was paid for
        spent = spent if isinstance(spent, Usage) else Usage()
        attempts = _attribute(exc, "attempts")
        failed = ItemResult(
            item_id=item.id,
            error=message,
            error_kind=kind,
            raw_output=texts["raw_output"],
            attempts=attempts if isinstance(attempts, int) and attempts > 0 else 1,
            latency_ms=round(latency, 3),
            usage=spent,
            scores=[
                *item_scores(scored),
                Score(name="extraction_error", value=True, data_type="BOOLEAN", comment=message),
                *category_scores(tags),
                *([repaired_score(repaired)] if repaired else []),
                *usage_scores(spent),
            ],
            taxonomy=tags,
            counts=self.counts(scored, schema_failure=kind == "schema"),
        )
        return failed, scored

    def score(self, item: DatasetItem, pred: Any) -> ItemScore:
        return self.view.score(item, pred, self.scoring, context_texts=self.context_texts)

    def counts(self, scored: ItemScore, *, schema_failure: bool = False) -> str:
        """The item's paired-comparison counts, stored with its result so ``compare`` reads
        them instead of re-scoring (tagged with what they were scored with)."""
        return encode_counts(scored, key=self._counts_key, schema_failure=schema_failure)

    @cached_property
    def _counts_key(self) -> str:  # a hash of the scoring settings: once per run, not per item
        return counts_key(self.scoring, self.min_gold_confidence, self.view.schemas_key())


def usage_scores(usage: Usage) -> list[Score]:
    """The ``usage_estimated`` score when the call's reported usage was replaced by the
    estimate (``Usage.problem``), so such a row's cost is never taken for a measured one."""
    if usage.problem is None:
        return []
    return [Score(name=USAGE_SCORE, value=True, data_type="BOOLEAN", comment=usage.problem)]


def asked_item(item: DatasetItem) -> DatasetItem:
    """The item as the pipeline sees it: its schema's types mapped through ``labels``."""
    schema = item.schema_
    if schema is None or not schema.labels:
        return item
    return item.model_copy(update={"schema_": schema.asked()})


def rescore(
    item: DatasetItem,
    pred: Any,
    scoring: ScoringConfig,
    context_texts: Mapping[str, str],
    min_gold_confidence: float | None = None,
    view: GoldView | None = None,
) -> ItemScore:
    """Score ``pred`` (``None``: a failed item) against the item's gold as the run saw it
    (``view``: its schema and labels; gold below ``min_gold_confidence`` ignored)."""
    view = view or GoldView(min_gold_confidence)
    return view.score(item, pred, scoring, context_texts=context_texts)


class Scorer(Protocol):
    """What ``finalize`` re-scores stored results with: an ``ItemRunner``, or a ``Rescorer``."""

    @property
    def scoring(self) -> ScoringConfig: ...

    def score(self, item: DatasetItem, pred: Any) -> ItemScore: ...


@dataclass(frozen=True)
class Rescorer:
    """Scoring without a pipeline: ``runs finalize`` re-scores results other processes made."""

    scoring: ScoringConfig
    context_texts: Mapping[str, str]
    min_gold_confidence: float | None = None
    view: GoldView | None = None  # the run's (from its record); else the floor alone

    def score(self, item: DatasetItem, pred: Any) -> ItemScore:
        return rescore(
            item, pred, self.scoring, self.context_texts, self.min_gold_confidence, self.view
        )


def taxonomy_tags(scored: ItemScore) -> list[TaxonomyTag]:
    """The scorer's per-object categories, in the plain form stored with the result."""
    return [
        TaxonomyTag(
            category=t.category,
            kind=t.kind,
            side=t.side,
            index=t.index,
            label=t.label,
            related=list(t.related),
            source_id=t.source_id,
        )
        for t in scored.taxonomy
    ]


_REPAIR_COMMENTS = {
    "fence": "the reply's JSON was inside a Markdown code fence",
    "prose": "the reply had text around its JSON object",
    "wrapper": "the reply's extraction was wrapped in a single-key object",
}


def answer_repair_scores(repairs: Sequence[str]) -> list[Score]:
    """One ``answer_repair`` score per repair the reply needed (none for bare JSON), so
    LangFuse can filter the items whose answers were read leniently."""
    return [
        Score(
            name=ANSWER_REPAIR_SCORE,
            value=repair,
            data_type="CATEGORICAL",
            comment=_REPAIR_COMMENTS.get(repair, repair) + " (--strict-json: a schema failure)",
        )
        for repair in repairs
    ]


def category_scores(tags: Sequence[TaxonomyTag]) -> list[Score]:
    """One ``failure_category`` score per category present (sorted); the comment gives the
    count and the objects' labels. A clean item gets none."""
    labels: dict[str, list[str]] = {}
    for tag in tags:
        labels.setdefault(tag.category, []).append(tag.label)
    out = []
    for category, names in sorted(labels.items()):
        shown = "; ".join(names[:_MAX_LABELS_IN_COMMENT])
        more = len(names) - _MAX_LABELS_IN_COMMENT
        out.append(
            Score(
                name=FAILURE_CATEGORY_SCORE,
                value=category,
                data_type="CATEGORICAL",
                comment=f"{len(names)} object(s): {shown}" + (f"; {more} more" if more > 0 else ""),
            )
        )
    return out


async def run_bounded(
    items: Iterable[T],
    run_item: Callable[[T], Awaitable[R]],
    *,
    concurrency: int,
    on_result: Callable[[R], None],
    may_start: Callable[[], bool] | None = None,
) -> None:
    """At most ``concurrency`` items in flight; each result is handed over as soon as it is ready.

    A fixed pool of workers pulls the next item from ``items`` when it is free, so thousands
    of items do not become thousands of pending tasks, an item is read (e.g. from the store)
    only when it is about to run, and ``on_result`` (persistence) runs on the loop thread one
    at a time. Generic so a matrix can put every cell's (cell, item) pairs behind one pool.
    ``may_start`` (e.g. a spending ceiling) is asked before each item: once it says no, no new
    item starts, items in flight finish, and the rest are left unrun.
    """
    source = iter(items)

    async def worker() -> None:
        while True:
            if may_start is not None and not may_start():
                return
            try:  # shared: each item goes to one worker (all on the loop thread)
                item = next(source)
            except StopIteration:
                return
            result = await run_item(item)
            on_result(result)

    width = min(concurrency, len(items)) if isinstance(items, Sized) else concurrency
    with watching_sigint():  # a pipeline's own KeyboardInterrupt is its item's error
        workers = [asyncio.create_task(worker()) for _ in range(max(width, 1))]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()


@dataclass(repr=False)
class RunOutcome:
    """What a finished run hands back to the CLI or a notebook.

    It holds the summary, not the results: ``results`` (and ``iter_results``) read them from
    the store when asked, so a 100,000-item run's outcome stays small; the store must still be
    open then."""

    run: RunRecord
    summary: RunSummary
    ran: int  # items executed in this invocation (resume skips the rest)
    read_results: Callable[[], Iterator[ItemResult]]
    warnings: list[str] = field(default_factory=list)
    experiment_url: str | None = None
    langfuse_verified: str | None = None  # LangFuse mode: what the read-back verified
    estimate: CostEstimate | None = None  # before any call, of the items this invocation ran
    budget: dict[str, Any] | None = None  # --max-cost: ceiling, spent, stopped, not_run
    # LangFuse mode: trace id -> the task observation its item scores are on (this invocation's)
    langfuse_observations: dict[str, str] = field(default_factory=dict)

    @property
    def stopped_by_budget(self) -> bool:
        return bool(self.budget and self.budget.get("stopped"))

    @property
    def results(self) -> list[ItemResult]:
        """Every stored result, in dataset order (items without a result left out)."""
        return list(self.read_results())

    def iter_results(self) -> Iterator[ItemResult]:
        """``results`` as a stream, for a run too big to hold at once."""
        return self.read_results()

    def __repr__(self) -> str:
        # Short on purpose: Python 3.11's ``asyncio.run`` formats its main task's repr (and so
        # this, the task's result) twice while restoring the SIGINT handler; it must not read
        # or walk the results.
        return (
            f"RunOutcome(run={self.run.name!r}, dataset={self.run.dataset!r},"
            f" status={self.run.status!r}, {self.summary.items} results, ran={self.ran},"
            f" errors={self.summary.errors})"
        )

    def failed_thresholds(
        self, fail_under: Mapping[str, float], fail_over: Mapping[str, float] | None = None
    ) -> list[str]:
        """Messages for each floor the run is below and each ceiling it is above; a value
        undefined for the run (e.g. no evidence at all) meets neither."""
        out = []
        for name, floor in sorted(fail_under.items()):
            value = self.summary.values.get(name)
            if value is None:
                out.append(f"{name} has no value for this run (needed {floor})")
            elif value < floor:
                out.append(f"{name}={value:.4f} is below {floor}")
        for name, ceiling in sorted((fail_over or {}).items()):
            value = self.summary.values.get(name)
            if value is None:
                out.append(f"{name} has no value for this run (needed at most {ceiling})")
            elif value > ceiling:
                out.append(f"{name}={value:.4f} is above {ceiling}")
        return out


def stored_results(
    store: ResultStore, run_id: int, item_ids: Sequence[str]
) -> Callable[[], Iterator[ItemResult]]:
    """A reader of the run's stored results in dataset order (what ``RunOutcome`` keeps: the
    item ids, not the results)."""
    return lambda: store.iter_item_results(run_id, item_ids)


def finalize(
    store: ResultStore,
    run: RunRecord,
    items: Iterable[DatasetItem],
    runner: Scorer,
    *,
    status: str = "finished",
    batch_size: int = 500,
    folded: SummaryAccumulator | None = None,
) -> RunSummary:
    """Fold the stored results of ``items`` into the run summary and record the run-level
    scores.

    ``folded`` holds results already folded as they finished (the run's own, scored once;
    it is added to, not copied); ``items`` are then the rest (e.g. those an earlier
    invocation finished), re-scored from the store (cheap, pure): a resumed run aggregates
    over all its items. ``items`` is read
    once, in dataset order, ``batch_size`` at a time, each batch with its stored results:
    neither the items nor the results are ever all in memory.
    """
    acc = folded if folded is not None else SummaryAccumulator(runner.scoring)
    source, expected = iter(items), acc.items
    while batch := list(islice(source, batch_size)):
        expected += len(batch)
        by_id = {item.id: item for item in batch}
        for result in store.iter_item_results(run.id, list(by_id)):
            acc.add(result, runner.score(by_id[result.item_id], result.output))
        del batch, by_id  # before the next batch is read: one batch alive at a time
    summary = acc.summary(expected_items=expected)
    store.finish_run(
        run.id, status=status, run_scores=summary.run_scores, summary=summary.to_json()
    )
    return summary
