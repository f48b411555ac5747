"""Repeated cells: the variance split and the cluster bootstrap, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from extraction_eval.evaluators.stats.cluster_bootstrap import repeat_variance, split_variance

# two repeats of two items, (tp, fp, fn); every item predicts 2 objects
RUN1 = np.asarray([[2, 0, 0], [0, 2, 0]], dtype=np.int64)
RUN2 = np.asarray([[1, 1, 0], [1, 1, 0]], dtype=np.int64)


def test_variance_split_by_hand() -> None:
    # precision num = tp ((2, 0), (1, 1)), den = 2: pooled 4/8 = 0.5, ψ = (num − 1) / 2
    # = ((.5, −.5), (0, 0)); per item over the runs: var(.5, 0) = var(−.5, 0) = 0.125
    # → σ²_run = 0.125; item means (.25, −.25): var 0.125 = σ²_item + 0.125 / 2
    # → σ²_item = 0.0625; run-to-run share 0.125 / 0.1875 = 2/3
    num = np.asarray([[2.0, 0.0], [1.0, 1.0]])
    den = np.full((2, 2), 2.0)
    assert split_variance(num, den) == pytest.approx((0.5, 0.0625, 0.125))
    v = repeat_variance([RUN1, RUN2], "precision", resamples=0)
    assert (v.value, v.item_var, v.run_var) == pytest.approx((0.5, 0.0625, 0.125))
    assert v.run_share == pytest.approx(2 / 3) and v.dominant == "run-to-run"


def test_cluster_bootstrap_draws_items_with_all_their_repeats() -> None:
    # resamples hold item 0 twice (1/4): its two runs pool to tp 3 fp 1 → 0.75; item 1 twice
    # (1/4): tp 1 fp 3 → 0.25; one of each (1/2): 0.5. The 2.5 % / 97.5 % quantiles: .25, .75
    v = repeat_variance([RUN1, RUN2], "precision", resamples=4000, seed=1, method="percentile")
    assert v.ci == (0.25, 0.75)
    one = repeat_variance([RUN1[:1], RUN2[:1]], "precision", resamples=100, seed=1)
    assert one.ci == (0.75, 0.75)  # one item: the interval is the point


def test_identical_repeats_have_no_run_to_run_variance() -> None:
    v = repeat_variance([RUN1, RUN1, RUN1], "f1", resamples=200, seed=3)
    assert v.run_var == 0.0 and v.dominant == "item sampling"
    with pytest.raises(ValueError, match="one shape"):
        repeat_variance([RUN1, RUN1[:1]], "f1")
