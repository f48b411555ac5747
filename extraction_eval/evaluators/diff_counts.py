"""Many items' diffs folded into counters per kind and type (``compare``'s diff summary),
and the order the changed items are listed in. Each item's diff is ``diff.diff_item``'s."""

from __future__ import annotations

from collections import Counter
from typing import Any

from extraction_eval.evaluators.config import type_key
from extraction_eval.evaluators.diff import COUNTER_NAMES, ItemDiff, Kind

_FOLD_SUMS = (
    "items",
    "changed_items",
    "items_with_regressions",
    "a_failed",
    "b_failed",
    "gold_empty",
    "new_hallucinations",
    "gone_hallucinations",
)


class DiffCounts:
    """Counters over many item diffs, per kind and type (a fold: memory does not grow with the
    number of items). Gold objects count under the gold type, false positives under the
    predicted type; types are grouped casefolded and shown in their first-sorted spelling."""

    def __init__(self) -> None:
        self.items = 0
        self.changed_items = 0
        self.items_with_regressions = 0
        self.a_failed = 0
        self.b_failed = 0
        self.gold_empty = 0
        self.new_hallucinations = 0
        self.gone_hallucinations = 0
        self.totals: Counter[str] = Counter()
        self._by_type: dict[tuple[Kind, str], Counter[str]] = {}
        self._labels: dict[tuple[Kind, str], str] = {}

    def _bump(self, kind: Kind, type_: str, name: str) -> None:
        key = (kind, type_key(type_))
        label = self._labels.get(key)
        if label is None or type_ < label:
            self._labels[key] = type_
        self._by_type.setdefault(key, Counter())[name] += 1

    def add_unchanged(self, *, gold_empty: bool, failed: bool) -> None:
        """An item whose two predictions are equal (or both errored): nothing can differ, so
        it is counted without being diffed (most items, when two runs are alike)."""
        self.items += 1
        self.gold_empty += gold_empty
        self.a_failed += failed
        self.b_failed += failed

    def add(self, d: ItemDiff) -> bool:
        """Count one item's diff; returns ``d.changed``. One walk over its objects (what
        ``d.counts()``, ``d.changed`` and ``d.regressions`` would each walk again: this runs
        for every changed item of a 100,000-item compare)."""
        self.items += 1
        totals = dict.fromkeys(COUNTER_NAMES, 0)
        changed = d.a_failed != d.b_failed
        bump = self._bump
        for o in d.objects:
            if o.change:
                totals[o.change] += 1
                bump(o.kind, o.type, o.change)
                changed = True
            if o.retyped:
                totals["retyped"] += 1
                bump(o.kind, o.type, "retyped")
                changed = True
            if o.flipped:
                totals["flipped"] += 1
                bump(o.kind, o.type, "flipped")
                changed = True
            if o.evidence:
                name = f"evidence_{o.evidence}"
                totals[name] += 1
                bump(o.kind, o.type, name)
                changed = True
        for x in d.extras:
            if x.status != "kept":
                name = f"{x.status}_false_positives"
                totals[name] += 1
                bump(x.kind, x.type, name)
                changed = True
            if x.evidence:
                name = f"evidence_{x.evidence}"
                totals[name] += 1
                bump(x.kind, x.type, name)
                changed = True
        self.changed_items += changed
        self.items_with_regressions += totals["broken"] + totals["new_false_positives"] > 0
        self.a_failed += d.a_failed
        self.b_failed += d.b_failed
        self.gold_empty += d.gold_empty
        if d.gold_empty:
            self.new_hallucinations += totals["new_false_positives"]
            self.gone_hallucinations += totals["gone_false_positives"]
        self.totals.update({k: v for k, v in totals.items() if v})
        return changed

    def merge(self, other: DiffCounts) -> None:
        """Add another fold's counts (a report built in two processes)."""
        for name in _FOLD_SUMS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.totals.update(other.totals)
        for key, counts in other._by_type.items():
            self._by_type.setdefault(key, Counter()).update(counts)
        for key, label in other._labels.items():
            if key not in self._labels or label < self._labels[key]:
                self._labels[key] = label

    def by_type(self, kind: Kind) -> dict[str, dict[str, int]]:
        """type -> every counter (zeros included), types sorted by their label."""
        rows = {
            self._labels[key]: {n: counts.get(n, 0) for n in COUNTER_NAMES}
            for key, counts in self._by_type.items()
            if key[0] == kind
        }
        return dict(sorted(rows.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "changed_items": self.changed_items,
            "items_with_regressions": self.items_with_regressions,
            "a_failed": self.a_failed,
            "b_failed": self.b_failed,
            "gold_empty_items": self.gold_empty,
            "new_hallucinations": self.new_hallucinations,
            "gone_hallucinations": self.gone_hallucinations,
            "totals": {n: self.totals.get(n, 0) for n in COUNTER_NAMES},
            "entities": self.by_type("entity"),
            "relationships": self.by_type("relationship"),
        }


def regression_order(d: ItemDiff) -> tuple[int, int, str]:
    """Sort key: most regressions (broken objects + new false positives) first, then fewest
    fixes, then item id, so the listing is stable."""
    return (-d.regressions, d.fixed + d.gone_false_positives, d.item_id)
