"""The matrix table, computed from the stored runs (so a resumed matrix reports every cell,
including those finished by an earlier invocation): each cell's headline values with CIs,
cost, latency and errors; the best cell per metric; the cells not significantly different
from the best (paired bootstrap); each repeat group's spread and per-item agreement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.evaluators import ContextIndex, GoldView, ScoringConfig
from extraction_eval.evaluators.counts import COLUMNS as PAIRED_COLUMNS
from extraction_eval.evaluators.counts import WIDTH as PAIRED_WIDTH
from extraction_eval.evaluators.counts import item_row
from extraction_eval.evaluators.stats.cluster_bootstrap import RepeatVariance, repeat_variance
from extraction_eval.evaluators.stats.multiple_testing import Correction, adjust_named
from extraction_eval.evaluators.stats.paired_delta import PairedComparison, paired_compare_counts
from extraction_eval.evaluators.stats.repeat_spread import (
    Agreement,
    Spread,
    best_cells,
    canonical_extraction,
    item_agreement,
    spread,
)
from extraction_eval.experiments.matrix_config import NOT_STARTED, CellOutcome
from extraction_eval.experiments.runner import rescore
from extraction_eval.types import DatasetItem, ItemResult

# The matrix table's metrics: headline scores (higher is better, with their CIs), then the
# run's cost, latency and failures (lower is better).
HEADLINE = ("entity_f1", "entity_typed_f1", "relationship_f1")
LOWER_IS_BETTER = ("cost_usd", "latency_p50_ms", "error_rate")
METRICS = HEADLINE + LOWER_IS_BETTER


@dataclass
class CellRow:
    """A matrix table row: the run's headline values with their CIs, cost, latency, errors."""

    name: str
    values: dict[str, float | None]  # METRICS
    ci: dict[str, tuple[float, float] | None]  # HEADLINE -> (low, high)
    items: int
    expected_items: int
    errors: int
    status: str


@dataclass
class RepeatGroup:
    """A cell's K repeats: run-to-run mean and std of each metric, and per-item agreement."""

    name: str
    runs: list[str]
    spread: dict[str, Spread]
    agreement: Agreement
    # headline metric -> pooled value, cluster-bootstrap CI, item vs run-to-run variance
    variance: dict[str, RepeatVariance] = field(default_factory=dict)


@dataclass
class MatrixTable:
    rows: list[CellRow]
    best: dict[str, tuple[str, ...]]  # metric -> the best row name(s)
    repeats: list[RepeatGroup]
    # headline metric -> the rows NOT significantly different from the best one (paired
    # bootstrap CI of Δ = row − best contains 0; the best rows themselves not listed)
    similar: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # each (metric, cell) comparison with the best: Δ, CI, p raw and adjusted, verdict
    tests: list[dict[str, Any]] = field(default_factory=list)
    correction: Correction = "holm"

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [
                {
                    "name": r.name,
                    "values": r.values,
                    "ci": {k: list(v) if v else None for k, v in r.ci.items()},
                    "items": r.items,
                    "expected_items": r.expected_items,
                    "errors": r.errors,
                    "status": r.status,
                }
                for r in self.rows
            ],
            "best": {k: list(v) for k, v in self.best.items()},
            "not_significantly_different": {k: list(v) for k, v in self.similar.items()},
            "comparisons_with_best": {"correction": self.correction, "tests": self.tests},
            "repeats": [
                {
                    "name": g.name,
                    "runs": g.runs,
                    "spread": {k: vars(s) for k, s in g.spread.items()},
                    "agreement": g.agreement.to_json(),
                    "variance": {k: v.to_json() for k, v in g.variance.items()},
                }
                for g in self.repeats
            ],
        }


