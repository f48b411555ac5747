"""Prediction-powered inference: the estimator and its interval by hand."""

from __future__ import annotations

import numpy as np
import pytest

from extraction_eval.evaluators.stats.ppi import ppi_prf, ppi_ratio

Z = 1.959964  # z(0.975)


def test_plain_ppi_by_hand() -> None:
    # 24 items, den 1 each. Unverified (12): model-gold num (1, 1, 1, 0) × 3: mean 0.75,
    # var (ddof 1) 12 · 0.75 · 0.25 / 11 = 0.204545. Verified (12): model num 1 everywhere,
    # human (1, 1, 1, 0) × 3: rectifier f − f̂ = (0, 0, 0, −1) × 3, mean −0.25, var 0.204545.
    # λ = 1: μ̂ = 0.75 − 0.25 = 0.5; Var = 0.204545 / 12 · 2 = 0.034091; half = z · 0.184637
    unverified = [1.0, 1, 1, 0] * 3
    model = (np.asarray([1.0] * 12 + unverified), np.ones(24))
    human = (np.asarray([1.0, 1, 1, 0] * 3 + [0.0] * 12), np.ones(24))
    verified = np.asarray([True] * 12 + [False] * 12)
    ppi, naive, classical = ppi_ratio(model, human, verified, lam=1.0)
    assert ppi.value == pytest.approx(0.5)
    half = Z * 0.184637
    assert (ppi.low, ppi.high) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-5)
    assert naive.value == pytest.approx(21 / 24) and naive.low is None  # model gold, as is
    # classical: the 12 verified alone: 0.75 ± z √(0.204545 / 12), clipped at 1
    assert classical.value == pytest.approx(0.75)
    assert classical.low == pytest.approx(0.75 - Z * 0.130558, abs=1e-5)
    assert classical.high == 1.0
    # tuned (PPI++): the model gold is constant on the verified items, so it says nothing
    # about the human gold there: λ* = 0, the verified items alone
    tuned, _, _ = ppi_ratio(model, human, verified)
    assert tuned.lam == 0.0 and tuned.value == pytest.approx(0.75)


def test_exact_model_gold_needs_no_correction_and_narrows_the_interval() -> None:
    rng = np.random.default_rng(1)
    tp = rng.integers(0, 4, 200)
    fp = rng.integers(0, 2, 200)
    fn = rng.integers(0, 2, 200)
    counts = np.stack([tp, fp, fn], axis=1)
    verified = np.zeros(200, dtype=bool)
    verified[:20] = True
    results = {r.metric: r for r in ppi_prf(counts, counts, verified, prefix="entity", lam=1.0)}
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


def test_tuning_never_widens_beyond_the_verified_items_alone() -> None:
    # noisy model gold, uncorrelated with the human gold: plain PPI is wider than the
    # verified items alone; the tuned λ falls back towards them
    rng = np.random.default_rng(4)
    n_all = 400
    human_num = rng.integers(0, 2, n_all).astype(float)
    model_num = rng.integers(0, 2, n_all).astype(float)
    verified = np.zeros(n_all, dtype=bool)
    verified[:60] = True
    den = np.ones(n_all)
    plain, _, classical = ppi_ratio((model_num, den), (human_num, den), verified, lam=1.0)
    tuned, _, _ = ppi_ratio((model_num, den), (human_num, den), verified)
    width = lambda e: e.high - e.low  # noqa: E731
    assert width(plain) > width(classical)
    assert tuned.lam is not None and tuned.lam < 0.5
    assert width(tuned) <= width(classical) * 1.01
