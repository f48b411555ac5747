"""Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan, Zrnic 2023,
*Science* 382:669) for micro P/R/F1 when the gold was voted by models and a person checked a
random subset of the items.

Scored against model gold on all N items, a run's metric is biased by the gold's own errors;
scored against the n human-verified items only, it is unbiased but wide. PPI uses both: each
micro metric is a ratio of means R = E[num] / E[den] (precision tp / (tp + fp), recall
tp / (tp + fn), F1 2tp / (2tp + fp + fn)); for f = (num, den) per item

    μ̂ = mean over the unverified items of f(model gold)
        + mean over the verified items of (f(human gold) − f(model gold))     (the rectifier)

and R̂ = μ̂_num / μ̂_den. Its covariance is Σ = Cov_unverified(f̂) / N_u + Cov_verified(f − f̂) / n
(independent sets), and the delta method gives Var(R̂) = gᵀ Σ g with g = (1/μ_den,
−μ_num/μ_den²): a normal interval R̂ ± z · √Var. The better the model gold, the smaller the
rectifier's variance and the narrower the interval; it is valid whatever the model gold's
quality, **provided the verified items are a uniform random sample of the dataset** (a
sample chosen because the items looked hard, or easy, biases it).

Also returned: the naive estimate (model gold on all items, no correction) and the classical
one (human gold on the verified items only, same delta-method interval), so the gain shows.
Pure, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

Pair = tuple[NDArray[np.float64], NDArray[np.float64]]


@dataclass(frozen=True)
class Estimate:
    value: float | None
    low: float | None = None
    high: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class PPIResult:
    """One metric three ways: PPI, naive (model gold everywhere), classical (human only)."""

    metric: str
    ppi: Estimate
    naive: Estimate
    classical: Estimate
    n_verified: int
    n_unverified: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ppi": self.ppi.to_json(),
            "naive": self.naive.to_json(),
            "classical": self.classical.to_json(),
            "verified": self.n_verified,
            "unverified": self.n_unverified,
        }


def _z(confidence: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(0.5 + confidence / 2))


def _cov(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """2 × 2 sample covariance (ddof 1) of the rows of x (n × 2); zeros below 2 rows."""
    if x.shape[0] < 2:
        return np.zeros((2, 2))
    return np.atleast_2d(np.cov(x, rowvar=False, ddof=1))


def _ratio(mu: NDArray[np.float64], sigma: NDArray[np.float64], z: float) -> Estimate:
    if mu[1] <= 0:
        return Estimate(None)
    value = float(mu[0] / mu[1])
    g = np.asarray([1.0 / mu[1], -mu[0] / mu[1] ** 2])
    var = float(g @ sigma @ g)
    half = z * math.sqrt(max(var, 0.0))
    return Estimate(value, value - half, value + half)


def ppi_ratio(
    model: Pair, human: Pair, verified: NDArray[np.bool_], *, confidence: float = 0.95
) -> tuple[Estimate, Estimate, Estimate]:
    """(PPI, naive, classical) estimates of Σ num / Σ den. ``model``: per item (num, den)
    against model gold, all N items; ``human``: the same against human gold (read only where
    ``verified``)."""
    z = _z(confidence)
    fm = np.stack([np.asarray(model[0], float), np.asarray(model[1], float)], axis=1)
    fh = np.stack([np.asarray(human[0], float), np.asarray(human[1], float)], axis=1)
    verified = np.asarray(verified, dtype=bool)
    n = int(verified.sum())
    unlab, lab_m, lab_h = fm[~verified], fm[verified], fh[verified]
    naive_mu = fm.mean(axis=0)
    naive = Estimate(float(naive_mu[0] / naive_mu[1])) if naive_mu[1] > 0 else Estimate(None)
    if n == 0:
        return Estimate(None), naive, Estimate(None)
    classical = _ratio(lab_h.mean(axis=0), _cov(lab_h) / n, z)
    if unlab.shape[0] == 0:  # everything verified: nothing to predict
        return classical, naive, classical
    rect = lab_h - lab_m
    mu = unlab.mean(axis=0) + rect.mean(axis=0)
    sigma = _cov(unlab) / unlab.shape[0] + _cov(rect) / n
    return _ratio(mu, sigma, z), naive, classical


# metric -> per-item (num, den) from (tp, fp, fn)
def parts(metric: str, tp: NDArray[Any], fp: NDArray[Any], fn: NDArray[Any]) -> Pair:
    tp, fp, fn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, fn))
    if metric == "precision":
        return tp, tp + fp
    if metric == "recall":
        return tp, tp + fn
    if metric == "f1":
        return 2 * tp, 2 * tp + fp + fn
    raise ValueError(f"unknown metric {metric!r}")


def ppi_prf(
    model_counts: NDArray[np.int64],
    human_counts: NDArray[np.int64],
    verified: NDArray[np.bool_],
    *,
    prefix: str,
    confidence: float = 0.95,
) -> list[PPIResult]:
    """PPI P/R/F1 from per-item (tp, fp, fn) against model gold and against human gold (rows
    of unverified items in ``human_counts`` are ignored)."""
    n = int(np.asarray(verified, dtype=bool).sum())
    out = []
    for metric in ("precision", "recall", "f1"):
        model = parts(metric, *np.asarray(model_counts).T)
        human = parts(metric, *np.asarray(human_counts).T)
        ppi, naive, classical = ppi_ratio(model, human, verified, confidence=confidence)
        out.append(PPIResult(f"{prefix}_{metric}", ppi, naive, classical, n, len(verified) - n))
    return out
