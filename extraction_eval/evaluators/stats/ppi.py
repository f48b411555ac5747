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
−μ_num/μ_den²): a normal interval R̂ ± z · √Var, clipped to [0, 1]. It is valid whatever the
model gold's quality, **provided the verified items are a uniform random sample of the
dataset** (a sample chosen because the items looked hard, or easy, biases it).

Power tuning (PPI++, Angelopoulos, Duchi, Zrnic 2023): with poor model gold the rectifier is
noisy and plain PPI can be wider than the verified items alone. The estimate used is
μ̂(λ) = mean_verified(f) + λ · (mean_unverified(f̂) − mean_verified(f̂)), λ = 1 being plain
PPI and λ = 0 the verified items alone, with λ chosen in [0, 1] to minimise the delta-method
variance: on the linearised ratio h = gᵀf, λ* = Cov(h(f), h(f̂)) / ((1 + n / N_u) ·
Var(h(f̂))). Then Σ = Cov_verified(f − λ f̂) / n + λ² Cov_unverified(f̂) / N_u.

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
    lam: float | None = None  # PPI++'s λ (1: plain PPI; 0: the verified items alone)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "low": self.low, "high": self.high}
        if self.lam is not None:
            out["lambda"] = self.lam
        return out


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


def _grad(mu: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray([1.0 / mu[1], -mu[0] / mu[1] ** 2])


def _ratio(
    mu: NDArray[np.float64], sigma: NDArray[np.float64], z: float, lam: float | None = None
) -> Estimate:
    if mu[1] <= 0:
        return Estimate(None, lam=lam)
    value = float(mu[0] / mu[1])
    g = _grad(mu)
    var = float(g @ sigma @ g)
    half = z * math.sqrt(max(var, 0.0))
    return Estimate(value, max(0.0, value - half), min(1.0, value + half), lam)


def tuned_lambda(
    lab_h: NDArray[np.float64], lab_m: NDArray[np.float64], unlab: NDArray[np.float64]
) -> float:
    """λ* in [0, 1] minimising the delta-method variance of the ratio (PPI++)."""
    n, nu = lab_h.shape[0], unlab.shape[0]
    mu = lab_h.mean(axis=0)
    if n < 2 or nu < 1 or mu[1] <= 0:
        return 1.0
    g = _grad(mu)
    h, hm = lab_h @ g, np.concatenate([lab_m, unlab]) @ g
    var = float(np.var(hm, ddof=1))
    if var <= 0:
        return 1.0
    cov = float(np.cov(h, lab_m @ g, ddof=1)[0, 1])
    return float(np.clip(cov / ((1 + n / nu) * var), 0.0, 1.0))


def ppi_ratio(
    model: Pair,
    human: Pair,
    verified: NDArray[np.bool_],
    *,
    confidence: float = 0.95,
    lam: float | None = None,
) -> tuple[Estimate, Estimate, Estimate]:
    """(PPI, naive, classical) estimates of Σ num / Σ den. ``model``: per item (num, den)
    against model gold, all N items; ``human``: the same against human gold (read only where
    ``verified``). ``lam``: PPI++'s λ (None: tuned; 1: plain PPI)."""
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
    lam = tuned_lambda(lab_h, lab_m, unlab) if lam is None else lam
    rect = lab_h - lam * lab_m
    mu = rect.mean(axis=0) + lam * unlab.mean(axis=0)
    sigma = _cov(rect) / n + lam**2 * _cov(unlab) / unlab.shape[0]
    return _ratio(mu, sigma, z, lam), naive, classical


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
    lam: float | None = None,
) -> list[PPIResult]:
    """PPI P/R/F1 from per-item (tp, fp, fn) against model gold and against human gold (rows
    of unverified items in ``human_counts`` are ignored)."""
    n = int(np.asarray(verified, dtype=bool).sum())
    out = []
    for metric in ("precision", "recall", "f1"):
        model = parts(metric, *np.asarray(model_counts).T)
        human = parts(metric, *np.asarray(human_counts).T)
        ppi, naive, classical = ppi_ratio(model, human, verified, confidence=confidence, lam=lam)
        out.append(PPIResult(f"{prefix}_{metric}", ppi, naive, classical, n, len(verified) - n))
    return out
