"""The worst items of a run: which failures to look at first (``runs show --worst``).

Severity, most severe first (the sort key of ``severity``):

1. an item that errored (no output at all) before one that produced an output;
2. the lower **combined F1**, the mean of the item's ``entity_f1`` and ``relationship_f1``
   (the ones it has; an item with neither counts 0);
3. more **wrong objects**: the item's failure-taxonomy entries (missed gold objects plus
   predicted objects with a category), so of two items at F1 0 the one with more to fix
   comes first;
4. the item id (ascending), so the order is total and repeatable.

An item *fails* when it errored, has a taxonomy entry, or its combined F1 is below 1; clean
items are never listed. Results are streamed: ``worst_items`` keeps a heap of ``limit``
small rows and ``worst_by_category`` one row per category, whatever the run's size.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.taxonomy import CATEGORIES
from extraction_eval.types import ItemResult
from extraction_eval.validation import check_int

Severity = tuple[int, float, int, str]

DEFAULT_LIMIT = 10


@dataclass(frozen=True)
class WorstItem:
    """One failing item as the worst-case view shows it (small: no output, no text)."""

    item_id: str
    severity: Severity
    entity_f1: float | None
    relationship_f1: float | None
    wrong_objects: int
    categories: dict[str, int] | None  # None: recorded before the taxonomy was stored
    error: str | None
    error_kind: str | None
    trace_id: str | None
    trace_url: str | None

    @property
    def combined_f1(self) -> float:
        return self.severity[1]


def _num(result: ItemResult, name: str) -> float | None:
    for s in result.scores:
        if s.name == name and isinstance(s.value, (int, float)) and not isinstance(s.value, bool):
            return float(s.value)
    return None


def severity(result: ItemResult) -> Severity:
    """The sort key: ascending is most severe first (see the module docstring)."""
    f1s = [v for v in (_num(result, "entity_f1"), _num(result, "relationship_f1")) if v is not None]
    combined = sum(f1s) / len(f1s) if f1s else 0.0
    wrong = len(result.taxonomy or ())
    return (0 if result.error is not None else 1, combined, -wrong, result.item_id)


def is_failing(result: ItemResult) -> bool:
    key = severity(result)
    return key[0] == 0 or key[2] < 0 or key[1] < 1.0


def worst_row(result: ItemResult) -> WorstItem:
    key = severity(result)
    return WorstItem(
        item_id=result.item_id,
        severity=key,
        entity_f1=_num(result, "entity_f1"),
        relationship_f1=_num(result, "relationship_f1"),
        wrong_objects=-key[2],
        categories=result.categories if result.taxonomy is not None else None,
        error=result.error,
        error_kind=result.error_kind,
        trace_id=result.trace_id,
        trace_url=result.trace_url,
    )


def _failing_rows(results: Iterable[ItemResult]) -> Iterator[WorstItem]:
    for result in results:
        if is_failing(result):
            yield worst_row(result)


def check_category(category: str | None) -> None:
    """An unknown failure category is refused naming the known ones (before any read)."""
    if category is not None and category not in CATEGORIES:
        raise InvalidValue(
            "category", f"{category!r} is not a failure category; known: {', '.join(CATEGORIES)}"
        )


def worst_items(
    results: Iterable[ItemResult], *, limit: int = DEFAULT_LIMIT, category: str | None = None
) -> list[WorstItem]:
    """The ``limit`` most severe failing items, most severe first; with ``category``, only
    items with an object in that category. Memory: a heap of ``limit`` rows."""
    check_int("limit", limit, minimum=1)
    check_category(category)
    rows = _failing_rows(
        r
        for r in results
        if category is None or any(t.category == category for t in r.taxonomy or ())
    )
    return heapq.nsmallest(limit, rows, key=lambda w: w.severity)


def worst_by_category(results: Iterable[ItemResult]) -> dict[str, WorstItem]:
    """The most severe item of every failure category present in the run, in the taxonomy's
    category order (a category no item has is left out)."""
    best: dict[str, WorstItem] = {}
    for row in _failing_rows(results):
        for category in row.categories or {}:
            held = best.get(category)
            if held is None or row.severity < held.severity:
                best[category] = row
    return {c: best[c] for c in CATEGORIES if c in best}


def run_worst_items(
    store: LocalStore,
    run: RunRecord,
    *,
    limit: int = DEFAULT_LIMIT,
    category: str | None = None,
) -> list[WorstItem]:
    """``worst_items`` over a stored run (local or LangFuse mirror), streamed from the store."""
    check_int("limit", limit, minimum=1)
    check_category(category)
    return worst_items(
        store.iter_results(run.id, category=category, order_by="item_id"),
        limit=limit,
        category=category,
    )


def run_worst_by_category(store: LocalStore, run: RunRecord) -> dict[str, WorstItem]:
    """``worst_by_category`` over a stored run, streamed from the store."""
    return worst_by_category(store.iter_results(run.id, order_by="item_id"))
