"""The worst items of a run: which failures to look at first (``runs show --worst``).

Severity, most severe first, is ``evaluators.severity``'s (errored, then the lower combined F1,
then more wrong objects, then the item id); clean items are never listed. Over a stored run
the order and the LIMIT run in SQLite on the severity stored with each result
(``store.page_results``), so only the rows shown are read; over any iterable of results
``worst_items`` keeps a heap of ``limit`` small rows and ``worst_by_category`` one row per
category.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.severity import combined_f1, item_severity, score_number
from extraction_eval.evaluators.severity import is_failing as failing
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


def severity(result: ItemResult) -> Severity:
    """The sort key: ascending is most severe first (``evaluators.severity``)."""
    wrong = len(result.taxonomy or ())
    errored = result.error is not None
    return (0 if errored else 1, combined_f1(result), -wrong, result.item_id)


def is_failing(result: ItemResult) -> bool:
    return failing(*item_severity(result))


def worst_row(result: ItemResult) -> WorstItem:
    key = severity(result)
    return WorstItem(
        item_id=result.item_id,
        severity=key,
        entity_f1=score_number(result, "entity_f1"),
        relationship_f1=score_number(result, "relationship_f1"),
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
    page: int = 1,
) -> list[WorstItem]:
    """``worst_items`` over a stored run (local or LangFuse mirror): the store orders by the
    severity stored with each result and reads only the ``limit`` rows shown (of ``page``)."""
    check_int("limit", limit, minimum=1)
    check_int("page", page, minimum=1)
    check_category(category)
    rows = store.page_results(
        run.id, limit=limit, offset=(page - 1) * limit, category=category, failing_only=True
    )
    return [worst_row(r) for r in rows]


def run_worst_by_category(store: LocalStore, run: RunRecord) -> dict[str, WorstItem]:
    """``worst_by_category`` over a stored run: one indexed query per category, and only
    the rows shown are read."""
    ids = store.worst_of_categories(run.id, CATEGORIES)
    shown = list(dict.fromkeys(ids.values()))
    rows = {r.item_id: r for r in store.iter_item_results(run.id, shown)}
    return {c: worst_row(rows[i]) for c, i in ids.items() if i in rows}


PAGE_SIZE = 50  # ``runs show``'s default page: the items of a page, most severe first


@dataclass(frozen=True)
class ItemsPage:
    """One page of a run's items in severity order (``runs show``), with what is around it."""

    results: list[ItemResult]
    page: int  # from 1
    limit: int  # items per page
    total: int  # items the filter keeps (the whole run without a category)
    failing: int  # of ``total``, how many errored or have a mistake
    errored: int = 0  # of ``failing``, how many errored (no output to score)

    @property
    def with_mistakes(self) -> int:
        """Items with an output scored below perfect (the failing ones that did not error)."""
        return self.failing - self.errored

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.limit))

    @property
    def first(self) -> int:
        """The 1-based position of the page's first item (0 when the page is empty)."""
        return (self.page - 1) * self.limit + 1 if self.results else 0


def run_items_page(
    store: LocalStore,
    run: RunRecord,
    *,
    page: int = 1,
    limit: int = PAGE_SIZE,
    category: str | None = None,
) -> ItemsPage:
    """Page ``page`` of the run's items (``limit`` per page), most severe first: failing items
    before clean ones. Reads two counts and the page's rows, whatever the run's size."""
    check_int("page", page, minimum=1)
    check_int("limit", limit, minimum=1)
    check_category(category)
    results = store.page_results(run.id, limit=limit, offset=(page - 1) * limit, category=category)
    return ItemsPage(
        results=results,
        page=page,
        limit=limit,
        total=store.count_page_results(run.id, category=category),
        failing=store.count_page_results(run.id, category=category, failing_only=True),
        errored=store.count_page_results(run.id, category=category, errored_only=True),
    )


def iter_run_items(
    store: LocalStore, run: RunRecord, *, category: str | None = None
) -> Iterator[ItemResult]:
    """Every item of the run (``runs show --all``), most severe first, read a batch at a time."""
    check_category(category)
    return store.iter_results(run.id, category=category, order_by="severity")
