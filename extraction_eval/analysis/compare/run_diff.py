"""The extraction-aware diff of two stored runs: per item, what got fixed and what broke.

Both runs are read from the store as two streams sorted by item id and paired by id (items
only in one run are listed, never diffed); each pair is diffed against the item's gold with
the scorer's alignment (:mod:`extraction_eval.evaluators.diff`). Memory stays bounded: the
counts are a fold, and only the ``top`` items with the most regressions are held.

The gold is run A's (:func:`~extraction_eval.analysis.stored.run_gold`, as the paired
comparison reads it: the local store's items of its dataset version, or LangFuse's for a
LangFuse-mode run). When it cannot be read (no LangFuse keys), the diff says why it is empty
(``gold_missing``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from extraction_eval.analysis.compare.item_diff import diff_changed_item
from extraction_eval.analysis.item_detail import item_judged
from extraction_eval.analysis.stored import in_both_runs, run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import ExtractionEvalError, NotFoundError, one_line
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.diff import ItemDiff
from extraction_eval.evaluators.diff_counts import DiffCounts, regression_order
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.types import DatasetItem, Extraction, ItemResult
from extraction_eval.validation import check_int


@dataclass
class RunDiff:
    """Two runs diffed item by item: counts over every paired item, the ``top`` changed items
    (most regressions first), and the ids found in one run only."""

    a: str
    b: str
    config: ScoringConfig
    scoring_differs: bool  # the runs were scored differently; the diff uses A's config
    counts: DiffCounts
    items: list[ItemDiff]
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    no_gold: list[str] = field(default_factory=list)  # paired ids the dataset no longer has
    gold_missing: str | None = None  # why no item could be diffed at all

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "scoring_differs": self.scoring_differs,
            "counts": self.counts.to_json(),
            "items": [d.to_json() for d in self.items],
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "no_gold": self.no_gold,
            "gold_missing": self.gold_missing,
        }


def _prediction(result: ItemResult) -> Extraction | None:
    """An errored item is an empty prediction (``None``), as in scoring."""
    return result.output if result.ok else None


# Changed items held before the buffer is cut back to the top ones (memory stays bounded).
PRUNE_SLACK = 1000


def _gold_or_why(store: LocalStore, run: RunRecord) -> tuple[dict[str, DatasetItem], str | None]:
    try:
        return run_gold(store, run), None
    except ExtractionEvalError as exc:
        return {}, f"no gold for run A's dataset: {one_line(exc)}"


def _diff(item: DatasetItem, ra: ItemResult, rb: ItemResult, config: ScoringConfig) -> ItemDiff:
    """Results read whole carry no stored views: both predictions are scored."""
    return diff_changed_item(item, scored_gold(item), _prediction(ra), _prediction(rb), config)


def diff_runs(
    store: LocalStore,
    a: RunRecord,
    b: RunRecord,
    *,
    top: int = 10,
    config: ScoringConfig | None = None,
) -> RunDiff:
    """Diff every item both runs have; keep the ``top`` changed items with the most
    regressions (broken objects + new false positives). ``config``: default run A's."""
    check_int("top", top, minimum=0)
    cfg = config if config is not None else run_scoring(a)
    differs = run_scoring(a) != run_scoring(b)
    gold, why = _gold_or_why(store, a)
    fold = DiffFold(RunDiff(a.name, b.name, cfg, differs, DiffCounts(), [], gold_missing=why), top)
    out = fold.out
    stream_a = store.iter_results(a.id, order_by="item_id")
    stream_b = store.iter_results(b.id, order_by="item_id")
    pairs = in_both_runs(
        ((r.item_id, r) for r in stream_a),
        ((r.item_id, r) for r in stream_b),
        out.only_in_a,
        out.only_in_b,
    )
    for item_id, ra, rb in pairs:
        item = gold.get(item_id)
        if item is None:
            out.no_gold.append(item_id)
            continue
        pa, pb = _prediction(ra), _prediction(rb)
        if pa == pb:  # same output (or both errored): the same alignment, nothing changed
            gold_empty = not item.expected.entities and not item.expected.relationships
            fold.unchanged(gold_empty=gold_empty, failed=pa is None)
            continue
        fold.changed(_diff(item, ra, rb, cfg))
    return fold.finish()


class DiffFold:
    """The diff of many items as a fold: counts over every item, the ``top`` changed items
    with the most regressions (memory stays bounded). ``compare`` feeds it from its one pass
    over both runs; ``diff_runs`` from its own."""

    def __init__(self, out: RunDiff, top: int) -> None:
        self.out = out
        self.top = top
        self._held: list[tuple[tuple[int, int, str], ItemDiff]] = []

    def unchanged(self, *, gold_empty: bool, failed: bool) -> None:
        """An item with the same prediction in both runs (or errored in both)."""
        self.out.counts.add_unchanged(gold_empty=gold_empty, failed=failed)

    def changed(self, d: ItemDiff) -> None:
        if self.out.counts.add(d) and self.top:
            self._held.append((regression_order(d), d))
            if len(self._held) > 4 * self.top + PRUNE_SLACK:  # prune: memory stays bounded
                self._held = heapq.nsmallest(self.top, self._held, key=lambda e: e[0])

    def finish(self) -> RunDiff:
        self.out.items = [d for _, d in heapq.nsmallest(self.top, self._held, key=lambda e: e[0])]
        return self.out


@dataclass(frozen=True)
class ItemComparison:
    """One item in both runs, for the side-by-side view: text, gold, both results, the diff."""

    a: str
    b: str
    item: DatasetItem
    result_a: ItemResult
    result_b: ItemResult
    diff: ItemDiff
    # per run: judge identity -> the item's judged matches kept with it (``--judge``)
    judged_a: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    judged_b: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def pred_a(self) -> Extraction:
        return _prediction(self.result_a) or Extraction()

    @property
    def pred_b(self) -> Extraction:
        return _prediction(self.result_b) or Extraction()


def compare_item(
    store: LocalStore,
    a: RunRecord,
    b: RunRecord,
    item_id: str,
    *,
    config: ScoringConfig | None = None,
) -> ItemComparison:
    """One item of both runs; a ``NotFoundError`` (one line) when a run has no result for it
    or the dataset has no such item."""
    ra = next(store.iter_item_results(a.id, [item_id]), None)
    rb = next(store.iter_item_results(b.id, [item_id]), None)
    if ra is None and rb is None:
        raise NotFoundError(f"no item {item_id!r} in run A ({a.name!r}) or run B ({b.name!r})")
    if ra is None or rb is None:
        has, lacks = ("A", "B") if rb is None else ("B", "A")
        name = b.name if rb is None else a.name
        raise NotFoundError(
            f"item {item_id!r} has no result in run {lacks} ({name!r}); it is only in run {has}"
        )
    gold, why = _gold_or_why(store, a)
    if why is not None:
        raise NotFoundError(why)
    item = gold.get(item_id)
    if item is None:
        raise NotFoundError(f"item {item_id!r} is not in dataset {a.dataset!r}")
    cfg = config if config is not None else run_scoring(a)
    return ItemComparison(
        a.name,
        b.name,
        item,
        ra,
        rb,
        _diff(item, ra, rb, cfg),
        item_judged(store, a, item_id),
        item_judged(store, b, item_id),
    )
