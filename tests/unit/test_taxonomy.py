"""Failure taxonomy: one hand-built case per category, plus the precedence between them."""

from __future__ import annotations

from collections.abc import Mapping

from extraction_eval.evaluators import CATEGORIES, ScoringConfig, score_item
from extraction_eval.types import Entity, Extraction, Relationship

CFG = ScoringConfig(resamples=0)
Row = tuple[str, str, str, int, tuple[int, ...], str | None]


def E(name: str, type_: str = "PER", evidence: str | None = None) -> Entity:
    return Entity(name=name, type=type_, evidence=evidence)


def R(source: str, type_: str, target: str, evidence: str | None = None) -> Relationship:
    return Relationship(source=source, type=type_, target=target, evidence=evidence)


def tax(
    text: str,
    gold: Extraction,
    pred: Extraction,
    context: Mapping[str, str] | None = None,
) -> list[Row]:
    s = score_item(item_id="me", text=text, gold=gold, pred=pred, config=CFG, context_texts=context)
    return [(t.category, t.kind, t.side, t.index, t.related, t.source_id) for t in s.taxonomy]


def test_category_list() -> None:
    assert set(CATEGORIES) == {
        "missed",
        "spurious",
        "wrong_type",
        "truncated",
        "merged",
        "hallucinated_on_empty",
        "ungrounded",
        "context_bleed",
        "reversed",
        "wrong_relation_type",
        "hallucinated_argument",
    }


def test_clean_match_has_no_entry() -> None:
    gold = Extraction(entities=[E("Ann")], relationships=[R("Ann", "knows", "Bob")])
    assert tax("Ann knows Bob", gold, gold) == []


def test_missed_and_spurious() -> None:
    gold = Extraction(entities=[E("Ann"), E("Bob")])
    pred = Extraction(entities=[E("Ann"), E("knows", "VERB")])
    assert tax("Ann knows Bob", gold, pred) == [
        ("missed", "entity", "gold", 1, (), None),
        ("spurious", "entity", "pred", 1, (), None),
    ]


def test_wrong_type() -> None:
    gold = Extraction(entities=[E("Acme", "ORG")])
    pred = Extraction(entities=[E("Acme", "LOC")])
    assert tax("Acme", gold, pred) == [("wrong_type", "entity", "pred", 0, (0,), None)]


def test_truncated_only_against_unmatched_gold() -> None:
    gold = Extraction(entities=[E("Springfield plant", "FAC"), E("Peter Gibbons")])
    pred = Extraction(entities=[E("plant", "FAC"), E("Peter Gibbons"), E("Peter")])
    text = "Peter Gibbons runs the Springfield plant."
    assert tax(text, gold, pred) == [
        ("missed", "entity", "gold", 0, (), None),
        ("truncated", "entity", "pred", 0, (0,), None),
        ("spurious", "entity", "pred", 2, (), None),  # "Peter Gibbons" is matched: not truncated
    ]


def test_merged_needs_two_unmatched_gold_names() -> None:
    text = "Initech moved from Austin to Dallas."
    two = Extraction(entities=[E("Austin", "LOC"), E("Dallas", "LOC")])
    pred = Extraction(entities=[E("Austin to Dallas", "LOC")])
    assert tax(text, two, pred) == [
        ("missed", "entity", "gold", 0, (), None),
        ("missed", "entity", "gold", 1, (), None),
        ("merged", "entity", "pred", 0, (0, 1), None),
    ]
    one = Extraction(entities=[E("Austin", "LOC")])
    assert tax(text, one, pred)[-1] == ("spurious", "entity", "pred", 0, (), None)


def test_hallucinated_on_empty_takes_precedence() -> None:
    pred = Extraction(
        entities=[E("Tuesday", "DATE"), E("Hank Scorpio")],
        relationships=[R("Hank Scorpio", "likes", "Tuesday")],
    )
    rows = tax("It rained on Tuesday.", Extraction(), pred, {"other": "Hank Scorpio"})
    assert rows == [
        ("hallucinated_on_empty", "entity", "pred", 0, (), None),
        ("hallucinated_on_empty", "entity", "pred", 1, (), None),
        ("hallucinated_on_empty", "relationship", "pred", 0, (), None),
    ]


