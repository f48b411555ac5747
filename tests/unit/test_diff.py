"""The extraction-aware diff of one item between two runs, on hand-built items: one test per
category (fixed, broken, retyped, direction flipped, evidence, hallucinations, errored side)
and aggregates that equal a hand count."""

from __future__ import annotations

import json

from extraction_eval.evaluators import ScoringConfig, score_item
from extraction_eval.evaluators.diff import (
    COUNTER_NAMES,
    ItemDiff,
    diff_item,
)
from extraction_eval.evaluators.diff_counts import DiffCounts, regression_order
from extraction_eval.types import Entity, Extraction, Relationship

CFG = ScoringConfig()
TEXT = "Ada Lovelace worked for Charles Babbage in London. Babbage employs Ada Lovelace."
ADA = Entity(name="Ada Lovelace", type="person", evidence="Ada Lovelace")
CB = Entity(name="Charles Babbage", type="person", evidence="Charles Babbage")
LONDON = Entity(name="London", type="location", evidence="in London")
EMPLOYS = Relationship(
    source="Charles Babbage",
    type="employs",
    target="Ada Lovelace",
    evidence="Babbage employs Ada Lovelace",
)
GOLD = Extraction(entities=[ADA, CB, LONDON], relationships=[EMPLOYS])


def _counted(diffs: list[ItemDiff]) -> DiffCounts:
    """The diffs folded as compare folds them (``DiffCounts.add``, one at a time)."""
    counts = DiffCounts()
    for d in diffs:
        counts.add(d)
    return counts


def ext(*objects: Entity | Relationship) -> Extraction:
    return Extraction(
        entities=[o for o in objects if isinstance(o, Entity)],
        relationships=[o for o in objects if isinstance(o, Relationship)],
    )


def diff(a: Extraction | None, b: Extraction | None, gold: Extraction = GOLD) -> ItemDiff:
    return diff_item(item_id="x", text=TEXT, gold=gold, pred_a=a, pred_b=b, config=CFG)


def obj(d: ItemDiff, label: str):  # type: ignore[no-untyped-def]
    (found,) = [o for o in d.objects if o.label == label]
    return found


def test_identical_predictions_change_nothing() -> None:
    d = diff(GOLD, GOLD)
    assert not d.changed and all(v == 0 for v in d.counts().values())
    assert {o.a for o in d.objects} == {"right"} and {o.b for o in d.objects} == {"right"}


def test_fixed_missed_in_a_right_in_b() -> None:
    d = diff(ext(ADA, CB, EMPLOYS), GOLD)
    london = obj(d, "London")
    assert (london.a, london.b, london.change) == ("missed", "right", "fixed")
    assert london.a_pred is None and london.b_pred is not None and london.b_pred.index == 2
    assert d.fixed == 1 and d.broken == 0 and d.retyped == 0


def test_fixed_wrong_type_in_a_is_fixed_and_retyped() -> None:
    wrong = LONDON.model_copy(update={"type": "organization"})
    d = diff(ext(ADA, CB, wrong, EMPLOYS), GOLD)
    london = obj(d, "London")
    assert (london.a, london.b, london.change, london.retyped) == (
        "wrong_type",
        "right",
        "fixed",
        True,
    )
    assert london.a_pred is not None and london.a_pred.type == "organization"


def test_broken_right_in_a_missed_or_wrong_in_b() -> None:
    wrong_cb = CB.model_copy(update={"type": "organization"})
    d = diff(GOLD, ext(ADA, wrong_cb, EMPLOYS))
    assert (obj(d, "Charles Babbage").change, obj(d, "Charles Babbage").b) == (
        "broken",
        "wrong_type",
    )
    assert (obj(d, "London").change, obj(d, "London").b) == ("broken", "missed")
    assert d.broken == 2 and d.fixed == 0 and d.regressions == 2


def test_retyped_between_two_wrong_types_is_neither_fixed_nor_broken() -> None:
    a = ext(ADA, CB, LONDON.model_copy(update={"type": "organization"}), EMPLOYS)
    b = ext(ADA, CB, LONDON.model_copy(update={"type": "person"}), EMPLOYS)
    london = obj(diff(a, b), "London")
    assert london.retyped and london.change is None
    assert london.a == london.b == "wrong_type"


def test_direction_flipped_relationship() -> None:
    flipped = EMPLOYS.model_copy(update={"source": "Ada Lovelace", "target": "Charles Babbage"})
    d = diff(GOLD, ext(ADA, CB, LONDON, flipped))
    rel = obj(d, "(Charles Babbage, employs, Ada Lovelace)")
    assert (rel.a, rel.b, rel.change, rel.flipped, rel.retyped) == (
        "right",
        "reversed",
        "broken",
        True,
        False,
    )
    assert d.flipped == 1 and d.broken == 1
    back = diff(ext(ADA, CB, LONDON, flipped), GOLD)
    assert back.flipped == 1 and back.fixed == 1 and back.broken == 0


