"""The two-run parts of the HTML report: the paired comparison (``compare A B``'s figures, made
along the report's reading by :mod:`~extraction_eval.analysis.compare.along`) as table rows,
the diff's counts, and one item's A → B changes as labelled lists (:class:`ItemPairing`)."""

from __future__ import annotations

from typing import Any

from extraction_eval.analysis.compare.item_diff import diff_changed_item
from extraction_eval.analysis.compare.runs import RUNS_DIFFER, RunComparison
from extraction_eval.analysis.html_report.items import RunSide
from extraction_eval.backends.local.report_rows import ReportRow
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.diff import COUNTER_NAMES, ItemDiff, SideObject
from extraction_eval.evaluators.diff_counts import DiffCounts
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.evaluators.stats.intervals import METHOD_TEXT
from extraction_eval.evaluators.stats.multiple_testing import CORRECTION_TEXT
from extraction_eval.types import DatasetItem, Extraction


def diff_lists(diff: ItemDiff) -> dict[str, list[str]]:
    """The item's A → B changes as labelled lists (only the non-empty ones, fixed order)."""
    out: dict[str, list[str]] = {
        "fixed": [o.label for o in diff.objects if o.change == "fixed"],
        "broken": [o.label for o in diff.objects if o.change == "broken"],
        "retyped": [
            f"{o.label}: {_type_of(o.a_pred)} → {_type_of(o.b_pred)}"
            for o in diff.objects
            if o.retyped
        ],
        "direction flipped": [o.label for o in diff.objects if o.flipped],
        "evidence now ungrounded": [
            *(o.label for o in diff.objects if o.evidence == "ungrounded"),
            *(x.label for x in diff.extras if x.evidence == "ungrounded"),
        ],
        "evidence now grounded": [
            *(o.label for o in diff.objects if o.evidence == "grounded"),
            *(x.label for x in diff.extras if x.evidence == "grounded"),
        ],
        "new false positives": [x.label for x in diff.extras if x.status == "new"],
        "gone false positives": [x.label for x in diff.extras if x.status == "gone"],
    }
    if diff.a_failed != diff.b_failed:
        out["error"] = ["B errored" if diff.b_failed else "A errored"]
    return {k: v for k, v in out.items() if v}


def _type_of(side: SideObject | None) -> str:
    return "?" if side is None else side.type


def diff_view(counts: DiffCounts) -> dict[str, Any]:
    """The diff's counts over all paired items: totals and one row per kind and type."""
    data = counts.to_json()
    rows = [
        {"kind": kind, "type": type_, "counts": [row[n] for n in COUNTER_NAMES]}
        for kind, key in (("entity", "entities"), ("relationship", "relationships"))
        for type_, row in data[key].items()
    ]
    return {
        "columns": [n.replace("_", " ") for n in COUNTER_NAMES],
        "totals": [data["totals"][n] for n in COUNTER_NAMES],
        "rows": rows,
        "changed_items": data["changed_items"],
        "items": data["items"],
    }


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def comparison_view(result: RunComparison) -> dict[str, Any]:
    """The paired comparison (``compare A B``'s, the same figures) as the report's table rows
    (strings, formatted once here)."""
    paired = result.comparison
    rows = []
    for m in paired.metrics:
        if m.a is None and m.b is None:
            continue
        ci = "—" if m.ci_low is None or m.ci_high is None else f"{m.ci_low:+.4f} … {m.ci_high:+.4f}"
        rows.append(
            {
                "metric": m.name + (" (lower is better)" if m.lower_is_better else ""),
                "a": _num(m.a),
                "b": _num(m.b),
                "delta": "—" if m.delta is None else f"{m.delta:+.4f}",
                "ci": ci,
                "verdict": m.verdict,
            }
        )
    mc = paired.mcnemar
    extras = [
        f"McNemar's exact test on per-item outcomes (right = no error and entity F1 = 1; on a"
        f" gold-empty item, nothing predicted): right in B only {mc.b01}, right in A only"
        f" {mc.b10}, both right {mc.both_right}, both wrong {mc.both_wrong};"
        f" two-sided p = {mc.p_value:.4g}.",
    ]
    for warning in result.warnings:  # e.g. B scored differently, items in one run only
        extras.append(warning.replace(f"{RUNS_DIFFER} (compared anyway, forced)", RUNS_DIFFER))
    types = [
        {
            "kind": t.kind,
            "type": t.label,
            "support": t.support,
            "a": f"{t.a_f1:.3f}",
            "b": f"{t.b_f1:.3f}",
            "delta": f"{t.delta:+.3f}",
        }
        for t in (*paired.entity_types, *paired.relationship_types)
    ]
    return {
        "scored_with": result.scored_with(),  # the section's first line, as compare's
        "note": (
            f"{paired.items} items paired by id, scored as the line above says (the figures"
            f" `compare A B` prints when it scores so). Δ = B − A with a paired"
            f" {METHOD_TEXT[paired.ci_method]} {paired.confidence:.0%} CI"
            f" ({paired.resamples:,} resamples of the items, seed {paired.seed}); the verdict"
            " says improved or regressed only when the CI excludes 0 and the p-value,"
            f" adjusted over every metric ({CORRECTION_TEXT[paired.correction]}), is below"
            f" α; insufficient below {paired.min_items} items or on a zero-width CI resting on"
            " few items."
        ),
        "rows": rows,
        "extras": extras,
        "types": types,
        "json": result.to_json(),
    }


class ItemPairing:
    """Two runs' sides of each item, diffed with A's scoring as ``compare`` diffs them: from
    the two stored views when B's were made as A's are (no scoring), else by scoring both."""

    def __init__(self, scoring: ScoringConfig, views_comparable: bool) -> None:
        self.scoring = scoring
        self.views_comparable = views_comparable
        self.counts = DiffCounts()

    def add(
        self,
        items: list[DatasetItem | None],
        sides: list[RunSide | None],
        rows: list[ReportRow | None],
    ) -> tuple[bool, dict[str, list[str]] | None]:
        """(changed, the item's labelled A → B lists when it changed)."""
        (a, b), (ra, rb) = sides, rows
        item = items[0]
        if a is None or b is None or item is None or ra is None or rb is None:
            return True, None  # in one run only (or without a result in one)
        if a.pred == b.pred or (a.pred is None and b.pred is None):
            gold = item.expected
            self.counts.add_unchanged(
                gold_empty=not gold.entities and not gold.relationships, failed=a.pred is None
            )
            return False, None
        diff = self._diff(item, a, b)
        self.counts.add(diff)
        return diff.changed, diff_lists(diff) if diff.changed else None

    def _diff(self, item: DatasetItem, a: RunSide, b: RunSide) -> ItemDiff:
        pa = None if a.pred is None else Extraction.model_validate(a.pred)
        pb = None if b.pred is None else Extraction.model_validate(b.pred)
        gold = scored_gold(item)  # labels mapped by the item's schema, as it was scored
        # the stored views that fit this gold, when B's were made as A's are
        views = (a.view, b.view) if self.views_comparable else (None, None)
        return diff_changed_item(item, gold, pa, pb, self.scoring, views)