def test_ungrounded_name_and_evidence() -> None:
    gold = Extraction(entities=[E("shipping", "ASPECT")])
    pred = Extraction(
        entities=[E("Shipping", "ASPECT", evidence="Shipping was slow"), E("Lumbergh")]
    )
    assert tax("Shipping was fast.", gold, pred) == [
        ("ungrounded", "entity", "pred", 0, (), None),  # matched, but its quote is not in the text
        ("ungrounded", "entity", "pred", 1, (), None),  # name not in the text
    ]


def test_context_bleed_names_the_other_item() -> None:
    gold = Extraction(entities=[E("Initech", "ORG")])
    pred = Extraction(entities=[E("Initech", "ORG"), E("Hank Scorpio")])
    context = {"me": "Initech moved.", "ex-missing": "Globex hired Hank Scorpio."}
    assert tax("Initech moved.", gold, pred, context) == [
        ("context_bleed", "entity", "pred", 1, (), "ex-missing")
    ]
    # Without the other texts it is only ungrounded.
    assert tax("Initech moved.", gold, pred)[0][0] == "ungrounded"


def test_reversed_same_type_swapped_or_inverse_type_in_place() -> None:
    text = "Marie was born in Warsaw."
    gold = Extraction(relationships=[R("Marie", "born_in", "Warsaw")])
    swapped = Extraction(relationships=[R("Warsaw", "born_in", "Marie")])
    assert tax(text, gold, swapped) == [
        ("missed", "relationship", "gold", 0, (), None),
        ("reversed", "relationship", "pred", 0, (0,), None),
    ]
    inverse_in_place = Extraction(relationships=[R("Marie", "birthplace_of", "Warsaw")])
    assert tax(text, gold, inverse_in_place)[1] == (
        "reversed",
        "relationship",
        "pred",
        0,
        (0,),
        None,
    )


def test_symmetric_swap_is_a_match_not_reversed() -> None:
    gold = Extraction(relationships=[R("Marie", "married_to", "Pierre")])
    pred = Extraction(relationships=[R("Pierre", "married_to", "Marie")])
    assert tax("Marie married Pierre.", gold, pred) == []


def test_wrong_relation_type_either_orientation() -> None:
    text = "Initech moved to Dallas."
    gold = Extraction(relationships=[R("Initech", "located_in", "Dallas")])
    for pred_rel in (R("Initech", "based_in", "Dallas"), R("Dallas", "hosts", "Initech")):
        assert tax(text, gold, Extraction(relationships=[pred_rel]))[1] == (
            "wrong_relation_type",
            "relationship",
            "pred",
            0,
            (0,),
            None,
        )


def test_hallucinated_argument_vs_ungrounded_vs_bleed() -> None:
    text = "Peter left Initech."
    gold = Extraction(
        entities=[E("Peter"), E("Initech", "ORG"), E("Big Blue", "ORG")],
        relationships=[R("Peter", "employed_by", "Initech")],
    )
    pred = Extraction(
        entities=list(gold.entities),
        relationships=[
            R("Peter", "employed_by", "Initech"),
            R("Peter", "employed_by", "Bill Lumbergh"),  # neither gold entity nor in text
            R("Peter", "likes", "Big Blue"),  # a gold entity, though not in the text
            R("Peter", "knows", "Hank Scorpio"),  # verbatim in another item's text
            R("Peter", "left", "Initech", evidence="Peter quit"),  # in text, quote is not
            R("Peter", "visited", "Initech"),  # in text, nothing else wrong
        ],
    )
    rows = tax(text, gold, pred, {"other": "Globex hired Hank Scorpio."})
    assert [(r[0], r[3], r[5]) for r in rows] == [
        ("hallucinated_argument", 1, None),
        ("ungrounded", 2, None),
        ("context_bleed", 3, "other"),
        ("ungrounded", 4, None),
        ("spurious", 5, None),
    ]


def test_taxonomy_json_and_counts() -> None:
    gold = Extraction(entities=[E("Acme", "ORG"), E("Ann")])
    pred = Extraction(entities=[E("Acme", "LOC")])
    s = score_item(item_id="x", text="Acme hired Ann", gold=gold, pred=pred, config=CFG)
    assert [t.to_json() for t in s.taxonomy] == [
        {"category": "missed", "kind": "entity", "side": "gold", "index": 1, "label": "Ann"},
        {
            "category": "wrong_type",
            "kind": "entity",
            "side": "pred",
            "index": 0,
            "label": "Acme",
            "related": [0],
        },
    ]
    counts = s.taxonomy_counts()
    assert counts["missed"] == 1 and counts["wrong_type"] == 1
    assert sum(counts.values()) == 2 and set(counts) == set(CATEGORIES)