def cell_row(name: str, run: RunRecord) -> CellRow:
    summary = run.summary or {}
    values_in: Mapping[str, Any] = summary.get("values") or {}
    values: dict[str, float | None] = {m: _num(values_in.get(m)) for m in HEADLINE}
    values["cost_usd"] = _num(summary.get("cost_usd"))
    values["latency_p50_ms"] = _num(summary.get("latency_p50_ms"))
    values["error_rate"] = _num(values_in.get("error_rate"))
    ci: dict[str, tuple[float, float] | None] = {}
    for metric in HEADLINE:
        low, high = (
            _num(values_in.get(f"{metric}_ci_low")),
            _num(values_in.get(f"{metric}_ci_high")),
        )
        ci[metric] = (low, high) if low is not None and high is not None else None
    return CellRow(
        name=name,
        values=values,
        ci=ci,
        items=int(summary.get("items") or 0),
        expected_items=int(summary.get("expected_items") or 0),
        errors=int(summary.get("errors") or 0),
        status=run.status,
    )


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def matrix_table(
    store: LocalStore,
    cells: Sequence[CellOutcome],
    items: Sequence[DatasetItem],
    scoring: ScoringConfig | None = None,
    correction: Correction = "holm",
) -> MatrixTable:
    """The table of every cell, the best cell per metric, the cells not significantly
    different from the best (headline metrics), and each repeat group's spread and per-item
    agreement (read from the stored results)."""
    rows = [cell_row(c.cell.name, c.run) for c in cells]
    best = best_cells({r.name: r.values for r in rows}, METRICS, lower_is_better=LOWER_IS_BETTER)
    similar, tests = not_significantly_different(
        store, cells, items, best, scoring or ScoringConfig(), correction
    )
    groups: dict[str, list[CellOutcome]] = {}
    for c in cells:
        if c.cell.repeat is not None:
            groups.setdefault(c.cell.group, []).append(c)
    ids = [item.id for item in items]
    by_name = {r.name: r for r in rows}
    repeats = []
    for group, members in groups.items():
        outputs = [_canonical_outputs(_stored(store, m.run, ids)) for m in members]
        repeats.append(
            RepeatGroup(
                name=group,
                runs=[m.cell.name for m in members],
                spread={
                    metric: spread(by_name[m.cell.name].values[metric] for m in members)
                    for metric in METRICS
                },
                agreement=item_agreement(outputs),
                variance=_repeat_variance(store, members, items, scoring or ScoringConfig()),
            )
        )
    return MatrixTable(rows, best, repeats, similar, tests, correction)


def not_significantly_different(
    store: LocalStore,
    cells: Sequence[CellOutcome],
    items: Sequence[DatasetItem],
    best: Mapping[str, tuple[str, ...]],
    scoring: ScoringConfig,
    correction: Correction = "holm",
) -> tuple[dict[str, tuple[str, ...]], list[dict[str, Any]]]:
    """Per headline metric, the cells not significantly different from the best: the paired
    bootstrap CI of Δ (cell − best) contains 0, or the comparison's p-value, adjusted over
    every (metric, cell) comparison of the matrix (``correction``), is not below α, or the
    evidence is insufficient (too few shared items). On the items both runs have a result,
    each bootstrap replicate draws the same items for both (``evaluators/stats/paired_delta.py``;
    ``scoring``'s resamples, seed, confidence and CI method). With several tied best cells,
    the first (by name) is the reference. One comparison per (reference, cell) pair serves
    every metric. Also returns each comparison (Δ, CI, raw and adjusted p, verdict)."""
    by_name = {c.cell.name: c for c in cells}
    context = ContextIndex({item.id: item.text for item in items})
    rows: dict[str, tuple[NDArray[np.int64], NDArray[np.bool_]]] = {}

    def counts(name: str) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        if name not in rows:
            rows[name] = _count_rows(store, by_name[name].run, items, scoring, context)
        return rows[name]

    return compare_with_best(list(by_name), counts, best, scoring, correction)


CountRows = Callable[[str], tuple[NDArray[np.int64], NDArray[np.bool_]]]