def test_inverse_type_written_the_other_way_is_not_a_change() -> None:
    inverse = Relationship(
        source="Ada Lovelace",
        type="employed_by",
        target="Charles Babbage",
        evidence="Babbage employs Ada Lovelace",
    )
    d = diff(GOLD, ext(ADA, CB, LONDON, inverse))
    assert not d.changed, d.to_json()


def test_relationship_with_a_new_type_on_the_same_endpoints_is_retyped() -> None:
    wrong = EMPLOYS.model_copy(update={"type": "knows"})
    d = diff(ext(ADA, CB, LONDON, wrong), GOLD)
    rel = obj(d, "(Charles Babbage, employs, Ada Lovelace)")
    assert (rel.a, rel.b, rel.change, rel.retyped) == ("wrong_type", "right", "fixed", True)


def test_evidence_grounded_to_ungrounded_and_back() -> None:
    bad = ADA.model_copy(update={"evidence": "Ada Byron, Countess"})
    d = diff(GOLD, ext(bad, CB, LONDON, EMPLOYS))
    ada = obj(d, "Ada Lovelace")
    assert ada.evidence == "ungrounded" and ada.change is None and d.changed
    assert d.evidence_ungrounded == 1 and d.evidence_grounded == 0
    back = diff(ext(bad, CB, LONDON, EMPLOYS), GOLD)
    assert back.evidence_grounded == 1 and back.evidence_ungrounded == 0
    # no evidence counts as not grounded
    none = ADA.model_copy(update={"evidence": None})
    assert obj(diff(GOLD, ext(none, CB, LONDON, EMPLOYS)), "Ada Lovelace").evidence == (
        "ungrounded"
    )


def test_new_and_gone_hallucinations_on_a_gold_empty_item() -> None:
    empty = Extraction()
    paris = Entity(name="Paris", type="location", evidence="Paris")
    d = diff(empty, ext(paris), gold=empty)
    assert d.gold_empty and d.new_false_positives == 1 and d.regressions == 1
    (x,) = d.extras
    assert (x.status, x.label, x.a_pred, x.kind) == ("new", "Paris", None, "entity")
    gone = diff(ext(paris), empty, gold=empty)
    assert gone.gone_false_positives == 1 and gone.regressions == 0
    kept = diff(ext(paris), ext(paris), gold=empty)
    assert [x.status for x in kept.extras] == ["kept"] and not kept.changed
    counts = _counted([d, gone, kept])
    assert (counts.new_hallucinations, counts.gone_hallucinations) == (1, 1)


def test_a_false_positive_kept_is_aligned_by_the_scorer_not_by_spelling() -> None:
    # fuzzy matching (the run's mode) pairs a re-spelled false positive with A's
    extra_a = Entity(name="Jane Austen", type="person")
    extra_b = Entity(name="Jane Austin", type="person")
    d = diff(ext(ADA, CB, LONDON, EMPLOYS, extra_a), ext(ADA, CB, LONDON, EMPLOYS, extra_b))
    assert [x.status for x in d.extras] == ["kept"]
    exact = diff_item(
        item_id="x",
        text=TEXT,
        gold=GOLD,
        pred_a=ext(ADA, CB, LONDON, EMPLOYS, extra_a),
        pred_b=ext(ADA, CB, LONDON, EMPLOYS, extra_b),
        config=ScoringConfig(match="exact"),
    )
    assert sorted(x.status for x in exact.extras) == ["gone", "new"]


def test_an_errored_side_is_an_empty_prediction() -> None:
    d = diff(None, GOLD)
    assert d.a_failed and not d.b_failed and d.changed
    assert d.fixed == 4 and {o.a for o in d.objects} == {"missed"}
    d = diff(GOLD, None)
    assert d.b_failed and d.broken == 4 and d.regressions == 4
    both = diff(None, None)
    assert both.a_failed and both.b_failed and not both.changed and both.broken == 0


def test_states_follow_the_scoring_alignment() -> None:
    # names shared by two gold objects: the optimum alignment, not a greedy one, decides
    gold = ext(
        Entity(name="Acme", type="organization"),
        Entity(name="Acme Corp", type="organization"),
    )
    pred = ext(Entity(name="Acme Corp.", type="organization"))
    d = diff_item(item_id="x", text="Acme Corp. and Acme", gold=gold, pred_a=pred, pred_b=gold,
                  config=CFG)  # fmt: skip
    s = score_item(item_id="x", text="Acme Corp. and Acme", gold=gold, pred=pred, config=CFG)
    right_a = {o.index for o in d.objects if o.a == "right"}
    assert right_a == {p.gold for p in s.entity_pairs if p.type_equal} == {1}
    assert [o.label for o in d.objects if o.change == "fixed"] == ["Acme"]


