"""Run-level figures: micro scores with CIs, failure counts, latency, tokens and cost.

Every item counts: a failed item was scored by the runner as a failure (see
``extraction_eval.evaluators.item``), so it is in the micro counts (all its gold objects
missed), a 0 in the macro means, a zero_fp_pass failure on a gold-empty item, and in the failure
counts. Each rate is kept with what it is computed over (``score_counts``, the report's counts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from extraction_eval.evaluators import ItemScore, ScoringConfig, aggregate
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
            "values": self.values,
            "score_means": self.score_means,
            "score_counts": self.score_counts,
            "report": self.report,
        }


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def summarize(
    results: Sequence[ItemResult],
    item_scores: Sequence[ItemScore],
    scoring: ScoringConfig,
    *,
    expected_items: int | None = None,
) -> RunSummary:
    report = aggregate(list(item_scores), scoring)
    errors = sum(1 for r in results if not r.ok)
    schema_failures = sum(1 for r in results if r.error_kind == "schema")
    latencies = [r.latency_ms for r in results if r.latency_ms is not None and not r.cache_hit]
    costs = [r.usage.cost_usd for r in results if r.usage.cost_usd is not None]
    unpriced = sum(
        1
        for r in results
        if r.usage.cost_usd is None
        and (r.usage.tokens_in is not None or r.usage.tokens_out is not None)
    )

    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for r in results:
        for s in r.scores:
            if isinstance(s.value, (bool, int, float)):
                sums[s.name] += float(s.value)
                counts[s.name] += 1
    means = {name: sums[name] / counts[name] for name in sorted(sums)}

    n = len(results)
    values = run_values(report)
    values["error_rate"] = _ratio(errors, n)
    values["schema_failure_rate"] = _ratio(schema_failures, n)

    summary = RunSummary(
        items=n,
        expected_items=expected_items if expected_items is not None else n,
        errors=errors,
        schema_failures=schema_failures,
        cache_hits=sum(1 for r in results if r.cache_hit),
        latency_p50_ms=_percentile(latencies, 50),
        latency_p95_ms=_percentile(latencies, 95),
        tokens_in=sum(r.usage.tokens_in or 0 for r in results),
        tokens_out=sum(r.usage.tokens_out or 0 for r in results),
        cost_usd=round(sum(costs), 6) if costs else None,
        report=report,
        score_means=means,
        score_counts={name: counts[name] for name in sorted(sums)},
        values=values,
        unpriced_items=unpriced,
    )
    summary.run_scores = run_scores(summary)
    return summary


_PRF_GROUPS = ("entity", "entity_typed", "relationship")
# Every run-level value a run can have (some are absent when undefined, e.g. no evidence):
# what ``--fail-under`` accepts, checked before a run starts.
RUN_VALUE_NAMES: frozenset[str] = frozenset(
    {
        f"{group}_{metric}{suffix}"
        for group in _PRF_GROUPS
        for metric in ("precision", "recall", "f1")
        for suffix in ("", "_ci_low", "_ci_high")
    }
    | {
        "type_accuracy",
        "relationship_accuracy",
        "evidence_coverage_rate",
        "zero_fp_pass_rate",
        "hallucination_rate",
        "error_rate",
        "schema_failure_rate",
        "attribute_violation_rate",
    }
)
# Figures where lower is better: a threshold on them is a ceiling (``fail_over``), never a
# floor, or "--fail-under error_rate=0.1" would fail a run for having too few errors.
LOWER_IS_BETTER: frozenset[str] = frozenset(
    {"error_rate", "schema_failure_rate", "hallucination_rate", "attribute_violation_rate"}
)
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
    return scores
