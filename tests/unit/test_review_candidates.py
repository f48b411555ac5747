"""Review candidates (likely gold gaps, most likely first) and what a verdict does to gold:
``evaluators.review``, pure."""

from __future__ import annotations

from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.gold_view import score_dataset_item
from extraction_eval.evaluators.review import (
    Candidate,
    Decision,
    ItemView,
    JudgedPair,
    apply_decisions,
    safe_comment,
    select_candidates,
)
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, TaxonomyTag

TEXT = "Ada Lovelace met Charles Babbage in London. Paris is far."


def _item(gold: list[Entity], meta: dict[str, object] | None = None) -> DatasetItem:
    return DatasetItem(
        id="i1",
        text=TEXT,
        expected=Extraction(entities=gold),
        metadata={"gold": meta} if meta else {},
    )


def _view(item: DatasetItem, pred: list[Entity], **kw: object) -> ItemView:
    out = Extraction(entities=pred)
    scored = score_dataset_item(item, out, ScoringConfig())
    tags = [TaxonomyTag(**t.to_json()) for t in scored.taxonomy]  # type: ignore[arg-type]
    return ItemView(dataset="d", item=item, output=out, taxonomy=tags, trace_id="t1", **kw)  # type: ignore[arg-type]


ADA = Entity(name="Ada Lovelace", type="Peop", evidence="Ada Lovelace met Charles Babbage")
BABBAGE = Entity(name="Charles Babbage", type="Peop")
LONDON = Entity(name="London", type="Loc")


def test_a_grounded_unmatched_prediction_is_a_candidate_and_an_ungrounded_one_is_not() -> None:
    item = _item([BABBAGE])
    ghost = Entity(name="Grace Hopper", type="Peop")  # not in the text: ungrounded, not a gap
    sel = select_candidates([_view(item, [ADA, BABBAGE, ghost, LONDON])])
    names = [c.obj.name for c in sel.candidates]  # type: ignore[union-attr]
    assert names == ["Ada Lovelace", "London"]  # with evidence found first, then a name only
    first = sel.candidates[0]
    assert first.kind == "grounded_fp" and first.trace_id == "t1"
    assert first.question == "is 'Ada Lovelace' (Peop) an entity the gold misses?"
    assert sel.found == {"grounded_fp": 2}


def test_misses_on_weak_gold_come_after_grounded_false_positives_lowest_confidence_first() -> None:
    meta = {
        "entities": [{"confidence": 1.0}, {"confidence": 0.75}, {"confidence": 0.5}],
        "relationships": [],
    }
    item = _item([BABBAGE, LONDON, ADA], meta)
    paris = Entity(name="Paris", type="Loc")
    sel = select_candidates([_view(item, [paris])])
    got = [(c.kind, c.obj.name, c.confidence) for c in sel.candidates]  # type: ignore[union-attr]
    # Babbage is missed too but its confidence is 1: the gold is sure, nothing to ask
    assert got == [
        ("grounded_fp", "Paris", None),
        ("weak_gold_miss", "Ada Lovelace", 0.5),
        ("weak_gold_miss", "London", 0.75),
    ]
    assert "is it really in the text?" in sel.candidates[1].question
    only = select_candidates([_view(item, [paris])], kinds=["weak_gold_miss"], limit=1)
    assert [c.obj.name for c in only.candidates] == ["Ada Lovelace"]  # type: ignore[union-attr]
    assert only.held_back == 1


def test_judge_disagreements_are_a_plug_in_kind_empty_without_judged_pairs() -> None:
    item = _item([BABBAGE])
    assert select_candidates([_view(item, [ADA])], kinds=["judge_disagreement"]).candidates == []
    judged = [JudgedPair("entity", 0, judge_match=True), JudgedPair("entity", 1, False)]
    view = _view(item, [ADA, LONDON], judged=judged)
    sel = select_candidates([view], kinds=["judge_disagreement"])
    assert [c.obj.name for c in sel.candidates] == ["Ada Lovelace"]  # type: ignore[union-attr]


