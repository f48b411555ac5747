"""How many items a comparison needs: the minimum detectable effect (MDE) at a given power for
the current N, and the N needed to detect a given Δ, for a paired comparison of two runs.

A micro metric is a ratio of sums over items, R = Σ numᵢ / Σ denᵢ (F1 = 2tp / (2tp + fp +
fn), precision = tp / (tp + fp), recall = tp / (tp + fn), error rate = failed / 1). Its
sampling variance over items is that of the mean of the *influence values* (the delta method
for a ratio estimator)

    ψᵢ = (numᵢ − R · denᵢ) / mean(den),    Var(R̂) ≈ Var(ψ) / n.

For Δ = R_B − R_A on the same items, Var(Δ̂) ≈ Var(ψᴮ − ψᴬ) / n: measured when both runs are
known, or, from one run, 2 · Var(ψ) · (1 − ρ) / n with an assumed between-run correlation ρ
of the items' influence values (both runs taken to vary alike). With a two-sided test at
level α and power 1 − β (normal approximation):

    MDE = (z₁₋α/₂ + z₁₋β) · SE(Δ̂),    n = ⌈((z₁₋α/₂ + z₁₋β) · sd(ψᴮ − ψᴬ) / δ)²⌉,
    power(δ) = Φ(δ/SE − z₁₋α/₂) + Φ(−δ/SE − z₁₋α/₂).

Pure; ``scipy.special`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

# metric -> (numerator columns with weights, denominator columns with weights), in the
# paired count rows' column names (evaluators/stats/paired_delta.py COLUMNS)
_PRF = ("entity", "entity_typed", "relationship")
RATIOS: dict[str, tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]] = {}
for _g in _PRF:
    _tp, _fp, _fn = f"{_g}_tp", f"{_g}_fp", f"{_g}_fn"
    RATIOS[f"{_g}_precision"] = (((_tp, 1),), ((_tp, 1), (_fp, 1)))
    RATIOS[f"{_g}_recall"] = (((_tp, 1),), ((_tp, 1), (_fn, 1)))
    RATIOS[f"{_g}_f1"] = (((_tp, 2),), ((_tp, 2), (_fp, 1), (_fn, 1)))
RATIOS["error_rate"] = ((("failed", 1),), ())  # denominator 1 per item
POWER_METRICS: tuple[str, ...] = tuple(RATIOS)


def _z(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


def _phi(x: float) -> float:
    from scipy.special import ndtr

    return float(ndtr(x))


def ratio_parts(
    rows: NDArray[np.int64], columns: tuple[str, ...], metric: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per item, the metric's numerator and denominator from count rows (n × columns)."""
    if metric not in RATIOS:
        raise ValueError(f"no power analysis for {metric!r}; known: {', '.join(POWER_METRICS)}")
    index = {c: i for i, c in enumerate(columns)}
    num_cols, den_cols = RATIOS[metric]
    rows = np.asarray(rows, dtype=np.float64)
    num = sum((w * rows[:, index[c]] for c, w in num_cols), np.zeros(rows.shape[0]))
    den = (
        sum((w * rows[:, index[c]] for c, w in den_cols), np.zeros(rows.shape[0]))
        if den_cols
        else np.ones(rows.shape[0])
    )
    return np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)


def influence(num: NDArray[np.float64], den: NDArray[np.float64]) -> NDArray[np.float64]:
    """ψᵢ = (numᵢ − R · denᵢ) / mean(den), R = Σ num / Σ den (all 0 when Σ den is 0)."""
    total = float(np.sum(den))
    if total == 0:
        return np.zeros(len(num))
    r = float(np.sum(num)) / total
    return np.asarray((num - r * den) / (total / len(den)), dtype=np.float64)


