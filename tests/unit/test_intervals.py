"""Expanded percentile bootstrap (Hesterberg 2015) and bootstrap p-values: the quantile
algebra pinned on hand-computed cases (t and normal table values)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.stats.bootstrap import bootstrap_prf, bootstrap_ratios
from extraction_eval.evaluators.stats.intervals import (
    bootstrap_p_value,
    expansion,
    interval,
    quantile_levels,
)


def test_percentile_levels_are_alpha_halves() -> None:
    assert quantile_levels(30, 0.95, "percentile") == pytest.approx((0.025, 0.975))
    assert quantile_levels(30, 0.90, "percentile") == pytest.approx((0.05, 0.95))


def test_expanded_levels_at_n_30_by_hand() -> None:
    # t(0.975, 29) = 2.04523 (t table); √(30/29) = 1.017095; z = 2.080193;
    # Φ(−2.080193) = 0.018754 (normal table, interpolated): about 1.9 % / 98.1 %
    assert expansion(30, 0.95) == pytest.approx(math.sqrt(30 / 29) * 2.04523, abs=1e-5)
    lo, hi = quantile_levels(30, 0.95, "expanded")
    assert lo == pytest.approx(0.018754, abs=2e-6)
    assert hi == pytest.approx(1 - 0.018754, abs=2e-6)


def test_expanded_levels_at_n_5_and_10_by_hand() -> None:
    # n = 5: t(0.975, 4) = 2.776445, × √(5/4) = 3.104150, Φ(−3.104150) = 0.000954
    assert quantile_levels(5, 0.95, "expanded")[0] == pytest.approx(0.000954, abs=2e-6)
    # n = 10: t(0.975, 9) = 2.262157, × √(10/9) = 2.384546, Φ(−2.384546) = 0.008551
    assert quantile_levels(10, 0.95, "expanded")[0] == pytest.approx(0.008551, abs=2e-6)


def test_expanded_approaches_percentile_as_n_grows() -> None:
    levels = [quantile_levels(n, 0.95, "expanded")[0] for n in (10, 30, 100, 300, 100_000)]
    assert levels == sorted(levels)
    assert levels[-1] == pytest.approx(0.025, abs=1e-4)


def test_one_item_takes_the_whole_bootstrap_range() -> None:
    assert quantile_levels(1, 0.95, "expanded") == (0.0, 1.0)


def test_interval_interpolates_the_quantiles_linearly() -> None:
    # 0, 1, ..., 100: the q-quantile with linear interpolation is 100 q
    values = np.arange(101, dtype=np.float64)
    assert interval(values, 30, 0.95, "percentile") == pytest.approx((2.5, 97.5))
    assert interval(values, 30, 0.95, "expanded") == pytest.approx((1.8754, 98.1246), abs=1e-3)


def test_bad_method_or_level_is_refused() -> None:
    with pytest.raises(ValueError, match="CI method"):
        quantile_levels(10, 0.95, "bca")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        quantile_levels(10, 1.0, "expanded")
    with pytest.raises(InvalidValue, match="ci"):
        ScoringConfig(ci="bca")  # type: ignore[arg-type]


def test_run_ci_widens_with_the_expanded_method() -> None:
    # 12 items alternating a hit and a miss: the expanded interval contains the percentile one
    rows = np.asarray([(1, 0, 0), (0, 1, 1)] * 6, dtype=np.int64)
    plain = bootstrap_prf({"e": rows}, resamples=4000, seed=3, method="percentile")
    wide = bootstrap_prf({"e": rows}, resamples=4000, seed=3, method="expanded")
    assert plain is not None and wide is not None
    (plo, phi), (wlo, whi) = plain["e"]["f1"], wide["e"]["f1"]
    assert wlo < plo < phi < whi
    # the same resamples cut at other quantiles: the exact expanded levels of n = 12
    ratios = bootstrap_ratios({"r": rows[:, :2]}, resamples=4000, seed=3, method="expanded")
    assert ratios is not None and ratios["r"] is not None


def test_p_value_from_the_bootstrap_standard_error_by_hand() -> None:
    # replicates −1, 1, 3, 5: population sd = √5 = 2.2360680; estimate 2 → z = 0.894427
    reps = np.asarray([-1.0, 1.0, 3.0, 5.0])
    # percentile: 2 Φ(−0.894427) = 2 × 0.185547 = 0.371093
    assert bootstrap_p_value(reps, 2.0, 30, "percentile") == pytest.approx(0.371093, abs=1e-5)
    # expanded, n = 5: z / √(5/4) = 0.8, 2 T₄(−0.8) = 2 × 0.234265 = 0.468530 (t table)
    assert bootstrap_p_value(reps, 2.0, 5, "expanded") == pytest.approx(0.468530, abs=1e-5)
    # the sign of the estimate does not matter (two-sided)
    assert bootstrap_p_value(reps, -2.0, 5, "expanded") == bootstrap_p_value(
        reps, 2.0, 5, "expanded"
    )


def test_p_value_edge_cases() -> None:
    assert bootstrap_p_value(np.asarray([]), 0.5, 10, "expanded") is None
    assert bootstrap_p_value(np.asarray([np.nan, np.nan]), 0.5, 10, "expanded") is None
    assert bootstrap_p_value(np.zeros(5), 0.0, 10, "expanded") is None  # no spread seen
    assert bootstrap_p_value(np.ones(5), 1.0, 10, "expanded") is None  # no spread seen
