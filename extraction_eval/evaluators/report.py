"""Run aggregation: many :class:`ItemScore` into the run report (``score --format json``).

Counts are summed over items (micro, the headline), per-item values averaged (macro) and the
micro figures bootstrapped over items; a failed item counts everywhere as a failure.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from extraction_eval.evaluators.config import ScoringConfig
from extraction_eval.evaluators.item import (
    VALUE_NAMES,
    AttributeCount,
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
    vacuous,
)
from extraction_eval.evaluators.stats import bootstrap_prf, bootstrap_ratios
from extraction_eval.evaluators.stats.intervals import METHOD_TEXT
from extraction_eval.evaluators.stats.verdict_rules import approximate_warning
from extraction_eval.evaluators.taxonomy import CATEGORIES


class _TypeSums:
    """Per-type counts summed over items; the label is the alphabetically first spelling."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.sums: dict[str, list[int]] = {}

    def add(self, group: Iterable[TypeCount]) -> None:
        for t in group:
            if t.key not in self.labels or t.label < self.labels[t.key]:
                self.labels[t.key] = t.label
            acc = self.sums.setdefault(t.key, [0, 0, 0])
            acc[0] += t.tp
            acc[1] += t.fp
            acc[2] += t.fn

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {self.labels[k]: counts_json(Counts(*v)) for k, v in self.sums.items()}

    def sides(self) -> tuple[list[str], list[str]]:
        """(predicted labels, gold labels): types that predictions / gold objects carry."""
        pred = sorted(self.labels[k] for k, (tp, fp, _) in self.sums.items() if tp or fp)
        gold = sorted(self.labels[k] for k, (tp, _, fn) in self.sums.items() if tp or fn)
        return pred, gold


def _sides_if_apart(
    types: _TypeSums, meet: bool, typed_tp: int, untyped_tp: int
) -> dict[str, list[str]] | None:
    pred, gold = types.sides()
    if not pred or not gold:
        return None
    if meet and not (typed_tp == 0 and untyped_tp > 0):
        return None
    return {"predicted": pred, "gold": gold}


def label_mismatch(
    entities: _TypeSums,
    relationships: _TypeSums,
    config: ScoringConfig,
    typed_tp: int,
    untyped_tp: int,
) -> dict[str, dict[str, list[str]]] | None:
    """The label sets that cannot meet, per kind: entity types when no predicted type ever
    equals a gold type, or names match (untyped tp > 0) while types never do (typed tp = 0);
    relationship types when none equals a gold type or its inverse. None when both meet."""
    out: dict[str, dict[str, list[str]]] = {}

    def keys(types: _TypeSums, side: int) -> set[str]:
        return {k for k, c in types.sums.items() if c[0] or c[side]}

    meet_e = bool(keys(entities, 1) & keys(entities, 2))
    found = _sides_if_apart(entities, meet_e, typed_tp, untyped_tp)
    if found is not None:
        out["entities"] = found
    pred_r, gold_r = keys(relationships, 1), keys(relationships, 2)
    inverse = {(a, b) for a, b in config.inverse_pairs} | {(b, a) for a, b in config.inverse_pairs}
    meet_r = bool(pred_r & gold_r) or any((p, g) in inverse for p in pred_r for g in gold_r)
    found = _sides_if_apart(relationships, meet_r, 1, 0)
    if found is not None:
        out["relationships"] = found
    return out or None


