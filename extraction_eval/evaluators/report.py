"""Run aggregation: many :class:`ItemScore` into the run report (``score --format json``).

Counts are summed over items (micro, the headline), per-item values averaged (macro) and the
micro figures bootstrapped over items; a failed item counts everywhere as a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from extraction_eval.evaluators.config import ScoringConfig
from extraction_eval.evaluators.item import (
    VALUE_NAMES,
    ItemScore,
    Kind,
    TypeCount,
    attributes_json,
)
from extraction_eval.evaluators.matching import RELATIONSHIP_MATCH_TYPES
from extraction_eval.evaluators.metrics import (
    Counts,
    accuracy,
    counts_json,
    mean,
    ratio,
    sum_counts,
    vacuous,
)
from extraction_eval.evaluators.stats import bootstrap_prf, bootstrap_ratios
from extraction_eval.evaluators.taxonomy import CATEGORIES


def _merge_types(groups: Iterable[Iterable[TypeCount]]) -> dict[str, dict[str, Any]]:
    labels: dict[str, str] = {}
    sums: dict[str, list[int]] = {}
    for group in groups:
        for t in group:
            if t.key not in labels or t.label < labels[t.key]:
                labels[t.key] = t.label
            acc = sums.setdefault(t.key, [0, 0, 0])
            acc[0] += t.tp
            acc[1] += t.fp
            acc[2] += t.fn
    return {labels[k]: counts_json(Counts(*v)) for k, v in sums.items()}


def _count_array(counts: Sequence[Counts]) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.asarray(counts, dtype=np.int64).reshape(len(counts), 3)


def aggregate(
    items: Sequence[ItemScore], config: ScoringConfig, *, warnings: Sequence[str] = ()
) -> dict[str, Any]:
    """The run report (``score --format json``). Deterministic and independent of item order
    and item ids; ``json.dumps(report, sort_keys=True)`` is byte-stable.

    Failed items count everywhere as failures: in the micro counts (all their gold missed), as
    0 in the macro means, as zero_fp_pass failures; and while any item failed, summed counts
    of 0 never earn the both-empty 1.0."""
    ent = [s.entities for s in items]
    typed = [s.entities_typed for s in items]
    rel = [s.relationships for s in items]
    e, t, r = sum_counts(ent), sum_counts(typed), sum_counts(rel)
    type_correct = sum(s.type_correct for s in items)
    any_failed = any(s.failed for s in items)

    match_types: dict[str, int] = dict.fromkeys(RELATIONSHIP_MATCH_TYPES, 0)
    entity_match_types = {"exact": 0, "fuzzy": 0}
    taxonomy: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
    for s in items:
        for k, n in s.match_type_counts().items():
            match_types[k] += n
        for k, n in s.entity_match_type_counts().items():
            entity_match_types[k] += n
        for k, n in s.taxonomy_counts().items():
            taxonomy[k] += n

    evidence = _evidence_report(items, config)
    values = [s.values() for s in items]
    macro_values = {name: [x for v in values if (x := v[name]) is not None] for name in VALUE_NAMES}
    macro = {name: mean(xs) for name, xs in macro_values.items()}

    empty = [s for s in items if s.gold_empty]
    # Rates over the gold-empty items: zero_fp_pass_rate over all of them (an errored item is a
    # failure); hallucination_rate over those that produced an output (an errored item has no
    # objects to count, and must not dilute the rate towards 0).
    errored_empty = sum(1 for s in empty if s.failed)
    scored_empty = len(empty) - errored_empty
    hallucinations = sum(s.hallucination_count for s in empty if not s.failed)
    passed = sum(1 for s in empty if s.zero_fp_pass)
    no_prediction = sorted(s.item_id for s in items if s.failed)

    ci = bootstrap_prf(
        {
            "entities": _count_array(ent),
            "entities_typed": _count_array(typed),
            "relationships": _count_array(rel),
        },
        resamples=config.resamples,
        seed=config.seed,
        confidence=config.confidence,
        failed=np.asarray([s.failed for s in items], dtype=np.bool_),
    )
    all_warnings = list(warnings)
    if no_prediction:
        all_warnings.append(
            f"{len(no_prediction)} item(s) had no prediction (errored) and were scored as "
            "failures: "
            + ", ".join(no_prediction[:20])
            + (f", ... ({len(no_prediction) - 20} more)" if len(no_prediction) > 20 else "")
        )
    return {
        "config": config.to_json(),
        "items": len(items),
        "failed_items": len(no_prediction),
        "no_prediction": {"count": len(no_prediction), "ids": no_prediction},
        "entities": {**counts_json(e, failed=any_failed), "type_correct": type_correct},
        "entities_typed": counts_json(t, failed=any_failed),
        "type_accuracy": accuracy(type_correct, e.tp, both_empty=vacuous(e, failed=any_failed)),
        "relationships": counts_json(r, failed=any_failed),
        "relationship_accuracy": accuracy(
            r.tp, r.predicted, both_empty=vacuous(r, failed=any_failed)
        ),
        "match_types": match_types,
        "entity_match_types": entity_match_types,
        "per_type": {
            "entities": _merge_types(s.entity_types for s in items),
            "relationships": _merge_types(s.relationship_types for s in items),
        },
        "attributes": _attributes_report(items, config),
        "evidence": evidence,
        "negative_space": {
            "gold_empty_items": len(empty),
            "errored": errored_empty,
            "scored": scored_empty,
            "zero_fp_pass_count": passed,
            "zero_fp_pass_rate": passed / len(empty) if empty else None,
            "hallucination_count": hallucinations,
            "hallucination_rate": hallucinations / scored_empty if scored_empty else None,
        },
        "taxonomy": taxonomy,
        "macro": macro,
        "macro_items": {name: len(xs) for name, xs in macro_values.items()},
        "ci": _ci_json(ci, config),
        "warnings": all_warnings,
    }


def _ci_json(ci: dict[str, dict[str, list[float]]] | None, config: ScoringConfig) -> dict[str, Any]:
    """Flat names matching the item scores: ``entity_f1: {"low", "high"}``, ..."""
    out: dict[str, Any] = {
        "method": "percentile bootstrap over items",
        "level": config.confidence,
        "resamples": config.resamples,
        "seed": config.seed,
    }
    for group, prefix in (
        ("entities", "entity"),
        ("entities_typed", "entity_typed"),
        ("relationships", "relationship"),
    ):
        for metric in ("precision", "recall", "f1"):
            bounds = None if ci is None else ci[group][metric]
            out[f"{prefix}_{metric}"] = (
                None if bounds is None else {"low": bounds[0], "high": bounds[1]}
            )
    return out


def _evidence_report(items: Sequence[ItemScore], config: ScoringConfig) -> dict[str, Any]:
    def block(kind: Kind | None) -> dict[str, Any]:
        if kind == "entity":
            predicted = sum(s.n_pred_entities for s in items)
        elif kind == "relationship":
            predicted = sum(s.n_pred_relationships for s in items)
        else:
            predicted = sum(s.predicted_objects for s in items)
        with_ev = sum(s.with_evidence(kind) for s in items)
        grounded = sum(s.grounded(kind) for s in items)
        return {
            "predicted": predicted,
            "with_evidence": with_ev,
            "grounded": grounded,
            "coverage_rate": ratio(grounded, predicted, both_empty=False) if with_ev else None,
        }

    overall = block(None)
    return {
        "mode": config.evidence,
        "predicted": overall["predicted"],
        "with_evidence": overall["with_evidence"],
        "grounded": overall["grounded"],
        "evidence_coverage_rate": overall["coverage_rate"],
        "entities": block("entity"),
        "relationships": block("relationship"),
    }


def _attributes_report(items: Sequence[ItemScore], config: ScoringConfig) -> dict[str, Any]:
    """Per kind (as per item) plus, per key (kinds pooled: the ``attr.<key>`` values), accuracy
    with a bootstrap CI over items, and the run's schema violations."""
    out: dict[str, Any] = attributes_json(a for s in items for a in s.attributes)
    per_item = [s.attribute_key_counts() for s in items]
    keys = sorted({k for counts in per_item for k in counts})
    ci = bootstrap_ratios(
        {
            k: np.asarray([c.get(k, (0, 0)) for c in per_item], dtype=np.int64).reshape(-1, 2)
            for k in keys
        },
        resamples=config.resamples,
        seed=config.seed,
        confidence=config.confidence,
    )
    pooled: dict[str, dict[str, Any]] = {}
    for k in keys:
        agree = sum(c.get(k, (0, 0))[0] for c in per_item)
        total = sum(c.get(k, (0, 0))[1] for c in per_item)
        bounds = None if ci is None else ci[k]
        pooled[k] = {
            "agree": agree,
            "total": total,
            "accuracy": agree / total if total else None,
            "ci": None if bounds is None else {"low": bounds[0], "high": bounds[1]},
        }
    out["keys"] = pooled
    checked = sum(s.attribute_checked for s in items)
    objects = sum(s.attribute_violation_count for s in items)
    out["violations"] = {
        "declared": any(s.attributes_declared for s in items),
        "checked": checked,
        "objects": objects,
        "count": sum(len(s.attribute_violations) for s in items),
        "attribute_violation_rate": objects / checked if checked else None,
        "items": sorted(s.item_id for s in items if s.attribute_violations),
    }
    return out
