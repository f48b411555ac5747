"""How badly an item failed: the one order ``runs show`` (and ``--worst``) lists items in.

Most severe first:

1. an item that errored (no output at all) before one that produced an output;
2. the lower **combined F1**, the mean of the item's ``entity_f1`` and ``relationship_f1``
   scores (the ones it has; an item with neither counts 0);
3. more **wrong objects**: the item's failure-taxonomy entries (missed gold objects plus
   predicted objects with a category), so of two items at F1 0 the one with more to fix
   comes first;
4. the item id (ascending), so the order is total and repeatable.

An item *fails* when it errored, has a taxonomy entry, or its combined F1 is below 1; clean
items (combined F1 1, nothing wrong) sort after every failing one. The local store keeps the
first three as two columns of each result (``severity``: the combined F1, or -1 for an error;
``wrong_objects``) with an index, so a page of the order is read, never sorted in Python.
"""

from __future__ import annotations

from extraction_eval.types import ItemResult

ERRORED = -1.0  # the stored severity of an item that errored: below every F1
F1_SCORES = ("entity_f1", "relationship_f1")


def score_number(result: ItemResult, name: str) -> float | None:
    """The item's first numeric (not boolean) score called ``name``."""
    for s in result.scores:
        if s.name == name and isinstance(s.value, (int, float)) and not isinstance(s.value, bool):
            return float(s.value)
    return None


def combined_f1(result: ItemResult) -> float:
    """The mean of the item's entity and relationship F1 (the ones it has, NaN not counted;
    none: 0)."""
    f1s = [v for v in (score_number(result, n) for n in F1_SCORES) if v is not None and v == v]
    return sum(f1s) / len(f1s) if f1s else 0.0


def item_severity(result: ItemResult) -> tuple[float, int]:
    """(severity, wrong objects) as stored: ascending severity, then descending wrong objects,
    is most severe first."""
    severity = ERRORED if result.error is not None else combined_f1(result)
    return severity, len(result.taxonomy or ())


def is_failing(severity: float, wrong_objects: int) -> bool:
    return severity < 1.0 or wrong_objects > 0
