"""Holm and Benjamini–Hochberg adjusted p-values, hand-computed."""

from __future__ import annotations

import pytest

from extraction_eval.evaluators.stats.multiple_testing import adjust, adjust_named, holm


def test_holm_by_hand() -> None:
    # sorted: 0.01, 0.02, 0.03, 0.04 with m = 4 → 4×0.01, 3×0.02, 2×0.03, 1×0.04
    # = 0.04, 0.06, 0.06, 0.04 → running max: 0.04, 0.06, 0.06, 0.06
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])


def test_holm_caps_at_one_and_keeps_ties_in_order() -> None:
    assert holm([0.5, 0.5, 0.9]) == pytest.approx([1.0, 1.0, 1.0])
    assert holm([0.001]) == [0.001]
    assert holm([]) == []


def test_benjamini_hochberg_by_hand() -> None:
    # sorted 0.01, 0.02, 0.03, 0.04 with m = 4: p × m / rank = 0.04, 0.04, 0.04, 0.04;
    # running min from the top keeps 0.04 everywhere
    assert adjust([0.03, 0.01, 0.04, 0.02], "bh") == pytest.approx([0.04] * 4)
    # 0.001, 0.04, 0.2 (m = 3): 0.003, 0.06, 0.2
    assert adjust([0.2, 0.001, 0.04], "bh") == pytest.approx([0.2, 0.003, 0.06])


def test_none_returns_the_raw_values_and_bad_input_is_refused() -> None:
    assert adjust([0.2, 0.01], "none") == [0.2, 0.01]
    with pytest.raises(ValueError, match="between 0 and 1"):
        adjust([1.5], "holm")
    with pytest.raises(ValueError, match="correction must be one of"):
        adjust([0.5], "bonferroni")  # type: ignore[arg-type]


def test_named_skips_tests_not_made() -> None:
    out = adjust_named({"a": 0.01, "b": None, "c": 0.04}, "holm")
    assert out == {"a": pytest.approx(0.02), "b": None, "c": pytest.approx(0.04)}