def compare_with_best(
    names: Sequence[str],
    counts: CountRows,
    best: Mapping[str, tuple[str, ...]],
    scoring: ScoringConfig,
    correction: Correction = "holm",
) -> tuple[dict[str, tuple[str, ...]], list[dict[str, Any]]]:
    """:func:`not_significantly_different` on any per-item count rows: ``counts(name)`` is a
    cell's (n × WIDTH) rows, the same n items in the same order for every cell, and which of
    them it has (the string table's rows, or the judged counts of ``matrix --judge``)."""
    compared: dict[tuple[str, str], PairedComparison] = {}
    tests: list[dict[str, Any]] = []
    for metric in HEADLINE:
        if not best.get(metric) or scoring.resamples == 0:
            continue
        reference = best[metric][0]
        ref_rows, ref_present = counts(reference)
        for name in names:
            if name in best[metric]:
                continue
            key = (reference, name)
            if key not in compared:
                other, present = counts(name)
                both = ref_present & present
                compared[key] = paired_compare_counts(
                    ref_rows[both],
                    other[both],
                    resamples=scoring.resamples,
                    seed=scoring.seed,
                    confidence=scoring.confidence,
                    method=scoring.ci,
                    correction="none",  # corrected below, over the whole matrix
                )
            m = compared[key].metric(metric)
            tests.append(
                {
                    "metric": metric,
                    "cell": name,
                    "best": reference,
                    "items": compared[key].items,
                    "delta": m.delta,
                    "ci": None if m.ci_low is None else [m.ci_low, m.ci_high],
                    "test": "paired bootstrap",
                    "p_value": m.p_value,
                    "verdict_uncorrected": m.verdict,
                }
            )
    adjusted = adjust_named({str(i): t["p_value"] for i, t in enumerate(tests)}, correction)
    alpha = 1.0 - scoring.confidence
    out: dict[str, tuple[str, ...]] = {metric: () for metric in HEADLINE}
    for i, t in enumerate(tests):
        t["p_adjusted"] = adjusted[str(i)]
        verdict = t["verdict_uncorrected"]
        p_adj = t["p_adjusted"]
        # as MetricComparison.verdict: a p the correction raised to α or above drops the claim
        kept = correction == "none" or p_adj is None or p_adj < alpha
        if verdict in ("improved", "regressed") and not kept:
            verdict = "no significant change"  # a difference the correction does not keep
        t["verdict"] = verdict
        if t["verdict"] not in ("improved", "regressed"):
            out[t["metric"]] += (t["cell"],)
    return out, tests


def _repeat_variance(
    store: LocalStore,
    members: Sequence[CellOutcome],
    items: Sequence[DatasetItem],
    scoring: ScoringConfig,
) -> dict[str, RepeatVariance]:
    """Each headline metric of a repeated cell pooled over its K runs, on the items every run
    has a result for: cluster-bootstrap CI by item, and the item vs run-to-run split."""
    context = ContextIndex({item.id: item.text for item in items})
    rows = [_count_rows(store, m.run, items, scoring, context) for m in members]
    present = np.logical_and.reduce([p for _, p in rows])
    if not present.any() or scoring.resamples == 0:
        return {}
    out = {}
    for metric, group in (("entity_f1", "entity"), ("entity_typed_f1", "entity_typed"),
                          ("relationship_f1", "relationship")):  # fmt: skip
        cols = [PAIRED_COLUMNS.index(f"{group}_{c}") for c in ("tp", "fp", "fn")]
        out[metric] = repeat_variance(
            [r[present][:, cols] for r, _ in rows],
            "f1",
            resamples=scoring.resamples,
            seed=scoring.seed,
            confidence=scoring.confidence,
            method=scoring.ci,
        )
    return out


def _count_rows(
    store: LocalStore,
    run: RunRecord,
    items: Sequence[DatasetItem],
    scoring: ScoringConfig,
    context: ContextIndex,
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """The run's per-item count rows (``counts.item_row``) in dataset order, re-scored from
    the stored results as ``finalize`` does (against the gold the run trusted, with
    ``--min-gold-confidence``), and which items have a result."""
    view = GoldView.of_run(run.config)  # the run's schema, labels and gold floor
    index = {item.id: i for i, item in enumerate(items)}
    matrix = np.zeros((len(items), PAIRED_WIDTH), dtype=np.int64)
    present = np.zeros(len(items), dtype=np.bool_)
    for result in _stored(store, run, [item.id for item in items]):
        i = index[result.item_id]
        item = items[i]
        score = rescore(item, result.output, scoring, context, view=view)
        matrix[i] = item_row(score, schema_failure=result.error_kind == "schema")
        present[i] = True
    return matrix, present


def _stored(store: LocalStore, run: RunRecord, ids: Sequence[str]) -> Iterator[ItemResult]:
    """The run's stored results; none for a cell that never started (its run was deleted)."""
    if run.status == NOT_STARTED:
        return iter(())
    return store.iter_item_results(run.id, ids)


def _canonical_outputs(results: Any) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for result in results:
        assert isinstance(result, ItemResult)
        out[result.item_id] = canonical_extraction(result.output) if result.ok else None
    return out