def test_the_same_object_found_again_is_one_candidate_with_a_stable_key() -> None:
    item = _item([BABBAGE])
    a = select_candidates([_view(item, [ADA]), _view(item, [ADA])]).candidates
    b = select_candidates([_view(item, [ADA])]).candidates
    assert len(a) == 1 and a[0].key == b[0].key
    assert Candidate.from_json(a[0].to_json()).key == a[0].key


def test_verdicts_add_remove_and_confirm_keeping_ensemble_metadata_lined_up() -> None:
    meta = {"entities": [{"confidence": 1.0}, {"confidence": 0.5}], "relationships": []}
    item = _item([BABBAGE, LONDON], meta)
    sel = select_candidates([_view(item, [ADA])])
    fp, miss = sel.candidates
    decisions = [
        Decision(fp, "add_to_gold", "rev", "in the text"),
        Decision(miss, "remove_from_gold"),
    ]
    new, problems, done = apply_decisions(item, decisions)
    assert problems == [] and done == decisions
    assert [e.name for e in new.expected.entities] == ["Charles Babbage", "Ada Lovelace"]
    ents = new.metadata["gold"]["entities"]
    assert [e["confidence"] for e in ents] == [1.0, 1.0]
    assert ents[1]["source"] == "review" and "by rev: in the text" in ents[1]["reason"]
    assert new.metadata["review"]["human_verified"] is True
    assert item.expected.entities == [BABBAGE, LONDON]  # the input is never changed

    # applied again: nothing more changes (idempotent); removing what is gone is one line
    again, problems, _ = apply_decisions(new, [Decision(fp, "add_to_gold")])
    assert again.expected == new.expected and problems == []
    _, problems, done = apply_decisions(new, [Decision(miss, "remove_from_gold")])
    assert done == [] and (
        len(problems) == 1 and "'London' (Loc)" in problems[0] and "not in the gold" in problems[0]
    )

    # confirmed gold object: confidence 1; unsure / prediction_wrong on a prediction: no change
    kept, _, done = apply_decisions(
        item, [Decision(miss, "prediction_wrong"), Decision(fp, "unsure")]
    )
    assert [d.verdict for d in done] == ["prediction_wrong"]
    assert kept.expected == item.expected
    assert kept.metadata["gold"]["entities"][1]["confidence"] == 1.0


def test_a_comment_with_control_characters_or_a_secret_becomes_one_safe_line() -> None:
    secret = "sk-lf-0123456789abcdef0123"
    text, notes = safe_comment(f"looks right\x1b[31m\nkey {secret}", [secret])
    assert text is not None and "\x1b" not in text and "\n" not in text
    assert secret not in text and "***" in text
    assert notes == ["control characters replaced", "a secret-looking value masked"]
    assert safe_comment("fine", []) == ("fine", [])


def test_an_entity_comes_before_a_relationship_that_may_rest_on_it() -> None:
    item = _item([BABBAGE])
    pred = Extraction(
        entities=[ADA, BABBAGE],
        relationships=[
            Relationship(
                source="Ada Lovelace",
                type="knows",
                target="Charles Babbage",
                evidence="Ada Lovelace met Charles Babbage",
            )
        ],
    )
    scored = score_dataset_item(item, pred, ScoringConfig())
    tags = [TaxonomyTag(**t.to_json()) for t in scored.taxonomy]  # type: ignore[arg-type]
    view = ItemView(dataset="d", item=item, output=pred, taxonomy=tags)
    rel, ent = select_candidates([view]).candidates[::-1]
    assert ent.object_kind == "entity" and rel.object_kind == "relationship"
    assert rel.question == (
        "is ('Ada Lovelace', knows, 'Charles Babbage') a relationship the gold misses?"
    )
