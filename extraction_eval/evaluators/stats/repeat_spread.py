"""Across runs of one configuration matrix: run-to-run spread, per-item agreement between
repeats, and the best cell per metric. Pure functions; the matrix table
(``analysis/matrix_table.py``) reads the runs and hands the values in.

**Per-item agreement** of K repeats (K >= 2) of one cell: the fraction of compared items
whose K extractions are all identical. *Compared* items are those with a stored result in
every repeat (an item some repeat has not run yet is left out and counted as ``incomplete``).
Two extractions are *identical* when they hold the same entities and the same relationships
with every field equal (name, type, evidence, offsets, attributes), the order they are listed
in ignored (each list compared as a multiset). An item that failed in any repeat (no
extraction) is never in agreement; it is counted in ``errored`` too.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from extraction_eval.types import Extraction


def canonical_extraction(extraction: Extraction | None) -> str | None:
    """A string equal for two extractions exactly when they are identical (see the module
    docstring); ``None`` for a failed item."""
    if extraction is None:
        return None
    data = extraction.model_dump(mode="json")

    def objects(key: str) -> list[str]:
        return sorted(json.dumps(o, sort_keys=True, ensure_ascii=False) for o in data[key])

    return json.dumps(
        {"entities": objects("entities"), "relationships": objects("relationships")},
        ensure_ascii=False,
    )


@dataclass(frozen=True)
class Agreement:
    """Per-item agreement of one cell's repeats (see the module docstring)."""

    repeats: int
    compared: int  # items with a result in every repeat: the denominator
    agreeing: int  # compared items whose extractions are identical in every repeat
    errored: int  # compared items that failed in at least one repeat (never agreeing)
    incomplete: int  # items without a result in some repeat (left out)
    disagreeing: tuple[str, ...] = field(default_factory=tuple)  # sorted ids, errored included

    @property
    def rate(self) -> float | None:
        return self.agreeing / self.compared if self.compared else None

    def to_json(self) -> dict[str, object]:
        return {
            "repeats": self.repeats,
            "compared": self.compared,
            "agreeing": self.agreeing,
            "errored": self.errored,
            "incomplete": self.incomplete,
            "rate": self.rate,
            "disagreeing": list(self.disagreeing),
        }


def item_agreement(per_repeat: Sequence[Mapping[str, str | None]]) -> Agreement:
    """Agreement over the repeats' results: one mapping per repeat, item id -> canonical
    extraction (:func:`canonical_extraction`; ``None`` = the item failed)."""
    ids: set[str] = set()
    for results in per_repeat:
        ids.update(results)
    compared = agreeing = errored = incomplete = 0
    disagreeing: list[str] = []
    for item_id in sorted(ids):
        if any(item_id not in results for results in per_repeat):
            incomplete += 1
            continue
        compared += 1
        outputs = [results[item_id] for results in per_repeat]
        if any(out is None for out in outputs):
            errored += 1
            disagreeing.append(item_id)
        elif len(set(outputs)) == 1:
            agreeing += 1
        else:
            disagreeing.append(item_id)
    return Agreement(
        repeats=len(per_repeat),
        compared=compared,
        agreeing=agreeing,
        errored=errored,
        incomplete=incomplete,
        disagreeing=tuple(disagreeing),
    )


@dataclass(frozen=True)
class Spread:
    """One metric over a cell's repeats: mean and sample standard deviation (n - 1; ``None``
    with fewer than two values). Repeats where the metric is undefined are left out (``n``)."""

    mean: float | None
    std: float | None
    n: int


def spread(values: Iterable[float | None]) -> Spread:
    present = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not present:
        return Spread(None, None, 0)
    mean = math.fsum(present) / len(present)
    std = statistics.stdev(present) if len(present) > 1 else None
    return Spread(mean, std, len(present))


def best_cells(
    rows: Mapping[str, Mapping[str, float | None]],
    metrics: Sequence[str],
    *,
    lower_is_better: Iterable[str] = (),
) -> dict[str, tuple[str, ...]]:
    """Per metric, the row name(s) with the best value (all of them on a tie; none when no
    row has a value). ``lower_is_better`` names metrics where the smallest value wins."""
    lower = set(lower_is_better)
    out: dict[str, tuple[str, ...]] = {}
    for metric in metrics:
        values = {
            name: v
            for name, row in rows.items()
            if (v := row.get(metric)) is not None and math.isfinite(v)
        }
        if not values:
            out[metric] = ()
            continue
        target = min(values.values()) if metric in lower else max(values.values())
        out[metric] = tuple(sorted(name for name, v in values.items() if v == target))
    return out
