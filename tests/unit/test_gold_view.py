"""Gold as a run scores it: labels mapped through the schema, low-confidence ensemble gold as
ignore regions (hand-computed counts), and the warning when labels cannot meet."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from extraction_eval.evaluators import GoldView, ScoringConfig, aggregate, score_dataset_item
from extraction_eval.evaluators.gold_view import ignored_gold, mapped_gold
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, Schema

CFG = ScoringConfig(resamples=0)
TEXT = "Ann Lee works for Acme in Oslo; Bo Ek visited Rome."


def _ent(name: str, type_: str) -> Entity:
    return Entity(name=name, type=type_)


def _meta(ents: list[float], rels: list[float]) -> dict[str, Any]:
    return {
        "gold": {
            "entities": [{"confidence": c} for c in ents],
            "relationships": [{"confidence": c} for c in rels],
        }
    }


GOLD = Extraction(
    entities=[
        _ent("Ann Lee", "person"),  # 0: trusted
        _ent("Acme", "organization"),  # 1: trusted
        _ent("Oslo", "location"),  # 2: low (0.5)
        _ent("Rome", "location"),  # 3: low (0.75)
    ],
    relationships=[
        Relationship(source="Ann Lee", type="works_for", target="Acme"),  # trusted
        Relationship(source="Acme", type="located_in", target="Oslo"),  # low (0.6)
    ],
)
ITEM = DatasetItem(id="i", text=TEXT, expected=GOLD, metadata=_meta([1, 1, 0.5, 0.75], [1, 0.6]))


def test_ignore_regions_by_hand() -> None:
    """Gold: 4 entities (2 below 0.9), 2 relationships (1 below). Prediction: Ann Lee (tp),
    Oslo (aligns with ignored gold: dropped), Bo Ek (fp); Rome is not predicted (ignored, not
    a miss); Acme is missed (fn). Relationships: works_for (tp), located_in (aligned with the
    ignored one: dropped), a spurious one (fp)."""
    pred = Extraction(
        entities=[_ent("Ann Lee", "person"), _ent("Oslo", "location"), _ent("Bo Ek", "person")],
        relationships=[
            Relationship(source="Ann Lee", type="works_for", target="Acme"),
            Relationship(source="Acme", type="located_in", target="Oslo"),
            Relationship(source="Bo Ek", type="visited", target="Rome"),
        ],
    )
    s = score_dataset_item(ITEM, pred, CFG, floor=0.9)
    assert tuple(s.entities) == (1, 1, 1)  # tp Ann Lee; fp Bo Ek; fn Acme
    assert tuple(s.entities_typed) == (1, 1, 1)
    assert tuple(s.relationships) == (1, 1, 0)
    assert (s.ignored_gold, s.ignored_predictions) == (3, 2)
    # indices still point into the stored lists: Ann Lee is pred 0 / gold 0, works_for 0 / 0
    assert [(p.pred, p.gold) for p in s.entity_pairs] == [(0, 0)]
    spurious = [t for t in s.taxonomy if t.side == "pred"]
    assert {(t.kind, t.index) for t in spurious} == {("entity", 2), ("relationship", 2)}
    missed = [t for t in s.taxonomy if t.side == "gold"]
    assert {(t.kind, t.index) for t in missed} == {("entity", 1)}
    # today's behaviour (the trusted gold alone) would count Oslo and located_in as fp
    report = aggregate([s], CFG)
    assert report["entities"]["precision"] == 0.5 and report["entities"]["fp"] == 1
    assert report["ignored"] == {"gold": 3, "predictions": 2}
    assert s.to_json()["ignored"] == {"gold": 3, "predictions": 2}


def test_without_a_floor_every_gold_object_counts() -> None:
    pred = Extraction(entities=[_ent("Oslo", "location")])
    s = score_dataset_item(ITEM, pred, CFG)
    assert tuple(s.entities) == (1, 0, 3) and s.ignored_gold == s.ignored_predictions == 0
    assert "ignored" not in s.to_json()


def test_a_failed_item_misses_only_the_trusted_gold() -> None:
    s = score_dataset_item(ITEM, None, CFG, floor=0.9)
    assert s.failed and tuple(s.entities) == (0, 0, 2) and tuple(s.relationships) == (0, 0, 1)
    assert (s.ignored_gold, s.ignored_predictions) == (3, 0)


def test_gold_without_confidences_is_trusted() -> None:
    plain = ITEM.model_copy(update={"metadata": {}})
    assert len(ignored_gold(plain.expected, plain.metadata, 0.9)) == 0
    # metadata that does not line up with the objects is not trusted to drop anything
    short = ITEM.model_copy(update={"metadata": _meta([0.1], [])})
    assert len(ignored_gold(short.expected, short.metadata, 0.9)) == 0


def test_the_view_carries_the_floor_so_a_stored_run_scores_the_same() -> None:
    view = GoldView(floor=0.9)
    pred = Extraction(entities=[_ent("Oslo", "location")])
    seen = view.item(ITEM)
    assert seen.metadata["gold"]["ignore_below"] == 0.9
    assert score_dataset_item(seen, pred, CFG) == score_dataset_item(ITEM, pred, CFG, floor=0.9)
    assert GoldView.of_run({"min_gold_confidence": 0.9}) == view


def test_scoring_an_item_twice_counts_it_twice() -> None:
    pred = Extraction(entities=[_ent("Oslo", "location"), _ent("Bo Ek", "person")])
    s = score_dataset_item(ITEM, pred, CFG, floor=0.9)
    one, two = aggregate([s], CFG), aggregate([s, s], CFG)
    assert two["ignored"] == {"gold": 6, "predictions": 2}
    assert two["entities"]["precision"] == one["entities"]["precision"]


# --- labels -----------------------------------------------------------------------------


CONLL = Schema(
    entity_types=["Peop", "Org", "Loc", "Other"],
    relationship_types=["Work_For"],
    labels={"Peop": "person", "Org": "organization", "Loc": "location", "Work_For": "works_for"},
)


def test_a_schema_maps_gold_labels_and_the_asked_types() -> None:
    asked = CONLL.asked()
    assert asked.entity_types == ["person", "organization", "location", "Other"]
    assert asked.relationship_types == ["works_for"] and asked.labels == {}
    gold = Extraction(
        entities=[_ent("Ann", "peop"), _ent("X", "Other")],
        relationships=[Relationship(source="Ann", type="Work_For", target="X")],
    )
    mapped = mapped_gold(gold, CONLL)
    assert [e.type for e in mapped.entities] == ["person", "Other"]  # unmapped keeps its name
    assert mapped.relationships[0].type == "works_for"


def test_labels_serialise_only_when_present() -> None:
    assert "labels" not in Schema(entity_types=["a"]).model_dump()
    assert CONLL.model_dump()["labels"]["Peop"] == "person"


@pytest.mark.parametrize(
    "labels", [{"": "person"}, {"Peop": " "}, {"Peop": "person", "peop": "people"}]
)
def test_bad_label_maps_are_refused(labels: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Schema(labels=labels)


def test_typed_scores_with_and_without_a_label_map() -> None:
    gold = Extraction(entities=[_ent("Ann Lee", "Peop"), _ent("Acme", "Org")])
    pred = Extraction(entities=[_ent("Ann Lee", "person"), _ent("Acme", "organization")])
    raw = DatasetItem(id="c", text=TEXT, expected=gold)
    s = score_dataset_item(raw, pred, CFG)
    assert tuple(s.entities) == (2, 0, 0) and tuple(s.entities_typed) == (0, 2, 2)
    report = aggregate([s], CFG)
    assert report["label_mismatch"] == {
        "entities": {"predicted": ["organization", "person"], "gold": ["Org", "Peop"]}
    }
    mapped = GoldView(schema=CONLL).score(raw, pred, CFG)
    assert tuple(mapped.entities_typed) == (2, 0, 0)
    assert aggregate([mapped], CFG)["label_mismatch"] is None


def test_label_mismatch_also_when_types_overlap_but_typed_matches_are_none() -> None:
    gold = Extraction(entities=[_ent("Ann Lee", "person"), _ent("Acme", "Org")])
    pred = Extraction(entities=[_ent("Ann Lee", "human"), _ent("Acme", "person")])
    s = score_dataset_item(DatasetItem(id="c", text=TEXT, expected=gold), pred, CFG)
    assert s.entities_typed.tp == 0 and s.entities.tp == 2
    assert aggregate([s], CFG)["label_mismatch"] == {
        "entities": {"predicted": ["human", "person"], "gold": ["Org", "person"]}
    }


def test_relationship_labels_that_never_meet_nor_by_inverse() -> None:
    gold = Extraction(relationships=[Relationship(source="Ann", type="Work_For", target="Acme")])
    pred = Extraction(relationships=[Relationship(source="Ann", type="employed_by", target="Acme")])
    item = DatasetItem(id="r", text=TEXT, expected=gold)
    report = aggregate([score_dataset_item(item, pred, CFG)], CFG)
    assert report["label_mismatch"] == {
        "relationships": {"predicted": ["employed_by"], "gold": ["Work_For"]}
    }
    # an inverse type is a meeting: the scorer matches employs / employed_by
    inverse = Extraction(relationships=[Relationship(source="Acme", type="employs", target="Ann")])
    gold_inv = Extraction(
        relationships=[Relationship(source="Ann", type="employed_by", target="Acme")]
    )
    item_inv = DatasetItem(id="r", text=TEXT, expected=gold_inv)
    assert aggregate([score_dataset_item(item_inv, inverse, CFG)], CFG)["label_mismatch"] is None
    fixed = GoldView(schema=Schema(labels={"Work_For": "employed_by"})).score(item, pred, CFG)
    assert aggregate([fixed], CFG)["label_mismatch"] is None
    assert tuple(fixed.relationships) == (1, 0, 0)


def test_the_run_schema_replaces_the_items_and_the_dataset_schema_fills_in() -> None:
    own = Schema(entity_types=["x"])
    dataset = Schema(entity_types=["y"])
    run = Schema(entity_types=["z"])
    with_own = ITEM.model_copy(update={"schema_": own})
    assert GoldView(dataset_schema=dataset).item(ITEM).schema_ == dataset
    assert GoldView(dataset_schema=dataset).item(with_own).schema_ == own
    assert GoldView(schema=run, dataset_schema=dataset).item(with_own).schema_ == run
    assert GoldView().item(ITEM) is ITEM


def test_the_prompt_lists_the_asked_labels() -> None:
    from extraction_eval.experiments.runner import asked_item
    from extraction_eval.prompts.template import load_local_prompt

    item = DatasetItem(id="p", text=TEXT, schema=CONLL)
    messages = load_local_prompt().compile(TEXT, asked_item(item).schema_)
    prompt = "\n".join(m.content for m in messages)
    assert "person, organization, location, Other" in prompt and "Peop" not in prompt
    assert "works_for" in prompt and "Work_For" not in prompt


def test_the_diff_follows_the_stored_lists_and_ignored_predictions_are_not_fp() -> None:
    from extraction_eval.evaluators.diff import follow

    pred = Extraction(
        entities=[_ent("Ann Lee", "person"), _ent("Oslo", "location"), _ent("Bo Ek", "person")],
        relationships=[Relationship(source="Acme", type="located_in", target="Oslo")],
    )
    s = score_dataset_item(ITEM, pred, CFG, floor=0.9)
    run = follow(s)
    assert len(run.entity_state) == 4 and len(run.relationship_state) == 2
    assert run.entity_state[0] == ("right", 0)
    assert run.entity_fp == [2] and run.relationship_fp == []
    assert (s.listed("entity", "gold"), s.listed("entity", "pred")) == (4, 3)


def test_the_diff_shows_gold_below_the_floor_as_ignored_never_changed() -> None:
    """Before: such gold was followed as "missed" in both runs (and, against a run without
    the floor, a "fix" or "break" of an object the other run did not count)."""
    from extraction_eval.evaluators.diff import diff_followed, follow
    from extraction_eval.views.diff import _side_cell

    pred = Extraction(entities=[_ent("Ann Lee", "person"), _ent("Oslo", "location")])
    floored = follow(score_dataset_item(ITEM, pred, CFG, floor=0.9))
    ignored = ("ignored", None)
    assert floored.entity_state == [("right", 0), ("missed", None), ignored, ignored]
    assert floored.relationship_state == [("missed", None), ("ignored", None)]
    unfloored = follow(score_dataset_item(ITEM, pred, CFG))  # Oslo found: "right" there
    assert unfloored.entity_state[2] == ("right", 1)
    diff = diff_followed(
        item_id="i", gold=ITEM.expected, pred_a=pred, pred_b=pred,
        run_a=floored, run_b=unfloored, config=CFG,
    )  # fmt: skip
    oslo = next(o for o in diff.objects if o.kind == "entity" and o.index == 2)
    assert (oslo.a, oslo.b, oslo.change) == ("ignored", "right", None)
    assert diff.fixed == 0 and diff.broken == 0
    assert _side_cell("ignored", None, "Oslo", "location").plain == "○ ignored"
