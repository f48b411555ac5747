"""Paired comparison of two runs on the same items: Δ = B − A with a paired bootstrap CI,
McNemar's exact test on per-item outcomes, per-type F1 side by side, a verdict per metric.

Pure: integer count rows in, figures out. One row per item and run (:data:`COLUMNS`, from
:func:`item_row`); A's and B's rows of one item sit side by side, so every bootstrap replicate
draws item indices once and recomputes both runs' micro metrics on the same items
(:func:`~extraction_eval.evaluators.stats.bootstrap.resampled_sums`). A failed item is scored as
everywhere: an empty prediction that never earns the both-empty 1.0.

    acc = PairedAccumulator()
    for a, b in pairs_of_item_scores:      # same item, run A and run B
        acc.add(a, b)
    result = acc.compare(resamples=10_000, seed=42)
    result.metric("entity_f1").verdict     # "improved" | "regressed" | ...
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cmp_to_key, partial
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.counts import (
    COLUMN_INDEX,
    METRICS,
    WIDTH,
    StoredCounts,
    item_row,
    metric_arrays,
)
from extraction_eval.evaluators.item import ItemScore, TypeCount
from extraction_eval.evaluators.metrics import LOWER_IS_BETTER, Counts, f1
from extraction_eval.evaluators.stats.bootstrap import resampled_sums
from extraction_eval.evaluators.stats.intervals import (
    METHOD_TEXT,
    CiMethod,
    bootstrap_p_value,
    quantile_levels,
)
from extraction_eval.evaluators.stats.mcnemar import McNemar, mcnemar_exact
from extraction_eval.evaluators.stats.multiple_testing import CORRECTION_TEXT, Correction
from extraction_eval.evaluators.stats.verdict_rules import MIN_ITEMS, corrected, insufficient
from extraction_eval.validation import check_int

Verdict = Literal["improved", "regressed", "no significant change", "undefined", "insufficient"]


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric in A and B, Δ = B − A and the paired bootstrap CI of Δ (None: undefined)."""

    name: str
    a: float | None
    b: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    lower_is_better: bool
    # replicates where Δ was defined (both runs' metric defined on the resample)
    resamples_defined: int
    # two-sided paired bootstrap p of Δ = 0 (raw), and adjusted over the comparison's family
    # (None: not corrected; the verdict is the CI's alone)
    p_value: float | None = None
    p_adjusted: float | None = None
    alpha: float = 0.05
    # why the evidence cannot carry a verdict (too few items, a zero-width CI); None: it can
    insufficient: str | None = None

    @property
    def verdict(self) -> Verdict:
        """improved / regressed when the CI of Δ excludes 0 (and, when the family is
        corrected, the adjusted p is below α), in the metric's good direction; insufficient
        when the evidence cannot carry a verdict."""
        if self.ci_low is None or self.ci_high is None:
            return "undefined"
        if self.insufficient is not None:
            return "insufficient"
        if self.p_adjusted is not None and self.p_adjusted >= self.alpha:
            return "no significant change"
        if self.ci_low > 0:
            return "regressed" if self.lower_is_better else "improved"
        if self.ci_high < 0:
            return "improved" if self.lower_is_better else "regressed"
        return "no significant change"

    def worst_case(self) -> float | None:
        """The CI bound of Δ on the bad side, signed so that negative means worse in B:
        the low bound, or minus the high bound for a lower-is-better metric."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return -self.ci_high if self.lower_is_better else self.ci_low

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "delta": self.delta,
            "ci": None
            if self.ci_low is None or self.ci_high is None
            else {"low": self.ci_low, "high": self.ci_high},
            "lower_is_better": self.lower_is_better,
            "resamples_defined": self.resamples_defined,
            "p_value": {
                "test": "paired bootstrap",
                "raw": self.p_value,
                "adjusted": self.p_adjusted,
            },
            "verdict": self.verdict,
            "insufficient": self.insufficient,
        }


@dataclass(frozen=True, slots=True)
class TypeComparison:
    """One entity or relationship type: F1 in A and B (per-type counts summed over the paired
    items, as in the run report's ``per_type``), Δ and support (gold objects of the type)."""

    kind: Literal["entity", "relationship"]
    label: str
    a: Counts
    b: Counts

    @property
    def support(self) -> int:
        return self.a.tp + self.a.fn

    @property
    def a_f1(self) -> float:
        return f1(self.a)

    @property
    def b_f1(self) -> float:
        return f1(self.b)

    @property
    def delta(self) -> float:
        return self.b_f1 - self.a_f1

    def to_json(self) -> dict[str, Any]:
        return {
            "support": self.support,
            "a_f1": self.a_f1,
            "b_f1": self.b_f1,
            "delta": self.delta,
            "a": dict(self.a._asdict()),
            "b": dict(self.b._asdict()),
        }


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Everything :meth:`PairedAccumulator.compare` finds; ``to_json`` has a stable key order."""

    items: int
    resamples: int
    seed: int
    confidence: float
    metrics: tuple[MetricComparison, ...]
    mcnemar: McNemar
    entity_types: tuple[TypeComparison, ...]
    relationship_types: tuple[TypeComparison, ...]
    ci_method: CiMethod = "expanded"
    correction: Correction = "holm"
    min_items: int = MIN_ITEMS

    def metric(self, name: str) -> MetricComparison:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "bootstrap": {
                "method": f"paired {METHOD_TEXT[self.ci_method]} over items",
                "ci_method": self.ci_method,
                "level": self.confidence,
                "resamples": self.resamples,
                "seed": self.seed,
            },
            "correction": {
                "method": self.correction,
                "text": CORRECTION_TEXT[self.correction],
                "family": "every compared metric's paired bootstrap p and McNemar's p",
            },
            "min_items": self.min_items,
            "metrics": {m.name: m.to_json() for m in self.metrics},
            "mcnemar": self.mcnemar.to_json(),
            "per_type": {
                "entities": {t.label: t.to_json() for t in self.entity_types},
                "relationships": {t.label: t.to_json() for t in self.relationship_types},
            },
        }


class _TypeSums:
    """Per-type (tp, fp, fn) of A and B summed over items; label: first spelling
    alphabetically over both runs (as the run report does for one run)."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.sums: dict[str, list[int]] = {}

    def add(self, side: int, group: Iterable[TypeCount], times: int = 1) -> None:
        for t in group:
            if t.key not in self.labels or t.label < self.labels[t.key]:
                self.labels[t.key] = t.label
            acc = self.sums.setdefault(t.key, [0] * 6)
            acc[3 * side] += t.tp * times
            acc[3 * side + 1] += t.fp * times
            acc[3 * side + 2] += t.fn * times

    def merge(self, other: _TypeSums) -> None:
        for key, label in other.labels.items():
            if key not in self.labels or label < self.labels[key]:
                self.labels[key] = label
        for key, sums in other.sums.items():
            acc = self.sums.setdefault(key, [0] * 6)
            for i, v in enumerate(sums):
                acc[i] += v

    def comparisons(self, kind: Literal["entity", "relationship"]) -> tuple[TypeComparison, ...]:
        rows = [
            TypeComparison(kind, self.labels[k], Counts(*v[:3]), Counts(*v[3:]))
            for k, v in self.sums.items()
        ]
        return tuple(sorted(rows, key=lambda t: (t.label, t.label.casefold())))


class PairedAccumulator:
    """Paired items folded one at a time: keeps two integer count rows per item and per-type
    sums, never the :class:`ItemScore` objects (a 10,000-item comparison holds ~3.5 MB)."""

    def __init__(self) -> None:
        self.rows: array[int] = array("q")
        self.n = 0
        self.entity_types = _TypeSums()
        self.relationship_types = _TypeSums()
        # per-type counts of stored items not summed yet: ids -> [(A ents, A rels, B ents,
        # B rels), how many items had them]
        self._typed: dict[tuple[int, ...], list[Any]] = {}
        self._canonical: tuple[int, NDArray[np.int64]] | None = None  # (n, sorted rows)

    def add(
        self,
        a: ItemScore,
        b: ItemScore,
        *,
        a_schema_failure: bool = False,
        b_schema_failure: bool = False,
    ) -> None:
        """One item as scored in run A and in run B (the same item: same gold)."""
        self.rows.extend(item_row(a, schema_failure=a_schema_failure))
        self.rows.extend(item_row(b, schema_failure=b_schema_failure))
        self.n += 1
        for side, s in ((0, a), (1, b)):
            self.entity_types.add(side, s.entity_types)
            self.relationship_types.add(side, s.relationship_types)

    def add_counts(self, a: StoredCounts, b: StoredCounts) -> None:
        """One item's stored counts in run A and in run B: the same as ``add`` of the scores
        they were made from. Per-type counts are tallied by value and summed once per distinct
        value (``_flush``): items repeat each other's per-type counts a lot."""
        self.rows.extend(a.row)
        self.rows.extend(b.row)
        self.n += 1
        groups = (a.entity_types, a.relationship_types, b.entity_types, b.relationship_types)
        # by identity (decode_counts' memo shares the tuples of repeated counts): hashing the
        # values would cost more than adding them; the entry holds the tuples, so ids stay valid
        tally = self._typed.setdefault(tuple(map(id, groups)), [groups, 0])
        tally[1] += 1

    def extend(self, other: PairedAccumulator) -> None:
        """Add another accumulator's items after this one's (a report built in two
        processes): the same rows and sums as had they been added here."""
        other._flush()
        self.rows.extend(other.rows)
        self.n += other.n
        self.entity_types.merge(other.entity_types)
        self.relationship_types.merge(other.relationship_types)

    def _flush(self) -> None:
        for (ents_a, rels_a, ents_b, rels_b), times in self._typed.values():
            self.entity_types.add(0, ents_a, times)
            self.relationship_types.add(0, rels_a, times)
            self.entity_types.add(1, ents_b, times)
            self.relationship_types.add(1, rels_b, times)
        self._typed.clear()

    def matrices(self, *, canonical: bool = False) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(A rows, B rows), each n × :data:`WIDTH`, in the order the items came, or with
        ``canonical`` in the order the bootstrap and the power analysis put them in (lexsorted
        (A, B) rows: a sorted copy made once here, or read-only views of the rows when
        :meth:`sort_rows` put them in that order; their own sort then finds them in order).
        Views hold the rows' buffer: let go of them before adding rows."""
        both = np.frombuffer(self.rows, dtype=np.int64).reshape(self.n, 2 * WIDTH)
        if canonical and self.n:
            if self._canonical is None or self._canonical[0] != self.n:
                order = np.lexsort(both.T[::-1])
                if not np.any(order[1:] < order[:-1]):  # already (:meth:`sort_rows`): a view
                    both.flags.writeable = False  # (not kept: rows may be added later)
                    return both[:, :WIDTH], both[:, WIDTH:]
                self._canonical = (self.n, both[order])
            both = self._canonical[1]
        return both[:, :WIDTH], both[:, WIDTH:]

    def sort_rows(self) -> None:
        """Put the rows in the canonical order, in place: for a caller that only compares
        (the report), so ``matrices(canonical=True)`` needs no sorted copy beside them (40 MB
        at 100,000 items). The figures do not depend on the order; ``matrices()`` then gives
        the rows in this order, no longer in the order the items came."""
        if self.n < 2:
            return
        both = np.frombuffer(self.rows, dtype=np.int64).reshape(self.n, 2 * WIDTH)
        order = np.lexsort(both.T[::-1])
        if np.any(order[1:] < order[:-1]):
            both[:] = both[order]
        del both  # the buffer is not held: rows can still be added
        self._canonical = None

    def compare(
        self,
        *,
        resamples: int = 10_000,
        seed: int = 42,
        confidence: float = 0.95,
        method: CiMethod = "expanded",
        correction: Correction = "holm",
        min_items: int = MIN_ITEMS,
    ) -> PairedComparison:
        a, b = self.matrices(canonical=True)
        self._flush()
        return paired_compare_counts(
            a,
            b,
            resamples=resamples,
            seed=seed,
            confidence=confidence,
            method=method,
            correction=correction,
            min_items=min_items,
            entity_types=self.entity_types.comparisons("entity"),
            relationship_types=self.relationship_types.comparisons("relationship"),
        )


def _scalar(values: NDArray[np.float64]) -> float | None:
    v = float(values[0])
    return None if np.isnan(v) else v


def _unique_columns(
    matrix: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    """The distinct non-zero columns (sums of equal columns are equal; of zero columns 0) and,
    per original column, its index among them (-1 for an all-zero column): fewer columns to
    resample, the same sums."""
    nonzero = np.flatnonzero(matrix.any(axis=0))
    index = np.full(matrix.shape[1], -1, dtype=np.intp)
    if nonzero.size == 0:
        return matrix[:, :0], index
    # np.unique(axis=1)'s result without its sort of 100,000-field records: equal columns
    # found by their bytes, the distinct ones put in its (lexicographic) order
    first: dict[bytes, int] = {}
    for j in nonzero:
        first.setdefault(np.ascontiguousarray(matrix[:, j]).tobytes(), int(j))
    order = sorted(first.values(), key=cmp_to_key(partial(_column_order, matrix)))
    rank = {j: r for r, j in enumerate(order)}
    for j in nonzero:
        index[j] = rank[first[np.ascontiguousarray(matrix[:, j]).tobytes()]]
    return matrix[:, order], index


def _column_order(matrix: NDArray[np.int64], i: int, j: int) -> int:
    """-1, 0, 1: column i before, equal to, after column j (lexicographic, as np.unique)."""
    differ = np.flatnonzero(matrix[:, i] != matrix[:, j])
    if differ.size == 0:
        return 0
    k = differ[0]
    return -1 if matrix[k, i] < matrix[k, j] else 1


def paired_sums(
    a: NDArray[np.int64], b: NDArray[np.int64], *, resamples: int, seed: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(resamples × WIDTH) column sums of A's and of B's rows on the SAME bootstrap draws of
    item indices (rows are item-aligned: row i of A and of B are the same item)."""
    both = np.concatenate([a, b], axis=1)
    order = np.lexsort(both.T[::-1])  # canonical row order: which columns are equal
    if np.any(order[1:] < order[:-1]):  # rows already in it (``matrices(canonical=True)``)
        both = both[order]  # are not copied again (40 MB at 100,000 items)
    unique, index = _unique_columns(both)
    if unique.shape[1]:
        sums = resampled_sums(unique, resamples=resamples, seed=seed)
    else:
        sums = np.zeros((resamples, 0))
    full = np.zeros((resamples, both.shape[1]))
    kept = index >= 0
    full[:, kept] = sums[:, index[kept]]
    return full[:, :WIDTH], full[:, WIDTH:]


def paired_compare_counts(
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    *,
    resamples: int = 10_000,
    seed: int = 42,
    confidence: float = 0.95,
    entity_types: tuple[TypeComparison, ...] = (),
    relationship_types: tuple[TypeComparison, ...] = (),
    method: CiMethod = "expanded",
    correction: Correction = "holm",
    min_items: int = MIN_ITEMS,
) -> PairedComparison:
    """The paired comparison on count matrices (n × :data:`WIDTH`, row i of both = item i):
    the entry point for callers that keep their own rows (e.g. a config matrix).

    ``method``: how bootstrap quantiles make the CI of Δ (:mod:`.intervals`). ``correction``:
    how the p-values of every metric and McNemar's are adjusted as one family
    (:mod:`.multiple`). Fewer than ``min_items`` paired items, or a CI of Δ of zero width
    resting on fewer than ``min_items`` changed items, make a metric's verdict
    ``insufficient`` (:mod:`.verdict_rules`)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != WIDTH:
        raise ValueError(f"count matrices must both be n × {WIDTH}, got {a.shape} and {b.shape}")
    if resamples < 0:
        raise ValueError(f"resamples must be >= 0, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = a.shape[0]
    point_a = metric_arrays(a.sum(axis=0, dtype=np.int64)[None, :].astype(np.float64), n)
    point_b = metric_arrays(b.sum(axis=0, dtype=np.int64)[None, :].astype(np.float64), n)
    check_int("min_items", min_items, minimum=1)
    levels = list(quantile_levels(a.shape[0], confidence, method))
    deltas: dict[str, NDArray[np.float64]] = {}
    if n and resamples:
        sums_a, sums_b = paired_sums(a, b, resamples=resamples, seed=seed)
        boot_a, boot_b = metric_arrays(sums_a, n), metric_arrays(sums_b, n)
        deltas = {name: boot_b[name] - boot_a[name] for name in METRICS}
    per_item: list[dict[str, NDArray[np.float64]]] = []

    def changed(name: str) -> int:
        """Items whose own value of the metric differs between A and B (NaN: undefined)."""
        if not per_item:
            per_item.extend(metric_arrays(x.astype(np.float64), 1) for x in (a, b))
        va, vb = per_item[0][name], per_item[1][name]
        return int(np.count_nonzero((va != vb) & ~(np.isnan(va) & np.isnan(vb))))

    metrics = []
    for name in METRICS:
        va, vb = _scalar(point_a[name]), _scalar(point_b[name])
        delta = None if va is None or vb is None else vb - va
        lo = hi = p = None
        defined = 0
        if name in deltas and delta is not None:
            d = deltas[name]
            d = d[~np.isnan(d)]
            defined = int(d.size)
            if defined:
                lo, hi = (float(v) for v in np.quantile(d, levels))
                p = bootstrap_p_value(d, delta, n, method)
        metrics.append(
            MetricComparison(
                name=name,
                a=va,
                b=vb,
                delta=delta,
                ci_low=lo,
                ci_high=hi,
                lower_is_better=name in LOWER_IS_BETTER,
                resamples_defined=defined,
                p_value=p,
                alpha=1.0 - confidence,
                insufficient=insufficient(n, min_items, delta, lo, hi, partial(changed, name)),
            )
        )
    right_a = a[:, COLUMN_INDEX["right"]].astype(bool)
    right_b = b[:, COLUMN_INDEX["right"]].astype(bool)
    mcnemar = mcnemar_exact(
        int((~right_a & right_b).sum()),
        int((right_a & ~right_b).sum()),
        both_right=int((right_a & right_b).sum()),
        both_wrong=int((~right_a & ~right_b).sum()),
    )
    metrics, mcnemar = corrected(metrics, mcnemar, correction)
    return PairedComparison(
        items=n,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
        metrics=tuple(metrics),
        mcnemar=mcnemar,
        entity_types=entity_types,
        relationship_types=relationship_types,
        ci_method=method,
        correction=correction,
        min_items=min_items,
    )


def check_tolerances(tolerances: Mapping[str, float]) -> None:
    """Refuse unknown metric names and negative or non-finite tolerances (before any work)."""
    for name, tol in tolerances.items():
        if name not in METRICS:
            raise InvalidValue(
                "fail_on_regression", f"unknown metric {name!r}; known: {', '.join(METRICS)}"
            )
        if not (isinstance(tol, (int, float)) and np.isfinite(tol) and 0 <= tol <= 1):
            raise InvalidValue(
                "fail_on_regression", f"{name}: tolerance must be between 0 and 1, got {tol}"
            )


@dataclass(frozen=True, slots=True)
class GateFailure:
    """A metric whose CI of Δ reaches a drop larger than its tolerance."""

    metric: str
    tolerance: float
    bound: float | None  # the bad-side CI bound of Δ, signed as Δ (None: undefined)
    lower_is_better: bool = False
    insufficient: str | None = None  # too little evidence for any verdict: why

    def describe(self) -> str:
        if self.insufficient is not None:
            return f"{self.metric}: insufficient evidence ({self.insufficient})"
        if self.bound is None:
            return f"{self.metric}: Δ has no CI (undefined in a run), a regression is not ruled out"
        if self.lower_is_better:
            return (
                f"{self.metric} (lower is better): CI high bound of Δ {self.bound:+.4f} > "
                f"+{self.tolerance:g}"
            )
        return f"{self.metric}: CI low bound of Δ {self.bound:+.4f} < −{self.tolerance:g}"


def regression_gate(
    comparison: PairedComparison, tolerances: Mapping[str, float]
) -> list[GateFailure]:
    """The metrics that fail the gate: the CI bound of Δ on the bad side (low bound; high
    bound for lower-is-better metrics, mirrored) lies beyond −tolerance. A metric with no CI
    (undefined in either run) fails too: nothing rules a regression out, and so does a metric
    whose evidence is insufficient (too few paired items, a zero-width CI on few items).

    The gate passes only when EVERY gated metric's CI rules its regression out: an
    intersection–union test, whose chance of passing while some metric did regress is at
    most α without any multiplicity correction (Berger 1982), so its CIs are not widened."""
    check_tolerances(tolerances)
    failures = []
    for name in sorted(tolerances):
        tol = float(tolerances[name])
        m = comparison.metric(name)
        if m.insufficient is not None and m.ci_low is not None:
            failures.append(GateFailure(name, tol, None, m.lower_is_better, m.insufficient))
            continue
        worst = m.worst_case()
        if worst is None or worst < -tol:
            bound = None if worst is None else (-worst if m.lower_is_better else worst)
            failures.append(GateFailure(name, tol, bound, m.lower_is_better))
    return failures