def _int_rows(values: array[int], width: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.frombuffer(values, dtype=np.int64).reshape(-1, width)


class ReportAccumulator:
    """The run report folded one :class:`ItemScore` at a time, so a run's memory does not grow
    with its items' pairs and objects: only sums, the macro values (8 bytes each), the
    bootstrap's integer count rows and the ids of failed items are kept.

    ``report()`` is exactly :func:`aggregate`'s result for the same items, in any order."""

    def __init__(self, config: ScoringConfig) -> None:
        self.config = config
        self.n = 0
        self.counts = {
            "entities": [0, 0, 0],
            "entities_typed": [0, 0, 0],
            "relationships": [0, 0, 0],
        }
        # per item (tp, fp, fn) for each group, then the failure flag: the bootstrap's rows
        self.rows: dict[str, array[int]] = {name: array("q") for name in self.counts}
        self.failed_flags: array[int] = array("b")
        self.type_correct = 0
        self.failed_ids: list[str] = []
        self.match_types: dict[str, int] = dict.fromkeys(RELATIONSHIP_MATCH_TYPES, 0)
        self.entity_match_types = {"exact": 0, "fuzzy": 0}
        # matches made through a gold entity's mention or alias (clusters.py)
        self.alias_matches = {"entities": 0, "entities_typed": 0, "relationships": 0}
        self.taxonomy: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self.entity_types = _TypeSums()
        self.relationship_types = _TypeSums()
        self.macro_values: dict[str, array[float]] = {name: array("d") for name in VALUE_NAMES}
        # evidence: predicted objects, with evidence, grounded; per kind
        self.evidence: dict[Kind, list[int]] = {"entity": [0, 0, 0], "relationship": [0, 0, 0]}
        self.gold_empty = 0
        self.errored_empty = 0
        self.hallucinations = 0
        self.passed = 0
        # attributes: (kind, key) -> [agree, total] in first-seen order; per key, the items
        # (by position) that have it and their (agree, total), for the per-key bootstrap
        self.attribute_sums: dict[tuple[Kind, str], list[int]] = {}
        self.key_items: dict[str, array[int]] = {}
        self.key_counts: dict[str, array[int]] = {}
        self.attributes_declared = False
        self.attribute_checked = 0
        self.violating_objects = 0
        self.violations = 0
        self.violation_ids: list[str] = []
        self.ignored_gold = 0
        self.ignored_predictions = 0

    def add(self, s: ItemScore) -> None:
        position = self.n
        self.n += 1
        for name, c in (
            ("entities", s.entities),
            ("entities_typed", s.entities_typed),
            ("relationships", s.relationships),
        ):
            acc = self.counts[name]
            acc[0] += c.tp
            acc[1] += c.fp
            acc[2] += c.fn
            self.rows[name].extend(c)
        self.failed_flags.append(1 if s.failed else 0)
        self.type_correct += s.type_correct
        if s.failed:
            self.failed_ids.append(s.item_id)
        for k, n in s.match_type_counts().items():
            self.match_types[k] += n
        for k, n in s.entity_match_type_counts().items():
            self.entity_match_types[k] += n
        for k, n in s.alias_match_counts().items():
            self.alias_matches[k] += n
        for k, n in s.taxonomy_counts().items():
            self.taxonomy[k] += n
        self.entity_types.add(s.entity_types)
        self.relationship_types.add(s.relationship_types)
        for name, value in s.values().items():
            if value is not None:
                self.macro_values[name].append(value)
        predicted_by_kind: tuple[tuple[Kind, int], ...] = (
            ("entity", s.n_pred_entities),
            ("relationship", s.n_pred_relationships),
        )
        for kind, predicted in predicted_by_kind:
            ev = self.evidence[kind]
            ev[0] += predicted
            ev[1] += s.with_evidence(kind)
            ev[2] += s.grounded(kind)
        if s.gold_empty:
            self.gold_empty += 1
            if s.failed:
                self.errored_empty += 1
            else:
                self.hallucinations += s.hallucination_count
            if s.zero_fp_pass:
                self.passed += 1
        for a in s.attributes:
            acc = self.attribute_sums.setdefault((a.kind, a.key), [0, 0])
            acc[0] += a.agree
            acc[1] += a.total
        for key, pair in s.attribute_key_counts().items():
            self.key_items.setdefault(key, array("q")).append(position)
            self.key_counts.setdefault(key, array("q")).extend(pair)
        self.attributes_declared = self.attributes_declared or s.attributes_declared
        self.attribute_checked += s.attribute_checked
        self.violating_objects += s.attribute_violation_count
        self.violations += len(s.attribute_violations)
        if s.attribute_violations:
            self.violation_ids.append(s.item_id)
        self.ignored_gold += s.ignored_gold
        self.ignored_predictions += s.ignored_predictions

    def report(self, *, warnings: Sequence[str] = ()) -> dict[str, Any]:
        """The run report (``score --format json``) of the items added so far."""
        config = self.config
        e, t, r = (Counts(*self.counts[k]) for k in self.counts)
        any_failed = bool(self.failed_ids)
        macro_values = self.macro_values
        macro = {name: mean(xs) for name, xs in macro_values.items()}
        no_prediction = sorted(self.failed_ids)
        empty = self.gold_empty
        scored_empty = empty - self.errored_empty
        ci = bootstrap_prf(
            {name: _int_rows(rows, 3) for name, rows in self.rows.items()},
            resamples=config.resamples,
            seed=config.seed,
            confidence=config.confidence,
            method=config.ci,
            failed=np.frombuffer(self.failed_flags, dtype=np.int8).astype(np.bool_),
        )
        all_warnings = list(warnings)
        if no_prediction:
            all_warnings.append(
                f"{len(no_prediction)} item(s) had no prediction (errored) and were scored as "
                "failures: "
                + ", ".join(no_prediction[:20])
                + (f", ... ({len(no_prediction) - 20} more)" if len(no_prediction) > 20 else "")
            )
        if ci is not None and (small := approximate_warning(self.n)):
            all_warnings.append(small)
        return {
            "config": config.to_json(),
            "items": self.n,
            "failed_items": len(no_prediction),
            "no_prediction": {"count": len(no_prediction), "ids": no_prediction},
            "entities": {**counts_json(e, failed=any_failed), "type_correct": self.type_correct},
            "entities_typed": counts_json(t, failed=any_failed),
            "type_accuracy": accuracy(
                self.type_correct, e.tp, both_empty=vacuous(e, failed=any_failed)
            ),
            "relationships": counts_json(r, failed=any_failed),
            "relationship_accuracy": accuracy(
                r.tp, r.predicted, both_empty=vacuous(r, failed=any_failed)
            ),
            "match_types": dict(self.match_types),
            "entity_match_types": dict(self.entity_match_types),
            "alias_matches": dict(self.alias_matches),
            "per_type": {
                "entities": self.entity_types.to_json(),
                "relationships": self.relationship_types.to_json(),
            },
            "attributes": self._attributes_report(),
            "evidence": self._evidence_report(),
            "negative_space": {
                "gold_empty_items": empty,
                "errored": self.errored_empty,
                "scored": scored_empty,
                "zero_fp_pass_count": self.passed,
                "zero_fp_pass_rate": self.passed / empty if empty else None,
                "hallucination_count": self.hallucinations,
                "hallucination_rate": self.hallucinations / scored_empty if scored_empty else None,
            },
            "taxonomy": dict(self.taxonomy),
            "macro": macro,
            "macro_items": {name: len(xs) for name, xs in macro_values.items()},
            "ci": _ci_json(ci, config),
            "ignored": {"gold": self.ignored_gold, "predictions": self.ignored_predictions},
            "label_mismatch": label_mismatch(
                self.entity_types, self.relationship_types, config, t.tp, e.tp
            ),
            "warnings": all_warnings,
        }

    def _evidence_report(self) -> dict[str, Any]:
        def block(predicted: int, with_ev: int, grounded: int) -> dict[str, Any]:
            return {
                "predicted": predicted,
                "with_evidence": with_ev,
                "grounded": grounded,
                "coverage_rate": ratio(grounded, predicted, both_empty=False) if with_ev else None,
            }

        ent, rel = self.evidence["entity"], self.evidence["relationship"]
        overall = block(*(a + b for a, b in zip(ent, rel, strict=True)))
        return {
            "mode": self.config.evidence,
            "predicted": overall["predicted"],
            "with_evidence": overall["with_evidence"],
            "grounded": overall["grounded"],
            "evidence_coverage_rate": overall["coverage_rate"],
            "entities": block(*ent),
            "relationships": block(*rel),
        }

    def _attributes_report(self) -> dict[str, Any]:
        """Per kind (as per item) plus, per key (kinds pooled: the ``attr.<key>`` values),
        accuracy with a bootstrap CI over items, and the run's schema violations."""
        config = self.config
        out: dict[str, Any] = attributes_json(
            AttributeCount(kind, key, agree, total)
            for (kind, key), (agree, total) in self.attribute_sums.items()
        )
        keys = sorted(self.key_items)
        dense: dict[str, np.ndarray[Any, np.dtype[np.int64]]] = {}
        for k in keys:
            column = np.zeros((self.n, 2), dtype=np.int64)  # (0, 0) for items without the key
            column[np.frombuffer(self.key_items[k], dtype=np.int64)] = _int_rows(
                self.key_counts[k], 2
            )
            dense[k] = column
        ci = bootstrap_ratios(
            dense,
            resamples=config.resamples,
            seed=config.seed,
            confidence=config.confidence,
            method=config.ci,
        )
        pooled: dict[str, dict[str, Any]] = {}
        for k in keys:
            agree, total = (int(x) for x in dense[k].sum(axis=0))
            bounds = None if ci is None else ci[k]
            pooled[k] = {
                "agree": agree,
                "total": total,
                "accuracy": agree / total if total else None,
                "ci": None if bounds is None else {"low": bounds[0], "high": bounds[1]},
            }
        out["keys"] = pooled
        checked = self.attribute_checked
        out["violations"] = {
            "declared": self.attributes_declared,
            "checked": checked,
            "objects": self.violating_objects,
            "count": self.violations,
            "attribute_violation_rate": self.violating_objects / checked if checked else None,
            "items": sorted(self.violation_ids),
        }
        return out


def aggregate(
    items: Iterable[ItemScore], config: ScoringConfig, *, warnings: Sequence[str] = ()
) -> dict[str, Any]:
    """The run report (``score --format json``). Deterministic and independent of item order
    and item ids; ``json.dumps(report, sort_keys=True)`` is byte-stable.

    Failed items count everywhere as failures: in the micro counts (all their gold missed), as
    0 in the macro means, as zero_fp_pass failures; and while any item failed, summed counts
    of 0 never earn the both-empty 1.0. Folds :class:`ReportAccumulator` over ``items``."""
    acc = ReportAccumulator(config)
    for s in items:
        acc.add(s)
    return acc.report(warnings=warnings)


def _ci_json(ci: dict[str, dict[str, list[float]]] | None, config: ScoringConfig) -> dict[str, Any]:
    """Flat names matching the item scores: ``entity_f1: {"low", "high"}``, ..."""
    out: dict[str, Any] = {
        "method": f"{METHOD_TEXT[config.ci]} over items",
        "ci_method": config.ci,
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
