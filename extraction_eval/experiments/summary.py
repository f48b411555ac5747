"""Run-level figures: micro scores with CIs, failure counts, latency, tokens and cost.

Every item counts: a failed item was scored by the runner as a failure (see
``extraction_eval.evaluators.item``), so it is in the micro counts (all its gold objects
missed), a 0 in the macro means, a zero_fp_pass failure on a gold-empty item, and in the failure
counts. Each rate is kept with what it is computed over (``score_counts``, the report's counts).
"""

from __future__ import annotations

import math
from array import array
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from extraction_eval.evaluators import ItemScore, ReportAccumulator, ScoringConfig
from extraction_eval.evaluators.counts import METRICS, PRF_GROUPS
from extraction_eval.types import ItemResult, Score


@dataclass
class RunSummary:
    items: int
    expected_items: int
    errors: int
    schema_failures: int
    cache_hits: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    tokens_in: int
    tokens_out: int
    cost_usd: float | None
    report: dict[str, Any]  # the evaluators' aggregate report (micro, macro, CIs, ...)
    score_means: dict[str, float]  # mean of every item-level score, by name
    score_counts: dict[str, int] = field(default_factory=dict)  # items each mean is over
    values: dict[str, float] = field(default_factory=dict)  # run-level values for --fail-under
    # items that reported tokens but have no cost (model not in the price database)
    unpriced_items: int = 0
    run_scores: list[Score] = field(default_factory=list)
    # answers read leniently, by repair (fence, prose, wrapper): an answer may need several
    repairs: dict[str, int] = field(default_factory=dict)
    repaired_items: int = 0  # answers that needed at least one repair

    @property
    def missing(self) -> int:
        return self.expected_items - self.items

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "expected_items": self.expected_items,
            "missing": self.missing,
            "errors": self.errors,
            "schema_failures": self.schema_failures,
            "cache_hits": self.cache_hits,
            "latency_p50_ms": self.latency_p50_ms,
            "latency_p95_ms": self.latency_p95_ms,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "unpriced_items": self.unpriced_items,
            "repairs": self.repairs,
            "repaired_items": self.repaired_items,
            "values": self.values,
            "score_means": self.score_means,
            "score_counts": self.score_counts,
            "report": self.report,
        }


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def _percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if len(values) else None


class SummaryAccumulator:
    """The run summary folded one result (and its :class:`ItemScore`) at a time, so
    summarising a 100,000-item run keeps counts and 8 bytes per latency, cost and numeric
    score, never the results. Every figure is independent of the order results are added in
    (float sums are ``math.fsum``, correctly rounded): a run folded as its items finish equals
    the same results folded in dataset order."""

    def __init__(self, scoring: ScoringConfig) -> None:
        self.report = ReportAccumulator(scoring)
        self.items = 0
        self.errors = 0
        self.schema_failures = 0
        self.cache_hits = 0
        self.unpriced = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.latencies: array[float] = array("d")
        self.costs: array[float] = array("d")
        self.score_values: dict[str, array[float]] = defaultdict(lambda: array("d"))
        self.repairs: dict[str, int] = defaultdict(int)
        self.repaired_items = 0

    def add(self, result: ItemResult, score: ItemScore) -> None:
        self.add_result(result)
        self.report.add(score)

    def add_result(self, r: ItemResult) -> None:
        self.items += 1
        self.errors += 0 if r.ok else 1
        self.schema_failures += 1 if r.error_kind == "schema" else 0
        self.cache_hits += 1 if r.cache_hit else 0
        if r.latency_ms is not None and not r.cache_hit:
            self.latencies.append(r.latency_ms)
        if r.usage.cost_usd is not None:
            self.costs.append(r.usage.cost_usd)
        elif r.usage.tokens_in is not None or r.usage.tokens_out is not None:
            self.unpriced += 1
        self.tokens_in += r.usage.tokens_in or 0
        self.tokens_out += r.usage.tokens_out or 0
        self.repaired_items += 1 if r.repairs else 0
        for repair in r.repairs:
            self.repairs[repair] += 1
        for s in r.scores:
            if isinstance(s.value, (bool, int, float)):
                self.score_values[s.name].append(float(s.value))

    def summary(self, *, expected_items: int | None = None) -> RunSummary:
        report = self.report.report()
        scored, n = self.score_values, self.items
        values = run_values(report)
        values["error_rate"] = _ratio(self.errors, n)
        values["schema_failure_rate"] = _ratio(self.schema_failures, n)
        summary = RunSummary(
            items=n,
            expected_items=expected_items if expected_items is not None else n,
            errors=self.errors,
            schema_failures=self.schema_failures,
            cache_hits=self.cache_hits,
            latency_p50_ms=_percentile(self.latencies, 50),
            latency_p95_ms=_percentile(self.latencies, 95),
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            cost_usd=round(math.fsum(self.costs), 6) if self.costs else None,
            report=report,
            score_means={name: math.fsum(xs) / len(xs) for name, xs in sorted(scored.items())},
            score_counts={name: len(scored[name]) for name in sorted(scored)},
            values=values,
            unpriced_items=self.unpriced,
            repairs=dict(sorted(self.repairs.items())),
            repaired_items=self.repaired_items,
        )
        summary.run_scores = run_scores(summary)
        return summary


