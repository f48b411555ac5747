"""Power of a paired comparison: influence values, MDE, N needed, power at Δ, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from extraction_eval.evaluators.stats.power import (
    analyse,
    influence,
    mde,
    n_needed,
    power_at,
    ratio_parts,
)

Z975, Z80 = 1.959964, 0.841621  # normal table: z(0.975), z(0.8)


def test_influence_of_a_ratio_of_sums_by_hand() -> None:
    # R = 3 / 6 = 0.5, mean(den) = 2: ψ = ((1 − 1)/2, (0 − 1)/2, (2 − 1)/2)
    psi = influence(np.asarray([1.0, 0.0, 2.0]), np.asarray([2.0, 2.0, 2.0]))
    assert psi.tolist() == [0.0, -0.5, 0.5]
    assert influence(np.zeros(2), np.zeros(2)).tolist() == [0.0, 0.0]


def test_mde_n_needed_and_power_by_hand() -> None:
    assert mde(0.01) == pytest.approx((Z975 + Z80) * 0.01, abs=1e-7)
    # ((1.959964 + 0.841621) × 0.2 / 0.02)² = 28.01585² = 784.888 → 785
    assert n_needed(0.2, 0.02) == 785
    # at Δ = MDE the power is 80 % (plus the far tail's Φ(−4.76) ≈ 1e-6)
    assert power_at(mde(0.01), 0.01) == pytest.approx(0.8, abs=1e-5)
    assert power_at(0.0, 0.01) == pytest.approx(0.05)  # no effect: the test's level
    with pytest.raises(ValueError, match="delta"):
        n_needed(0.2, 0.0)


def test_f1_parts_from_count_rows() -> None:
    columns = ("entity_tp", "entity_fp", "entity_fn", "failed")
    rows = np.asarray([[2, 1, 0, 0], [0, 0, 1, 1]], dtype=np.int64)
    num, den = ratio_parts(rows, columns, "entity_f1")
    assert (num.tolist(), den.tolist()) == ([4.0, 0.0], [5.0, 1.0])  # 2tp, 2tp + fp + fn
    num, den = ratio_parts(rows, columns, "error_rate")
    assert (num.tolist(), den.tolist()) == ([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="no power analysis"):
        ratio_parts(rows, columns, "latency")


def test_analyse_one_run_with_an_assumed_correlation_by_hand() -> None:
    # error rate over 4 items, 1 failed: ψ = failed − 1/4 → (−.25, −.25, −.25, .75);
    # var(ψ, ddof 1) = 0.25; sd of the difference = √(2 · 0.25 · (1 − 0.5)) = 0.5
    columns = ("failed",)
    rows = np.asarray([[0], [0], [0], [1]], dtype=np.int64)
    p = analyse(rows, None, columns, "error_rate", correlation=0.5, delta=0.1)
    assert (p.n, p.value, p.correlation_source) == (4, 0.25, "assumed")
    assert p.sd_item == pytest.approx(0.5)
    assert p.se == pytest.approx(0.25)
    assert p.mde == pytest.approx((Z975 + Z80) * 0.25, abs=1e-6)
    assert p.n_needed == math.ceil(((Z975 + Z80) * 0.5 / 0.1) ** 2) == 197


def test_analyse_two_runs_measures_the_difference() -> None:
    # A fails item 4, B fails item 3: ψᴮ − ψᴬ = (0, 0, 1, −1); sd (ddof 1) = √(2/3)
    columns = ("failed",)
    a = np.asarray([[0], [0], [0], [1]], dtype=np.int64)
    b = np.asarray([[0], [0], [1], [0]], dtype=np.int64)
    p = analyse(a, b, columns, "error_rate")
    assert p.correlation_source == "measured"
    assert p.sd_item == pytest.approx(math.sqrt(2 / 3))
    assert p.correlation == pytest.approx(-1 / 3)  # corr of (−¼,−¼,−¼,¾) and (−¼,−¼,¾,−¼)


def test_no_spread_gives_no_power_figures() -> None:
    # every item the same in both runs: nothing to scale an MDE by (not an MDE of 0)
    rows = np.asarray([[0], [0], [0]], dtype=np.int64)
    p = analyse(rows, rows, ("failed",), "error_rate", delta=0.1)
    assert (p.mde, p.n_needed, p.power_at_delta) == (None, None, None)


def test_the_figures_do_not_depend_on_item_order() -> None:
    # 300 items in two orders: unsorted, the floating-point sums differ in the last bits
    rng = np.random.default_rng(0)
    columns = ("entity_tp", "entity_fp", "entity_fn", "failed")
    a = rng.integers(0, 5, size=(300, 4))
    b = rng.integers(0, 5, size=(300, 4))
    order = rng.permutation(300)
    first = analyse(a, b, columns, "entity_f1", delta=0.05).to_json()
    assert analyse(a[order], b[order], columns, "entity_f1", delta=0.05).to_json() == first
