"""Invariance properties (hypothesis): what must not change the scores."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from extraction_eval.evaluators import ContextIndex, ScoringConfig, aggregate, assign, score_item
from extraction_eval.types import Entity, Extraction, Relationship

CFG = ScoringConfig(resamples=200, seed=3)
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Near-duplicates on purpose: fuzzy conflicts, casefold collisions, substrings.
NAMES = [
    "Ann",
    "Anna",
    "ann",
    "Bob Smith",
    "Bob Smyth",
    "Acme Corp",
    "Acme",
    "Paris",
    "Springfield",
    "Springfeld",
]
TEXTS = [
    "Ann and Bob Smith met in Paris.",
    "Acme Corp moved to Springfield.",
    "Anna works for Acme.",
    "Nothing here.",
]
entities = st.builds(
    Entity,
    name=st.sampled_from(NAMES),
    type=st.sampled_from(["PER", "ORG", "per"]),
    evidence=st.sampled_from([None, None, "Ann and Bob", "moved to", "nowhere at all"]),
    attributes=st.sampled_from([{}, {"polarity": "positive"}, {"polarity": "unknown"}]),
)
relationships = st.builds(
    Relationship,
    source=st.sampled_from(NAMES),
    type=st.sampled_from(["parent_of", "child_of", "married_to", "knows", "located_in"]),
    target=st.sampled_from(NAMES),
    evidence=st.sampled_from([None, "met in Paris", "elsewhere"]),
)
extractions = st.builds(
    Extraction,
    entities=st.lists(entities, max_size=5),
    relationships=st.lists(relationships, max_size=4),
)
Item = tuple[str, Extraction, Extraction | None]
items_st = st.lists(
    st.tuples(st.sampled_from(TEXTS), extractions, st.one_of(st.none(), extractions, extractions)),
    min_size=1,
    max_size=5,
)


def score_all(items: list[Item], ids: list[str] | None = None) -> dict[str, Any]:
    ids = ids or [f"item-{i}" for i in range(len(items))]
    context = ContextIndex({i: text for i, (text, _, _) in zip(ids, items, strict=True)})
    scored = [
        score_item(item_id=i, text=text, gold=gold, pred=pred, config=CFG, context_texts=context)
        for i, (text, gold, pred) in zip(ids, items, strict=True)
    ]
    return aggregate(scored, CFG)


def without_ids(report: dict[str, Any]) -> dict[str, Any]:
    out = dict(report)
    out.pop("warnings")
    out["no_prediction"] = report["no_prediction"]["count"]
    return out


def shuffled(x: Extraction, rnd: random.Random) -> Extraction:
    ents, rels = list(x.entities), list(x.relationships)
    rnd.shuffle(ents)
    rnd.shuffle(rels)
    return Extraction(entities=ents, relationships=rels)


@FAST
@given(items_st, st.randoms(use_true_random=False))
def test_item_order_does_not_matter(items: list[Item], rnd: random.Random) -> None:
    ids = [f"item-{i}" for i in range(len(items))]
    order = list(range(len(items)))
    rnd.shuffle(order)
    a = score_all(items, ids)
    b = score_all([items[k] for k in order], [ids[k] for k in order])
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@FAST
@given(items_st, st.randoms(use_true_random=False))
def test_object_order_does_not_matter(items: list[Item], rnd: random.Random) -> None:
    mixed = [
        (text, shuffled(gold, rnd), None if pred is None else shuffled(pred, rnd))
        for text, gold, pred in items
    ]
    assert score_all(items) == score_all(mixed)


RATIO_KEYS = ("precision", "recall", "f1")


@FAST
@given(items_st)
def test_scoring_the_set_twice_gives_the_same_ratios(items: list[Item]) -> None:
    once = score_all(items)
    twice = score_all(items + items)
    for block in ("entities", "entities_typed", "relationships"):
        for k in RATIO_KEYS:
            assert twice[block][k] == once[block][k]
        for k in ("tp", "fp", "fn"):
            assert twice[block][k] == 2 * once[block][k]
    for key in ("type_accuracy", "relationship_accuracy"):
        assert twice[key] == once[key]
    assert twice["macro"] == once["macro"]
    assert twice["evidence"]["evidence_coverage_rate"] == once["evidence"]["evidence_coverage_rate"]
    for key in ("zero_fp_pass_rate", "hallucination_rate"):
        assert twice["negative_space"][key] == once["negative_space"][key]
    for kind in ("entities", "relationships"):
        for name, counts in once["per_type"][kind].items():
            for k in RATIO_KEYS:
                assert twice["per_type"][kind][name][k] == counts[k]
    assert twice["taxonomy"] == {k: 2 * v for k, v in once["taxonomy"].items()}


@FAST
@given(items_st, st.randoms(use_true_random=False))
def test_renaming_ids_changes_nothing(items: list[Item], rnd: random.Random) -> None:
    fresh = [f"z{rnd.randrange(10**9)}-{i}" for i in range(len(items))]
    assert without_ids(score_all(items)) == without_ids(score_all(items, fresh))


@FAST
@given(items_st)
def test_perfect_predictions_score_one(items: list[Item]) -> None:
    report = score_all([(text, gold, gold) for text, gold, _ in items])
    for block in ("entities", "entities_typed", "relationships"):
        assert [report[block][k] for k in RATIO_KEYS] == [1.0, 1.0, 1.0]
        assert report[block]["fp"] == report[block]["fn"] == 0
    assert report["type_accuracy"] == report["relationship_accuracy"] == 1.0
    assert all(v == 1.0 for k, v in report["macro"].items() if k != "evidence_coverage_rate")
    # Only evidence problems can remain (the gold quotes themselves may be ungrounded).
    assert {k for k, v in report["taxonomy"].items() if v} <= {"ungrounded", "context_bleed"}
    if report["negative_space"]["gold_empty_items"]:
        assert report["negative_space"]["zero_fp_pass_rate"] == 1.0


@FAST
@given(items_st, st.booleans())
def test_empty_predictions_have_recall_zero(items: list[Item], as_failure: bool) -> None:
    empty = None if as_failure else Extraction()
    report = score_all([(text, gold, empty) for text, gold, _ in items])
    for block, n_gold in (
        ("entities", sum(len(g.entities) for _, g, _ in items)),
        ("relationships", sum(len(g.relationships) for _, g, _ in items)),
    ):
        # nothing expected, nothing predicted -> 1.0; but a failure is never a pass
        expected = 0.0 if n_gold or as_failure else 1.0
        assert report[block]["recall"] == expected
        assert report[block]["tp"] == 0 and report[block]["fn"] == n_gold
    assert report["no_prediction"]["count"] == (len(items) if as_failure else 0)


@FAST
@given(items_st)
def test_report_is_byte_stable(items: list[Item]) -> None:
    a = json.dumps(score_all(items), sort_keys=True)
    b = json.dumps(score_all(items), sort_keys=True)
    assert a == b


def _brute_force(
    adm: NDArray[np.bool_], sim: NDArray[np.float64], rank: NDArray[np.int64]
) -> tuple[int, int, float]:
    n, m = adm.shape
    best = (0, 0, 0.0)
    for k in range(1, min(n, m) + 1):
        for rows in itertools.combinations(range(n), k):
            for cols in itertools.permutations(range(m), k):
                if all(adm[r, c] for r, c in zip(rows, cols, strict=True)):
                    value = (
                        k,
                        int(sum(rank[r, c] for r, c in zip(rows, cols, strict=True))),
                        float(sum(sim[r, c] for r, c in zip(rows, cols, strict=True))),
                    )
                    best = max(best, value)
    return best


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.data())
def test_assign_is_lexicographically_optimal(n: int, m: int, data: st.DataObject) -> None:
    cells = n * m
    adm = np.array(data.draw(st.lists(st.booleans(), min_size=cells, max_size=cells))).reshape(n, m)
    # Similarities on a 1/8 grid: sums are exact, so the comparison is exact.
    sim = (
        np.array(data.draw(st.lists(st.integers(0, 8), min_size=cells, max_size=cells))).reshape(
            n, m
        )
        / 8
    )
    rank = np.array(data.draw(st.lists(st.integers(0, 2), min_size=cells, max_size=cells))).reshape(
        n, m
    )
    rows, cols = assign(adm, sim, rank, max_rank=2)
    assert len(set(rows.tolist())) == len(rows) and len(set(cols.tolist())) == len(cols)
    assert all(adm[r, c] for r, c in zip(rows, cols, strict=True))
    got = (len(rows), int(rank[rows, cols].sum()), float(sim[rows, cols].sum()))
    assert got == _brute_force(adm, sim, rank)