_PRF = tuple(f"{g}_{m}" for g in PRF_GROUPS for m in ("precision", "recall", "f1"))
# Every run-level value a run can have (some are absent when undefined, e.g. no evidence):
# what ``--fail-under`` accepts, checked before a run starts. The compared metrics
# (``evaluators.counts.METRICS``), plus the P/R/F1 CI bounds.
RUN_VALUE_NAMES: frozenset[str] = frozenset(
    {f"{name}{suffix}" for name in _PRF for suffix in ("", "_ci_low", "_ci_high")} | set(METRICS)
)
# LOWER_IS_BETTER (evaluators/metrics.py): a threshold on those is a ceiling (``fail_over``),
# never a floor, or "--fail-under error_rate=0.1" would fail a run for having too few errors.
# Per-attribute accuracy: ``attr.<key>`` (and its ``_ci_low`` / ``_ci_high``), for the keys a
# dataset has; checked against the dataset once its items are loaded (``check_fail_under``).
ATTRIBUTE_PREFIX = "attr."


def run_values(report: dict[str, Any]) -> dict[str, float]:
    """Flatten the report's headline (micro) figures into ``name -> value``."""
    values: dict[str, float] = {}
    for block, prefix in (
        ("entities", "entity"),
        ("entities_typed", "entity_typed"),
        ("relationships", "relationship"),
    ):
        counts = report.get(block) or {}
        for metric in ("precision", "recall", "f1"):
            v = counts.get(metric)
            if isinstance(v, (int, float)):
                values[f"{prefix}_{metric}"] = float(v)
    for key in ("type_accuracy", "relationship_accuracy"):
        v = report.get(key)
        if isinstance(v, (int, float)):
            values[key] = float(v)
    evidence = report.get("evidence") or {}
    cov = evidence.get("evidence_coverage_rate") if isinstance(evidence, dict) else None
    if isinstance(cov, (int, float)):
        values["evidence_coverage_rate"] = float(cov)
    neg = report.get("negative_space") or {}
    for key in ("zero_fp_pass_rate", "hallucination_rate"):
        v = neg.get(key) if isinstance(neg, dict) else None
        if isinstance(v, (int, float)):
            values[key] = float(v)
    ci = report.get("ci") or {}
    if isinstance(ci, dict):
        for name, bounds in ci.items():
            lo_hi = _bounds(bounds)
            if lo_hi is not None:
                values[f"{name}_ci_low"], values[f"{name}_ci_high"] = lo_hi
    values.update(_attribute_values(report.get("attributes")))
    return values


def _attribute_values(attributes: Any) -> dict[str, float]:
    """``attr.<key>`` accuracy (+ CI bounds) and ``attribute_violation_rate``, when defined."""
    values: dict[str, float] = {}
    if not isinstance(attributes, dict):
        return values
    keys = attributes.get("keys")
    for key, block in keys.items() if isinstance(keys, dict) else ():
        acc = block.get("accuracy") if isinstance(block, dict) else None
        if isinstance(acc, (int, float)):
            values[f"{ATTRIBUTE_PREFIX}{key}"] = float(acc)
        lo_hi = _bounds(block.get("ci")) if isinstance(block, dict) else None
        if lo_hi is not None:
            values[f"{ATTRIBUTE_PREFIX}{key}_ci_low"] = lo_hi[0]
            values[f"{ATTRIBUTE_PREFIX}{key}_ci_high"] = lo_hi[1]
    violations = attributes.get("violations")
    rate = violations.get("attribute_violation_rate") if isinstance(violations, dict) else None
    if isinstance(rate, (int, float)):
        values["attribute_violation_rate"] = float(rate)
    return values


def _bounds(bounds: Any) -> tuple[float, float] | None:
    if isinstance(bounds, dict):
        lo, hi = bounds.get("low"), bounds.get("high")
    elif isinstance(bounds, (list, tuple)) and len(bounds) == 2:
        lo, hi = bounds
    else:
        return None
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return float(lo), float(hi)
    return None


def run_scores(summary: RunSummary) -> list[Score]:
    """Run-level scores recorded on the run (LangFuse: on the experiment)."""
    scores = [Score(name=name, value=value) for name, value in sorted(summary.values.items())]
    scores.append(Score(name="items", value=float(summary.items)))
    scores.append(
        Score(
            name="error_count",
            value=float(summary.errors),
            comment=f"{summary.errors} of {summary.items} items failed",
        )
    )
    scores.append(Score(name="schema_failure_count", value=float(summary.schema_failures)))
    if summary.repairs:  # only runs with repaired answers, so other runs' scores stay as they were
        scores.append(
            Score(
                name="answers_repaired",
                value=float(summary.repaired_items),
                comment=f"{summary.repaired_items} of {summary.items} answers read leniently:"
                f" {repairs_text(summary.repairs)}",
            )
        )
    ignored = summary.report.get("ignored") or {}
    if ignored.get("gold") or ignored.get("predictions"):  # only runs with ignore regions
        comment = "gold objects below the confidence floor, and the predictions aligned with them"
        for name, key in (("ignored_gold", "gold"), ("ignored_predictions", "predictions")):
            scores.append(Score(name=name, value=float(ignored.get(key, 0)), comment=comment))
    return scores


def repairs_text(repairs: dict[str, int]) -> str:
    """``fence 10, wrapper 2``: the answers read leniently, by repair."""
    return ", ".join(f"{name} {count}" for name, count in repairs.items())
