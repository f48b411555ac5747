"""The Score adapter: one item's pure counts (:class:`ItemScore`) as LangFuse-compatible
:class:`Score` objects, the shape both stores record per item.

Kept apart from the metrics (as Inspect keeps scorers thin over pure metrics): scoring and
aggregation never need it, and the names and comments it writes are the README's
"Scoring reference".
"""

from __future__ import annotations

from extraction_eval.evaluators.item import ItemScore
from extraction_eval.evaluators.metrics import Counts
from extraction_eval.types import Score


def item_scores(score: ItemScore) -> list[Score]:
    """LangFuse-compatible item scores (see the README, "Scoring reference" for the list)."""
    v = score.values()
    e, t, r = score.entities, score.entities_typed, score.relationships
    note = "; errored: no output, scored 0" if score.failed else ""

    def c(x: Counts) -> str:
        return f"tp={x.tp} fp={x.fp} fn={x.fn}{note}"

    mt = " ".join(f"{k}={n}" for k, n in score.match_type_counts().items() if n)
    alias = score.alias_match_counts()

    def via(n: int) -> str:
        return f"; via alias={n}" if n else ""

    out = [
        Score(name="entity_precision", value=_f(v["entity_precision"]), comment=c(e)),
        Score(name="entity_recall", value=_f(v["entity_recall"]), comment=c(e)),
        Score(name="entity_f1", value=_f(v["entity_f1"]), comment=c(e) + via(alias["entities"])),
        Score(
            name="entity_typed_f1",
            value=_f(v["entity_typed_f1"]),
            comment=c(t) + via(alias["entities_typed"]),
        ),
        Score(
            name="type_accuracy",
            value=_f(v["type_accuracy"]),
            comment=f"correct={score.type_correct} matched={e.tp}{note}",
        ),
        Score(name="relationship_precision", value=_f(v["relationship_precision"]), comment=c(r)),
        Score(name="relationship_recall", value=_f(v["relationship_recall"]), comment=c(r)),
        Score(
            name="relationship_f1",
            value=_f(v["relationship_f1"]),
            comment=c(r) + (f"; {mt}" if mt else "") + via(alias["relationships"]),
        ),
        Score(
            name="relationship_accuracy",
            value=_f(v["relationship_accuracy"]),
            comment=f"correct={r.tp} extracted={r.predicted}{note}",
        ),
    ]
    coverage = v["evidence_coverage_rate"]
    if coverage is not None:
        out.append(
            Score(
                name="evidence_coverage_rate",
                value=coverage,
                comment=f"grounded={score.grounded()} predicted={score.predicted_objects}",
            )
        )
    for key, (agree, total) in score.attribute_key_counts().items():
        if total:
            out.append(
                Score(
                    name=f"attr.{key}",
                    value=agree / total,
                    comment=f"agree={agree} total={total} (matched pairs with a gold {key})",
                )
            )
    if score.attributes_declared:
        shown = "; ".join(v.describe() for v in score.attribute_violations[:5])
        more = len(score.attribute_violations) - 5
        out.append(
            Score(
                name="attribute_violations",
                value=float(score.attribute_violation_count),
                comment=f"objects checked={score.attribute_checked}"
                + (f"; {shown}" if shown else "")
                + (f"; +{more} more" if more > 0 else ""),
            )
        )
    if score.gold_empty and score.failed:
        # No output: a failure of zero_fp_pass; no hallucination_count (there was no output
        # to count in), so its mean stays the run's hallucination_rate.
        out.append(
            Score(
                name="zero_fp_pass",
                value=False,
                data_type="BOOLEAN",
                comment="gold is empty; the item errored (no output): counted as a failure",
            )
        )
    elif score.gold_empty:
        out.append(
            Score(
                name="zero_fp_pass",
                value=score.predicted_objects == 0,
                data_type="BOOLEAN",
                comment=f"gold is empty; predicted objects={score.predicted_objects}",
            )
        )
        out.append(
            Score(
                name="hallucination_count",
                value=float(score.hallucination_count),
                comment="predicted objects on an item whose gold is empty",
            )
        )
    return out


def _f(value: float | None) -> float:
    return 0.0 if value is None else value