def mde(se: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest |Δ| a two-sided test at level ``alpha`` detects with ``power``."""
    return (_z(1 - alpha / 2) + _z(power)) * se


def n_needed(sd_item: float, delta: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired items needed to detect |Δ| = ``delta``, per-item sd of ψᴮ − ψᴬ ``sd_item``."""
    if delta <= 0:
        raise ValueError(f"delta must be above 0, got {delta}")
    return max(2, math.ceil(((_z(1 - alpha / 2) + _z(power)) * sd_item / delta) ** 2))


def power_at(delta: float, se: float, *, alpha: float = 0.05) -> float:
    """The chance a two-sided test at level ``alpha`` detects a true |Δ| = ``delta``."""
    if se <= 0:
        return 1.0 if delta else alpha
    z = _z(1 - alpha / 2)
    return _phi(abs(delta) / se - z) + _phi(-abs(delta) / se - z)


@dataclass(frozen=True)
class PowerAnalysis:
    """One metric's power figures for a paired comparison of ``n`` items."""

    metric: str
    n: int
    value: float | None  # the metric in the baseline run
    sd_item: float  # per-item sd of ψᴮ − ψᴬ (measured, or from one run and ρ)
    correlation: float  # ρ between the runs' influence values
    correlation_source: str  # "assumed" or "measured"
    alpha: float
    power: float
    delta: float | None = None

    @property
    def se(self) -> float:
        return self.sd_item / math.sqrt(self.n) if self.n else math.inf

    @property
    def spread(self) -> bool:
        """Whether any spread was seen: with none (every item the same), no figure here is
        meaningful (an MDE of 0 would promise what two identical items cannot)."""
        return self.n > 1 and self.sd_item > 0

    @property
    def mde(self) -> float | None:
        return mde(self.se, alpha=self.alpha, power=self.power) if self.spread else None

    @property
    def n_needed(self) -> int | None:
        if self.delta is None or not self.spread:
            return None
        return n_needed(self.sd_item, self.delta, alpha=self.alpha, power=self.power)

    @property
    def power_at_delta(self) -> float | None:
        if self.delta is None or not self.spread:
            return None
        return power_at(self.delta, self.se, alpha=self.alpha)

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "n": self.n,
            "value": self.value,
            "sd_item": self.sd_item,
            "correlation": self.correlation,
            "correlation_source": self.correlation_source,
            "alpha": self.alpha,
            "power": self.power,
            "mde": self.mde,
            "delta": self.delta,
            "n_needed": self.n_needed,
            "power_at_delta": self.power_at_delta,
        }


def analyse(
    a: NDArray[np.int64],
    b: NDArray[np.int64] | None,
    columns: tuple[str, ...],
    metric: str,
    *,
    correlation: float = 0.5,
    delta: float | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PowerAnalysis:
    """Power figures for ``metric`` from run A's count rows, and B's on the same items (then
    the correlation and the sd of the difference are measured) or None (then ``correlation``
    is assumed and B is taken to vary as A does)."""
    if not -1.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must be between -1 and 1, got {correlation}")
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError("alpha and power must be between 0 and 1")
    # rows in a canonical order, so the floating-point sums (and the bytes of a report) do not
    # depend on the order the items came in
    a = np.asarray(a, dtype=np.int64)
    width = a.shape[1]
    both = a if b is None else np.concatenate([a, np.asarray(b, dtype=np.int64)], axis=1)
    if both.size:
        order = np.lexsort(both.T[::-1])
        if np.any(order[1:] < order[:-1]):  # rows already in it are not copied again
            both = both[order]
    a = both[:, :width]
    b = None if b is None else both[:, width:]
    num_a, den_a = ratio_parts(a, columns, metric)
    n = len(num_a)
    value = float(num_a.sum() / den_a.sum()) if den_a.sum() else None
    psi_a = influence(num_a, den_a)
    if b is None:
        var = float(np.var(psi_a, ddof=1)) if n > 1 else 0.0
        sd = math.sqrt(max(0.0, 2.0 * var * (1.0 - correlation)))
        rho, source = correlation, "assumed"
    else:
        psi_b = influence(*ratio_parts(b, columns, metric))
        sd = float(np.std(psi_b - psi_a, ddof=1)) if n > 1 else 0.0
        spread = bool(np.std(psi_a) > 0 and np.std(psi_b) > 0)
        rho = float(np.corrcoef(psi_a, psi_b)[0, 1]) if spread else 1.0
        source = "measured"
    return PowerAnalysis(metric, n, value, sd, rho, source, alpha, power, delta)