def test_aggregates_equal_a_hand_count() -> None:
    wrong_cb = CB.model_copy(update={"type": "organization"})
    flipped = EMPLOYS.model_copy(update={"source": "Ada Lovelace", "target": "Charles Babbage"})
    paris = Entity(name="Paris", type="location")
    diffs = [
        diff(ext(ADA, CB, EMPLOYS), GOLD),  # London fixed (location)
        diff(
            GOLD, ext(ADA, wrong_cb, LONDON, flipped)
        ),  # CB broken+retyped; employs broken+flipped
        diff(ext(ADA, wrong_cb, EMPLOYS), GOLD),  # CB fixed+retyped; London fixed
        diff(Extraction(), ext(paris), gold=Extraction()),  # new hallucination (location)
        diff(GOLD, GOLD),  # nothing
        diff(GOLD, None),  # B errored: 3 entities + 1 relationship broken
    ]
    counts = _counted(diffs)
    assert counts.items == 6 and counts.changed_items == 5
    assert counts.items_with_regressions == 3 and counts.b_failed == 1 and counts.a_failed == 0
    assert counts.by_type("entity") == {
        "location": {
            **dict.fromkeys(COUNTER_NAMES, 0),
            "fixed": 2,
            "broken": 1,
            "new_false_positives": 1,
        },
        "person": {**dict.fromkeys(COUNTER_NAMES, 0), "fixed": 1, "broken": 3, "retyped": 2},
    }
    assert counts.by_type("relationship") == {
        "employs": {**dict.fromkeys(COUNTER_NAMES, 0), "broken": 2, "flipped": 1},
    }
    totals = counts.to_json()["totals"]
    assert totals["fixed"] == 3 and totals["broken"] == 6 and totals["retyped"] == 2
    assert totals["new_false_positives"] == 1 and counts.new_hallucinations == 1
    order = sorted(diffs, key=regression_order)
    assert [d.regressions for d in order][:2] == [4, 2]


def test_counting_a_diff_says_whether_it_changed_and_sums_what_its_properties_say() -> None:
    # DiffCounts.add walks each diff once (compare counts 10,000s of changed items) and hands
    # back ``changed``, so DiffFold needs no second walk: both must agree with the properties
    wrong_cb = CB.model_copy(update={"type": "organization"})
    grounded_off = ADA.model_copy(update={"evidence": "not in the text"})
    paris = Entity(name="Paris", type="location")
    diffs = [
        diff(GOLD, GOLD),
        diff(ext(ADA, CB, EMPLOYS), GOLD),
        diff(GOLD, ext(grounded_off, wrong_cb, LONDON, EMPLOYS, paris)),
        diff(Extraction(), ext(paris), gold=Extraction()),
        diff(ext(paris), Extraction(), gold=Extraction()),
        diff(None, None),
        diff(GOLD, None),
    ]
    for d in diffs:
        counts = DiffCounts()
        assert counts.add(d) is d.changed
        assert counts.to_json()["totals"] == d.counts()
        assert counts.changed_items == int(d.changed)
        assert counts.items_with_regressions == int(d.regressions > 0)
        assert counts.new_hallucinations == (d.new_false_positives if d.gold_empty else 0)
        assert counts.gone_hallucinations == (d.gone_false_positives if d.gold_empty else 0)
    assert [d.changed for d in diffs] == [False, True, True, True, True, False, True]


def test_json_form_is_stable_and_complete() -> None:
    d = diff(ext(ADA, CB, EMPLOYS), GOLD)
    js = d.to_json()
    assert json.loads(json.dumps(js)) == js
    assert list(js) == ["item_id", "gold_empty", "a_failed", "b_failed", "counts", "objects",
                        "extras"]  # fmt: skip
    assert js["counts"] == {**dict.fromkeys(COUNTER_NAMES, 0), "fixed": 1}
    london = next(o for o in js["objects"] if o["label"] == "London")
    assert london == {
        "kind": "entity",
        "index": 2,
        "label": "London",
        "type": "location",
        "a": "missed",
        "b": "right",
        "a_pred": None,
        "b_pred": {"index": 2, "label": "London", "type": "location", "grounded": True},
        "change": "fixed",
        "retyped": False,
        "flipped": False,
        "evidence": None,
    }
    assert json.dumps(_counted([d]).to_json(), sort_keys=True) == json.dumps(
        _counted([d]).to_json(), sort_keys=True
    )
