"""Evidence grounding: normalization modes, offsets in the original text, coverage."""

from __future__ import annotations

import pytest

from extraction_eval.evaluators import (
    ContextIndex,
    ScoringConfig,
    TextIndex,
    aggregate,
    item_scores,
    score_item,
)
from extraction_eval.evaluators.evidence import find_in_other_text, normalize
from extraction_eval.types import Entity, Extraction, Relationship

# Offsets by hand: "He" 0-2, "said" 3-7, “ at 8, ” at 21, "Straße" 26-32, "Nine" 33-37, "." 37.
TEXT = "He said “Hello  World” in Straße Nine."


def test_normalize() -> None:
    assert normalize("  “Hi”  ‘there’ ", "strict") == "\"Hi\"  'there'"
    assert normalize("  “Hi”\n  ‘There’ ", "relaxed") == "\"hi\" 'there'"


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
def test_verbatim_and_trimmed(mode: str) -> None:
    index = TextIndex(TEXT, mode)  # type: ignore[arg-type]
    assert index.find("said") == ((3, 7),)
    assert index.find("  said \n") == ((3, 7),)


@pytest.mark.parametrize("mode", ["strict", "relaxed"])
def test_quote_characters_are_unified(mode: str) -> None:
    spans = TextIndex(TEXT, mode).find('"Hello  World"')  # type: ignore[arg-type]
    assert spans == ((8, 22),)
    assert TEXT[8:22] == "“Hello  World”"


def test_whitespace_and_case_only_in_relaxed() -> None:
    assert TextIndex(TEXT, "strict").find('"Hello World"') is None
    assert TextIndex(TEXT, "strict").find("hello  world") is None
    assert TextIndex(TEXT, "relaxed").find('"hello world"') == ((8, 22),)


def test_relaxed_offsets_survive_casefold_expansion() -> None:
    # casefold("ß") == "ss": the normalized text is longer than the original.
    spans = TextIndex(TEXT, "relaxed").find("STRASSE   nine")
    assert spans == ((26, 37),)
    assert TEXT[26:37] == "Straße Nine"
    assert TextIndex(TEXT, "strict").find("Strasse Nine") is None


@pytest.mark.parametrize(
    ("quote", "spans"),
    [
        ("He said … in Straße", ((0, 7), (23, 32))),
        ("He said...in Straße", ((0, 7), (23, 32))),
        ("said ... Nine", ((3, 7), (33, 37))),
    ],
)
def test_elided_quote_is_grounded_part_by_part(quote: str, spans: tuple[tuple[int, int]]) -> None:
    assert TextIndex(TEXT, "strict").find(quote) == spans


def test_elided_parts_must_be_in_order_and_all_present() -> None:
    assert TextIndex(TEXT, "strict").find("in Straße … He said") is None
    assert TextIndex(TEXT, "strict").find("He said … in Paris") is None


def test_not_found_and_empty() -> None:
    index = TextIndex(TEXT, "relaxed")
    assert index.find("Goodbye") is None
    assert index.find("   ") is None
    assert index.contains("straße") and not index.contains("Berlin")
    assert not TextIndex(TEXT, "strict").contains("straße")


def test_context_index_finds_other_texts_only() -> None:
    ctx = ContextIndex(
        {"b": "Hank Scorpio works here.", "a": "Globex hired Hank Scorpio.", "c": "x"}
    )
    assert ctx.find_other("Hank Scorpio", "zzz") == "a"  # smallest id wins, whatever the order
    assert ctx.find_other("Hank Scorpio", "a") == "b"
    assert ctx.find_other("Globex", "a") is None
    assert ctx.find_other("x\x00H", "q") is None  # never across a text boundary
    assert len(ctx) == 3 and ctx["c"] == "x" and sorted(ctx) == ["a", "b", "c"]
    plain = {"b": "Hank Scorpio works here.", "a": "Globex hired Hank Scorpio."}
    assert find_in_other_text("Hank Scorpio", "zzz", plain) == "a"
    assert find_in_other_text("Hank Scorpio", "a", plain) == "b"
    assert find_in_other_text("Hank Scorpio", "a", None) is None
    assert find_in_other_text("  ", "a", plain) is None


def test_coverage_counts_every_predicted_object() -> None:
    cfg = ScoringConfig(resamples=0)
    gold = Extraction(entities=[Entity(name="Hello World", type="X")])
    pred = Extraction(
        entities=[
            Entity(name="Hello World", type="X", evidence="“Hello  World”"),  # grounded
            Entity(name="Straße", type="X", evidence="straße nine"),  # grounded (relaxed)
            Entity(name="He", type="X"),  # no evidence: not grounded
        ],
        relationships=[
            Relationship(source="He", type="said", target="Hello World", evidence="He yelled"),
        ],
    )
    s = score_item(item_id="i", text=TEXT, gold=gold, pred=pred, config=cfg)
    assert (s.with_evidence(), s.grounded(), s.predicted_objects) == (3, 2, 4)
    assert s.evidence_coverage_rate() == 2 / 4
    objects = s.to_json()["evidence"]["objects"]
    assert objects == [
        {"kind": "entity", "index": 0, "grounded": True, "spans": [[8, 22]]},
        {"kind": "entity", "index": 1, "grounded": True, "spans": [[26, 37]]},
        {"kind": "relationship", "index": 0, "grounded": False, "spans": None},
    ]
    strict = score_item(
        item_id="i",
        text=TEXT,
        gold=gold,
        pred=pred,
        config=ScoringConfig(evidence="strict", resamples=0),
    )
    assert strict.evidence_coverage_rate() == 1 / 4
    names = {sc.name: sc for sc in item_scores(s)}
    assert names["evidence_coverage_rate"].value == 0.5
    assert names["evidence_coverage_rate"].comment == "grounded=2 predicted=4"


def test_coverage_is_null_without_any_evidence() -> None:
    cfg = ScoringConfig(resamples=0)
    gold = Extraction(entities=[Entity(name="He", type="X")])
    no_ev = score_item(item_id="a", text=TEXT, gold=gold, pred=gold, config=cfg)
    assert no_ev.evidence_coverage_rate() is None
    assert "evidence_coverage_rate" not in {sc.name for sc in item_scores(no_ev)}
    report = aggregate([no_ev], cfg)
    assert report["evidence"]["evidence_coverage_rate"] is None
    assert report["macro"]["evidence_coverage_rate"] is None
    # One item with evidence makes the run-level rate defined for the whole set.
    with_ev = Extraction(entities=[Entity(name="He", type="X", evidence="He said")])
    other = score_item(item_id="b", text=TEXT, gold=gold, pred=with_ev, config=cfg)
    report = aggregate([no_ev, other], cfg)
    assert report["evidence"]["evidence_coverage_rate"] == 1 / 2  # 1 grounded of 2 objects
    assert report["evidence"]["entities"] == {
        "predicted": 2,
        "with_evidence": 1,
        "grounded": 1,
        "coverage_rate": 1 / 2,
    }
    assert report["macro"]["evidence_coverage_rate"] == 1.0  # only items where it is defined


def test_blank_evidence_counts_as_no_evidence() -> None:
    cfg = ScoringConfig(resamples=0)
    pred = Extraction(entities=[Entity(name="He", type="X", evidence="  ")])
    s = score_item(item_id="a", text=TEXT, gold=pred, pred=pred, config=cfg)
    assert s.with_evidence() == 0 and s.evidence_coverage_rate() is None
