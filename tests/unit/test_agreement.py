"""Krippendorff's α (nominal): the textbook example and a hand-computed case; agreement of
the models that voted a gold set."""

from __future__ import annotations

import pytest

from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.stats.gold_agreement import (
    gold_agreement,
    krippendorff_alpha_nominal,
    pairwise_agreement,
)
from extraction_eval.evaluators.vote import Vote, vote_item
from extraction_eval.types import Entity, Extraction


def test_krippendorffs_textbook_example_is_0_743() -> None:
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", C: nominal data,
    # 4 observers, 12 units, missing values; nominal α = 0.743
    a = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
    b = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
    c = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
    d = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
    units = [list(u) for u in zip(a, b, c, d, strict=True)]
    assert krippendorff_alpha_nominal(units) == pytest.approx(0.743, abs=5e-4)


def test_two_coders_binary_by_hand() -> None:
    # units (1,1), (0,0), (1,0), (0,0): o11 = 2, o00 = 4, o01 = o10 = 1; n0 = 5, n1 = 3,
    # n = 8; α = 1 − 7 · 2 / (2 · 5 · 3) = 1 − 14/30
    units = [[1, 1], [0, 0], [1, 0], [0, 0]]
    assert krippendorff_alpha_nominal(units) == pytest.approx(1 - 14 / 30)
    assert pairwise_agreement(units) == pytest.approx(6 / 8)  # (o11 + o00) / n


def test_alpha_edge_cases() -> None:
    assert krippendorff_alpha_nominal([[1, 1], [1, 1]]) is None  # no variation
    assert krippendorff_alpha_nominal([[1], [0, None]]) is None  # nothing pairable
    assert krippendorff_alpha_nominal([[1, 1], [0, 0]]) == 1.0
    # perfect disagreement on a binary item pair: below 0
    alpha = krippendorff_alpha_nominal([[1, 0], [0, 1]])
    assert alpha is not None and alpha < 0


def _ents(*names: str, kind: str = "person") -> Extraction:
    return Extraction(entities=[Entity(name=n, type=kind) for n in names])


def test_gold_agreement_per_kind_and_type() -> None:
    cfg = ScoringConfig(match="exact")
    # item 1: m1, m2 find Ann and Bob, m3 only Ann: candidate Ann (1,1,1), Bob (1,1,0)
    # item 2: m1 finds Paris, m2 and m3 nothing; m3 errors on it -> Paris (1,0,None)
    v1 = vote_item(
        [Vote("m1", 1.0, _ents("Ann", "Bob")), Vote("m2", 1.0, _ents("Ann", "Bob")),
         Vote("m3", 1.0, _ents("Ann"))],
        cfg,
    )  # fmt: skip
    v2 = vote_item(
        [Vote("m1", 1.0, _ents("Paris", kind="location")), Vote("m2", 1.0, _ents()),
         Vote("m3", 1.0, None)],
        cfg,
    )  # fmt: skip
    out = gold_agreement({"1": v1, "2": v2})
    ent = out["entity"]
    assert (ent["units"], ent["unanimous"]) == (3, 1)
    # observed: o11 + o00 over n = 4 / 8
    assert ent["observed"] == pytest.approx(0.5)
    # units (1,1,1), (1,1,0), (1,0): o11 = 6/2 + 2/2 = 4, o10 = o01 = 2/2 + 1 = 2, o00 = 0;
    # n1 = 6, n0 = 2, n = 8: α = 1 − 7 · 4 / (2 · 6 · 2) = 1 − 28/24
    assert ent["alpha"] == pytest.approx(1 - 28 / 24)
    assert ent["per_type"]["person"]["units"] == 2
    # person: (1,1,1), (1,1,0): o11 = 3 + 1 = 4, o10 = o01 = 1; n1 = 5, n0 = 1, n = 6:
    # α = 1 − 5 · 2 / (2 · 5 · 1) = 0
    assert ent["per_type"]["person"]["alpha"] == pytest.approx(0.0)
    # location: (1, 0) alone: o10 = o01 = 1, n = 2: α = 1 − 1 · 2 / (2 · 1 · 1) = 0
    assert ent["per_type"]["location"] == {
        "alpha": 0.0,
        "observed": 0.0,
        "units": 1,
        "unanimous": 0,
    }
    assert out["relationship"] == {
        "alpha": None,
        "observed": None,
        "units": 0,
        "unanimous": 0,
        "per_type": {},
    }
