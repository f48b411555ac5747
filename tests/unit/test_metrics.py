"""Counts to ratios, the division rule, micro vs macro — hand-computed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from extraction_eval.evaluators import (
    Counts,
    ScoringConfig,
    aggregate,
    f1,
    item_scores,
    precision,
    recall,
    score_item,
)
from extraction_eval.evaluators.metrics import counts_json, mean, prf, prf_arrays
from extraction_eval.types import Entity, Extraction, Relationship

CASES = [
    # (tp, fp, fn) -> (precision, recall, f1)
    ((2, 1, 1), (2 / 3, 2 / 3, 4 / 6)),
    ((3, 1, 0), (3 / 4, 1.0, 6 / 7)),
    ((1, 0, 3), (1.0, 1 / 4, 2 / 5)),
    ((0, 0, 0), (1.0, 1.0, 1.0)),  # gold and predictions both empty
    ((0, 3, 0), (0.0, 0.0, 0.0)),  # gold empty, predictions not: recall is 0/0 -> 0.0
    ((0, 0, 2), (0.0, 0.0, 0.0)),  # predictions empty, gold not: precision is 0/0 -> 0.0
    ((0, 2, 2), (0.0, 0.0, 0.0)),
]


@pytest.mark.parametrize(("counts", "expected"), CASES)
def test_prf_table(counts: tuple[int, int, int], expected: tuple[float, float, float]) -> None:
    c = Counts(*counts)
    assert prf(c) == pytest.approx(expected, abs=0, rel=1e-15)
    assert (precision(c), recall(c), f1(c)) == prf(c)


def test_f1_is_one_division_of_counts() -> None:
    c = Counts(1, 2, 4)
    assert f1(c) == 2 / 8  # 2tp / (2tp + fp + fn): exact, not 2PR/(P+R) with two roundings
    p, r = 1 / 3, 1 / 5
    assert f1(c) == pytest.approx(2 * p * r / (p + r))


@pytest.mark.parametrize(("counts", "expected"), CASES)
def test_vectorised_prf_agrees(counts: tuple[int, int, int], expected: tuple[float, ...]) -> None:
    tp, fp, fn = (np.array([float(x)]) for x in counts)
    got = tuple(float(a[0]) for a in prf_arrays(tp, fp, fn))
    assert got == pytest.approx(expected, abs=0, rel=1e-15)


def test_counts_json() -> None:
    total = Counts(5, 2, 4)
    assert counts_json(total) == {
        "tp": 5,
        "fp": 2,
        "fn": 4,
        "precision": 5 / 7,
        "recall": 5 / 9,
        "f1": 10 / 16,
    }


def test_mean_is_order_independent_and_none_when_empty() -> None:
    values = [0.1] * 10 + [1e16, -1e16]
    assert mean(values) == mean(list(reversed(values))) == math.fsum(values) / 12
    assert mean([]) is None


def test_micro_is_headline_macro_is_mean_of_items() -> None:
    cfg = ScoringConfig(resamples=0)
    # item a: tp=1 fp=0 fn=3 (P 1, R 1/4, F1 2/5); item b: tp=1 fp=1 fn=0 (P 1/2, R 1, F1 2/3)
    a_gold = Extraction(entities=[Entity(name=n, type="T") for n in ("w", "x", "y", "z")])
    a_pred = Extraction(entities=[Entity(name="w", type="T")])
    b_gold = Extraction(entities=[Entity(name="q", type="T")])
    b_pred = Extraction(entities=[Entity(name="q", type="T"), Entity(name="r", type="T")])
    items = [
        score_item(item_id="a", text="w x y z", gold=a_gold, pred=a_pred, config=cfg),
        score_item(item_id="b", text="q r", gold=b_gold, pred=b_pred, config=cfg),
    ]
    report = aggregate(items, cfg)
    assert report["entities"] == {
        "tp": 2,
        "fp": 1,
        "fn": 3,
        "precision": 2 / 3,
        "recall": 2 / 5,
        "f1": 4 / 8,
        "type_correct": 2,
    }
    assert report["macro"]["entity_precision"] == (1 + 1 / 2) / 2
    assert report["macro"]["entity_recall"] == (1 / 4 + 1) / 2
    assert report["macro"]["entity_f1"] == pytest.approx((2 / 5 + 2 / 3) / 2, abs=1e-16)
    # No relationship anywhere: both empty on every item -> 1.0 micro and macro.
    assert report["relationships"]["f1"] == 1.0
    assert report["macro"]["relationship_f1"] == 1.0
    assert report["relationship_accuracy"] == 1.0


def test_type_and_relationship_accuracy() -> None:
    cfg = ScoringConfig(resamples=0)
    gold = Extraction(
        entities=[Entity(name="Ann", type="PER"), Entity(name="Acme", type="ORG")],
        relationships=[Relationship(source="Acme", type="employs", target="Ann")],
    )
    pred = Extraction(
        entities=[Entity(name="Ann", type="PER"), Entity(name="Acme", type="LOC")],
        relationships=[
            Relationship(source="Acme", type="employs", target="Ann"),
            Relationship(source="Ann", type="employs", target="Acme"),
        ],
    )
    s = score_item(item_id="i", text="Acme employs Ann", gold=gold, pred=pred, config=cfg)
    assert s.type_accuracy() == 1 / 2  # 2 matched by name, 1 with the right type
    assert s.relationship_accuracy() == 1 / 2  # correct / extracted
    report = aggregate([s], cfg)
    assert report["type_accuracy"] == 1 / 2
    assert report["relationship_accuracy"] == 1 / 2
    assert report["entities_typed"]["tp"] == 1


def test_accuracies_on_empty_and_unmatched_items() -> None:
    cfg = ScoringConfig(resamples=0)
    empty = score_item(item_id="e", text="", gold=Extraction(), pred=Extraction(), config=cfg)
    assert empty.type_accuracy() == 1.0 and empty.relationship_accuracy() == 1.0
    gold = Extraction(entities=[Entity(name="Ann", type="PER")])
    none = score_item(item_id="n", text="Ann", gold=gold, pred=Extraction(), config=cfg)
    assert none.type_accuracy() == 0.0  # 0 matched pairs, not both empty


ITEM_SCORES = [
    "entity_precision",
    "entity_recall",
    "entity_f1",
    "entity_typed_f1",
    "type_accuracy",
    "relationship_precision",
    "relationship_recall",
    "relationship_f1",
    "relationship_accuracy",
]


def test_item_scores_contract() -> None:
    cfg = ScoringConfig(resamples=0)
    gold = Extraction(
        entities=[Entity(name="Ann", type="PER"), Entity(name="Acme", type="ORG")],
        relationships=[Relationship(source="Acme", type="employs", target="Ann")],
    )
    pred = Extraction(
        entities=[Entity(name="Ann", type="PER", evidence="Ann"), Entity(name="Bob", type="PER")],
    )
    s = score_item(item_id="i", text="Acme employs Ann", gold=gold, pred=pred, config=cfg)
    scores = {sc.name: sc for sc in item_scores(s)}
    assert list(scores) == [*ITEM_SCORES, "evidence_coverage_rate"]
    assert all(sc.data_type == "NUMERIC" for sc in scores.values())
    assert scores["entity_precision"].value == 1 / 2
    assert scores["entity_recall"].value == 1 / 2
    assert scores["entity_f1"].comment == "tp=1 fp=1 fn=1"
    assert scores["type_accuracy"].comment == "correct=1 matched=1"
    assert scores["relationship_recall"].value == 0.0
    assert scores["relationship_accuracy"].comment == "correct=0 extracted=0"
    assert scores["evidence_coverage_rate"].value == 1 / 2  # 1 grounded of 2 predicted objects

    empty_gold = score_item(item_id="e", text="Nothing.", gold=Extraction(), pred=pred, config=cfg)
    scores = {sc.name: sc for sc in item_scores(empty_gold)}
    assert list(scores)[-2:] == ["zero_fp_pass", "hallucination_count"]
    assert scores["zero_fp_pass"].value is False
    assert scores["zero_fp_pass"].data_type == "BOOLEAN"
    assert scores["hallucination_count"].value == 2.0

    ok = score_item(item_id="k", text="Nothing.", gold=Extraction(), pred=Extraction(), config=cfg)
    scores = {sc.name: sc for sc in item_scores(ok)}
    assert scores["zero_fp_pass"].value is True
    assert all(scores[n].value == 1.0 for n in ITEM_SCORES)  # both empty

    failed = score_item(item_id="f", text="Ann", gold=gold, pred=None, config=cfg)
    assert failed.failed and failed.entities == Counts(0, 0, 2)
    assert {sc.name: sc for sc in item_scores(failed)}["entity_f1"].comment == (
        "tp=0 fp=0 fn=2; errored: no output, scored 0"
    )
