"""Bootstrap CIs: hand-computable cases, determinism, invariance."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from extraction_eval.evaluators import ScoringConfig, aggregate, bootstrap_prf, score_item
from extraction_eval.evaluators.stats import bootstrap as stats_module
from extraction_eval.evaluators.stats.bootstrap import resample_weights
from extraction_eval.types import Entity, Extraction


def _arr(rows: list[tuple[int, int, int]]) -> NDArray[np.int64]:
    return np.asarray(rows, dtype=np.int64)


def test_one_item_has_a_degenerate_interval() -> None:
    ci = bootstrap_prf({"e": _arr([(2, 1, 1)])}, resamples=500, seed=1)
    assert ci == {
        "e": {"precision": [2 / 3, 2 / 3], "recall": [2 / 3, 2 / 3], "f1": [2 / 3, 2 / 3]}
    }


def test_two_items_span_the_possible_values() -> None:
    # Item A = (tp 1, fp 0), item B = (tp 0, fp 1). A resample holds A 0, 1 or 2 times
    # (prob 1/4, 1/2, 1/4), so precision is 0, 1/2 or 1: the 95% interval is [0, 1].
    ci = bootstrap_prf({"e": _arr([(1, 0, 0), (0, 1, 0)])}, resamples=4000, seed=3)
    assert ci is not None
    assert ci["e"]["precision"] == [0.0, 1.0]


def test_both_empty_resamples_follow_the_division_rule() -> None:
    ci = bootstrap_prf({"r": _arr([(0, 0, 0), (0, 0, 0)])}, resamples=100, seed=0)
    assert ci == {"r": {"precision": [1.0, 1.0], "recall": [1.0, 1.0], "f1": [1.0, 1.0]}}


def test_weights_are_resamples_of_n_items() -> None:
    w = resample_weights(7, 50, np.random.default_rng(0))
    assert w.shape == (50, 7)
    assert (w.sum(axis=1) == 7).all()
    assert (w >= 0).all()


def test_deterministic_seeded_and_order_invariant() -> None:
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 6, size=(40, 3))
    a = bootstrap_prf({"e": rows}, resamples=1000, seed=42)
    assert a == bootstrap_prf({"e": rows.copy()}, resamples=1000, seed=42)
    assert a == bootstrap_prf({"e": rows[::-1].copy()}, resamples=1000, seed=42)
    assert a != bootstrap_prf({"e": rows}, resamples=1000, seed=43)


def test_interval_brackets_the_micro_value() -> None:
    rng = np.random.default_rng(9)
    rows = rng.integers(0, 6, size=(60, 3))
    tp, fp, fn = rows.sum(axis=0)
    ci = bootstrap_prf({"e": rows}, resamples=2000, seed=42)
    assert ci is not None
    lo, hi = ci["e"]["f1"]
    assert lo < 2 * tp / (2 * tp + fp + fn) < hi
    assert 0.0 <= lo < hi <= 1.0


def test_chunking_does_not_change_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import extraction_eval.evaluators.stats.bootstrap as stats

    rows = np.random.default_rng(1).integers(0, 5, size=(30, 3))
    whole = bootstrap_prf({"e": rows}, resamples=300, seed=7)
    monkeypatch.setattr(stats, "_CHUNK_CELLS", 30 * 7)  # 43 chunks of 7 resamples
    assert bootstrap_prf({"e": rows}, resamples=300, seed=7) == whole


def test_nothing_to_resample() -> None:
    assert bootstrap_prf({"e": _arr([(1, 0, 0)])}, resamples=0, seed=1) is None
    assert bootstrap_prf({"e": np.zeros((0, 3), dtype=np.int64)}, resamples=10, seed=1) is None


def test_report_ci_shape_and_switch_off() -> None:
    gold = Extraction(entities=[Entity(name="a", type="T"), Entity(name="b", type="T")])
    pred = Extraction(entities=[Entity(name="a", type="T")])
    cfg = ScoringConfig(resamples=200, seed=1)
    items = [
        score_item(item_id=str(i), text="a b", gold=gold, pred=pred, config=cfg) for i in range(3)
    ]
    ci = aggregate(items, cfg)["ci"]
    assert ci["method"] == "expanded percentile bootstrap (Hesterberg 2015) over items"
    assert ci["ci_method"] == "expanded" and cfg.to_json()["ci"] == "expanded"
    plain = aggregate(items, ScoringConfig(resamples=200, seed=1, ci="percentile"))["ci"]
    assert (plain["method"], plain["ci_method"]) == (
        "percentile bootstrap over items",
        "percentile",
    )
    assert (ci["level"], ci["resamples"], ci["seed"]) == (0.95, 200, 1)
    assert ci["entity_recall"] == {"low": 0.5, "high": 0.5}  # identical items
    assert ci["entity_precision"] == {"low": 1.0, "high": 1.0}
    assert set(ci) >= {
        f"{p}_{m}"
        for p in ("entity", "entity_typed", "relationship")
        for m in ("precision", "recall", "f1")
    }
    off = aggregate(items, ScoringConfig(resamples=0))["ci"]
    assert off["entity_f1"] is None and off["resamples"] == 0


def test_resampled_sums_stay_exact_for_large_counts() -> None:
    # float32 is used only while every sum is exact in it; 2**23 + 1 per item cannot be
    from extraction_eval.evaluators.stats.bootstrap import resampled_sums

    big = np.asarray([[2**23 + 1, 1], [2**23 + 2, 0]], dtype=np.int64)  # 1 + 1: 2**24 + 3
    sums = resampled_sums(big, resamples=50, seed=1)
    weights = resample_weights(2, 50, np.random.default_rng(1))
    ordered = big[np.lexsort(big.T[::-1])]
    expected = np.asarray(
        [[int(w[0]) * ordered[0, c] + int(w[1]) * ordered[1, c] for c in range(2)] for w in weights]
    )
    assert np.array_equal(sums, expected.astype(np.float64))


def test_row_by_row_weights_equal_the_vectorised_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from extraction_eval.evaluators.stats import bootstrap as stats

    monkeypatch.setattr(stats, "_ROW_BY_ROW", 10)
    row_by_row = resample_weights(40, 30, np.random.default_rng(8))
    monkeypatch.setattr(stats, "_ROW_BY_ROW", 10**9)
    vectorised = resample_weights(40, 30, np.random.default_rng(8))
    assert np.array_equal(row_by_row, vectorised)
    assert (row_by_row.sum(axis=1) == 40).all()


@pytest.mark.parametrize("distinct", [3, 5000])
def test_resampled_sums_are_the_weights_times_the_rows_whether_rows_repeat_or_not(
    distinct: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # draws are counted per distinct row when rows repeat (few distinct rows) and per item
    # otherwise: both give exactly the item-weights product on the same draws, chunk by chunk
    # (here with the multinomial draw of many repeated rows turned off: see the test below)
    monkeypatch.setattr(stats_module, "_ITEMS_PER_ROW", 10**9)
    from extraction_eval.evaluators.stats import bootstrap as stats

    monkeypatch.setattr(stats, "_CHUNK_CELLS", 6000 * 40)  # several chunks
    rng = np.random.default_rng(4)
    matrix = rng.integers(0, distinct, size=(6000, 3)) % np.asarray([distinct, 2, 7])
    sums = stats.resampled_sums(matrix, resamples=100, seed=9)
    ordered = matrix[np.lexsort(matrix.T[::-1])]
    draw = np.random.default_rng(9)
    weights = np.concatenate([resample_weights(6000, size, draw) for size in (40, 40, 20)])
    assert np.array_equal(sums, (weights.astype(np.int64) @ ordered).astype(np.float64))


def test_many_repeated_rows_are_resampled_as_a_multinomial_over_the_distinct_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """100,000 items with 40 distinct rows: every resample still draws n items (a column of
    ones sums to n), the sums depend on the multiset only, their mean is n times the mean row
    and their spread is the item bootstrap's; and no (resamples x items) weights are made."""
    rng = np.random.default_rng(5)
    n = 100_000
    matrix = np.column_stack(
        [np.ones(n, dtype=np.int64), rng.integers(0, 5, n), rng.integers(0, 8, n) % 3]
    )
    assert np.unique(matrix, axis=0).shape[0] * stats_module._ITEMS_PER_ROW <= n

    real_rng = np.random.default_rng

    class NoItemDraws:  # the generator, refusing a draw of one index per item
        def __init__(self, seed: int) -> None:
            self.rng = real_rng(seed)

        def integers(self, *a: object, size: tuple[int, int], **k: object) -> object:
            assert size[1] < n, "item-level draws: O(resamples x items)"
            return self.rng.integers(*a, size=size, **k)  # type: ignore[call-overload]

        def multinomial(self, *a: object, **k: object) -> object:
            return self.rng.multinomial(*a, **k)  # type: ignore[call-overload]

    monkeypatch.setattr(stats_module.np.random, "default_rng", NoItemDraws)
    sums = stats_module.resampled_sums(matrix, resamples=4000, seed=3)
    assert sums.shape == (4000, 3)
    assert (sums[:, 0] == n).all()
    shuffled = stats_module.resampled_sums(rng.permutation(matrix), resamples=4000, seed=3)
    assert np.array_equal(sums, shuffled)
    mean_row, sd_row = matrix.mean(axis=0), matrix.std(axis=0)
    assert np.allclose(sums[:, 1:].mean(axis=0), n * mean_row[1:], rtol=1e-3)
    # the bootstrap standard error of a sum of n iid rows is sqrt(n) * sd
    assert np.allclose(sums[:, 1:].std(axis=0), np.sqrt(n) * sd_row[1:], rtol=0.06)


def test_distinct_sorted_rows_are_what_np_unique_gives() -> None:
    # the bootstrap's distinct rows, found on rows it has already sorted (np.unique sorted
    # them again: ~0.3 s at 100,000 items): the same rows, groups and repeats, so the same draws
    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 40, 300):
        for width in (1, 3, 8):
            m = rng.integers(-2, 3, size=(n, width)).astype(np.int64)
            ordered = m[np.lexsort(m.T[::-1])]
            want = np.unique(ordered, axis=0, return_inverse=True, return_counts=True)
            got = stats_module.distinct_sorted_rows(ordered)
            assert np.array_equal(got[0], want[0])
            assert np.array_equal(got[1], np.asarray(want[1]).reshape(-1))
            assert np.array_equal(got[2], want[2])
