"""Prediction-powered inference: the estimator and its interval by hand."""

from __future__ import annotations

import numpy as np
import pytest

from extraction_eval.evaluators.ppi import ppi_prf, ppi_ratio

Z = 1.959964  # z(0.975)


def test_ppi_ratio_by_hand() -> None:
    # 4 items, den = 1 each; model-gold num (1, 1, 0, 1); items 0, 1 verified, human num (0, 1)
    # unverified mean f̂ = (0.5, 1); rectifier f − f̂ on 0, 1: (−1, 0), (0, 0) → mean (−0.5, 0)
    # μ̂ = (0, 1): R̂ = 0. Σ = Cov(unverified)/2 + Cov(rectifier)/2 = diag(0.25 + 0.25, 0)
    # g = (1, 0): Var = 0.5, half width = z √0.5
    model = (np.asarray([1.0, 1, 0, 1]), np.ones(4))
    human = (np.asarray([0.0, 1, 0, 0]), np.ones(4))
    verified = np.asarray([True, True, False, False])
    ppi, naive, classical = ppi_ratio(model, human, verified)
    assert ppi.value == 0.0
    assert (ppi.low, ppi.high) == pytest.approx((-Z * 0.5**0.5, Z * 0.5**0.5), abs=1e-6)
    assert naive.value == 0.75 and naive.low is None  # model gold, uncorrected
    # classical: human num (0, 1) on the 2 verified: 0.5 ± z √(0.5 / 2)
    assert classical.value == 0.5
    assert (classical.low, classical.high) == pytest.approx(
        (0.5 - Z * 0.5, 0.5 + Z * 0.5), abs=1e-6
    )


def test_exact_model_gold_needs_no_correction_and_narrows_the_interval() -> None:
    rng = np.random.default_rng(1)
    tp = rng.integers(0, 4, 200)
    fp = rng.integers(0, 2, 200)
    fn = rng.integers(0, 2, 200)
    counts = np.stack([tp, fp, fn], axis=1)
    verified = np.zeros(200, dtype=bool)
    verified[:20] = True
    results = {r.metric: r for r in ppi_prf(counts, counts, verified, prefix="entity")}
    f = results["entity_f1"]
    unverified = counts[20:].sum(axis=0)
    assert f.ppi.value == pytest.approx(
        2 * unverified[0] / (2 * unverified[0] + unverified[1] + unverified[2])
    )
    assert f.n_verified == 20 and f.n_unverified == 180
    width = f.ppi.high - f.ppi.low  # type: ignore[operator]
    assert width < f.classical.high - f.classical.low  # type: ignore[operator]


def test_nothing_verified_or_everything_verified() -> None:
    model = (np.asarray([1.0, 0]), np.ones(2))
    ppi, naive, classical = ppi_ratio(model, model, np.asarray([False, False]))
    assert ppi.value is None and classical.value is None and naive.value == 0.5
    ppi, _, classical = ppi_ratio(model, model, np.asarray([True, True]))
    assert ppi == classical
