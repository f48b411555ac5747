"""The offline baseline: real (imperfect) extractions from the text alone, quoted verbatim."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extraction_eval.pipeline.baseline import (
    BASELINE_MODEL,
    BaselinePipeline,
    extract_baseline,
    split_sentences,
)
from extraction_eval.types import DatasetItem, Extraction, Schema

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "extraction_eval" / "data" / "sample_dataset.jsonl"
CONLL_DEV = Path("/work/shared/data/conll04_dev.jsonl")


def entities(ex: Extraction) -> set[tuple[str, str]]:
    return {(e.name, e.type) for e in ex.entities}


def triples(ex: Extraction) -> set[tuple[str, str, str]]:
    return {(r.source, r.type, r.target) for r in ex.relationships}


@pytest.mark.parametrize(
    ("text", "expected_entities", "expected_relations"),
    [
        (
            "Dr. Maria Gonzalez works for Acme Corp. She was born in Madrid on March 3, 1975.",
            {
                ("Maria Gonzalez", "person"),
                ("Acme Corp.", "organization"),
                ("Madrid", "location"),
                ("March 3, 1975", "date"),
            },
            {
                ("Maria Gonzalez", "employed_by", "Acme Corp."),
                ("Maria Gonzalez", "born_in", "Madrid"),  # "She" -> the last person
            },
        ),
        (
            "Kenji Tanaka, the CEO of Horizon Robotics Inc., is married to Yuki Tanaka. "
            "Horizon Robotics is located in Osaka.",
            {
                ("Kenji Tanaka", "person"),
                ("Yuki Tanaka", "person"),
                ("Horizon Robotics Inc.", "organization"),
                ("Osaka", "location"),
            },
            {
                ("Kenji Tanaka", "employed_by", "Horizon Robotics Inc."),
                ("Horizon Robotics Inc.", "located_in", "Osaka"),  # short name resolved
            },
        ),
        (
            "Anna Schmidt and her brother Paul Schmidt live in Berlin, Germany.",
            {
                ("Anna Schmidt", "person"),
                ("Paul Schmidt", "person"),
                ("Berlin", "location"),
                ("Germany", "location"),
            },
            {
                ("Anna Schmidt", "sibling_of", "Paul Schmidt"),
                ("Paul Schmidt", "lived_in", "Berlin"),
                ("Berlin", "located_in", "Germany"),
            },
        ),
        (
            "Quillon Labs was founded by Ada Brook and Ben Carrow in 2003.",
            {
                ("Quillon Labs", "organization"),
                ("Ada Brook", "person"),
                ("Ben Carrow", "person"),
                ("2003", "date"),
            },
            {
                ("Quillon Labs", "created_by", "Ada Brook"),
                ("Quillon Labs", "created_by", "Ben Carrow"),  # coordination
            },
        ),
        (
            "Selma Ardent was born in Marrowgate and died in Port Ansel.",
            {("Selma Ardent", "person"), ("Marrowgate", "location"), ("Port Ansel", "location")},
            {
                ("Selma Ardent", "born_in", "Marrowgate"),
                ("Selma Ardent", "died_in", "Port Ansel"),  # second predicate, same subject
            },
        ),
        (
            "Nadia Ferrow is the mother of Teodor Lund. Teodor Lund owns Gullwing Hotel.",
            {
                ("Nadia Ferrow", "person"),
                ("Teodor Lund", "person"),
                ("Gullwing Hotel", "organization"),
            },
            {
                ("Nadia Ferrow", "parent_of", "Teodor Lund"),
                ("Teodor Lund", "owns", "Gullwing Hotel"),
            },
        ),
        (
            "Pellmore Bank hired Tess Marchetti, and Tess Marchetti is married to Omar Haddad.",
            {
                ("Pellmore Bank", "organization"),
                ("Tess Marchetti", "person"),
                ("Omar Haddad", "person"),
            },
            {
                ("Pellmore Bank", "employs", "Tess Marchetti"),
                ("Tess Marchetti", "married_to", "Omar Haddad"),
            },
        ),
    ],
)
def test_patterns_and_gazetteers_find_what_the_text_states(
    text: str,
    expected_entities: set[tuple[str, str]],
    expected_relations: set[tuple[str, str, str]],
) -> None:
    ex = extract_baseline(text)
    assert entities(ex) == expected_entities
    assert triples(ex) == expected_relations


def test_nothing_to_extract_gives_an_empty_extraction() -> None:
    assert extract_baseline("the rain fell quietly all afternoon.") == Extraction()
    assert extract_baseline("") == Extraction()


def test_a_list_of_places_is_not_a_chain_of_located_in() -> None:
    ex = extract_baseline("The group met delegates from Colombia, Bolivia, Ecuador and Peru.")
    assert triples(ex) == set()
    assert {name for name, kind in entities(ex) if kind == "location"} == {
        "Colombia",
        "Bolivia",
        "Ecuador",
        "Peru",
    }


def test_evidence_is_quoted_verbatim_and_offsets_point_at_the_name() -> None:
    text = (
        "Mr. Omar Haddad, a software engineer at Nimbus Labs, lives in Toronto. "
        "Nimbus Labs is based in Toronto. He joined Nimbus Labs in May 2019."
    )
    ex = extract_baseline(text)
    assert ex.entities and ex.relationships
    for e in ex.entities:
        assert e.evidence is not None and e.evidence in text
        assert e.start is not None and e.end is not None and text[e.start : e.end] == e.name
        assert e.name in e.evidence
    for r in ex.relationships:
        assert r.evidence is not None and r.evidence in text


def test_sentence_splitting_respects_abbreviations_but_not_at_sentence_ends() -> None:
    text = "Dr. Ng met Mr. Lee at Acme Inc. The talk went well. Then they left."
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "Dr. Ng met Mr. Lee at Acme Inc.",
        "The talk went well.",
        "Then they left.",
    ]


def test_schema_filters_types_and_uses_the_schemas_own_labels() -> None:
    text = "Ada Brook works for Quillon Labs in Berlin."
    ex = extract_baseline(text, Schema(entity_types=["PER", "ORG"], relationship_types=["x"]))
    assert entities(ex) == {("Ada Brook", "PER"), ("Quillon Labs", "ORG")}
    assert ex.relationships == []
    only_people = extract_baseline(text, Schema(entity_types=["person"]))
    assert entities(only_people) == {("Ada Brook", "person")}


def test_pipeline_reads_only_the_text_never_the_gold() -> None:
    item = DatasetItem(
        id="g",
        text="Ada Brook works for Quillon Labs.",
        expected=Extraction.model_validate(
            {"entities": [{"name": "Gold Only Entity", "type": "person"}]}
        ),
    )
    out = asyncio.run(BaselinePipeline().extract(item))
    assert out.extraction == extract_baseline(item.text)
    assert "Gold Only Entity" not in {e.name for e in out.extraction.entities}
    assert out.model == BASELINE_MODEL and out.attempts == 1 and not out.cache_hit


def test_output_is_deterministic() -> None:
    text = "Imogen Harrow founded Harrow & Lisle in 1923 in Vantry, Ohio."
    assert extract_baseline(text) == extract_baseline(text)
    assert ("Harrow & Lisle", "organization") in entities(extract_baseline(text))


_words = st.sampled_from(
    [
        "Ada",
        "Brook",
        "works",
        "for",
        "Acme",
        "Corp.",
        "in",
        "Paris",
        ",",
        ".",
        "the",
        "and",
        "She",
        "was",
        "born",
        "on",
        "May",
        "3",
        "1990",
        "Mr.",
        "University",
        "of",
        "'s",
        "\n",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_words, max_size=30).map(" ".join))
def test_any_text_gives_grounded_output(text: str) -> None:
    ex = extract_baseline(text)
    names = {e.name for e in ex.entities}
    for e in ex.entities:
        assert e.evidence and e.evidence in text and e.name
    for r in ex.relationships:
        assert r.evidence and r.evidence in text
        assert r.source in names and r.target in names and r.source != r.target


def _scores(path: Path, type_map: dict[str, str]) -> tuple[float, float]:
    """Micro entity F1 (exact name + type) and relationship F1, computed here by hand."""
    tp = fp = fn = rtp = rfp = rfn = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        gold = {(e["name"], type_map.get(e["type"], e["type"])) for e in doc["entities"]}
        gold_rel = {(r["source"], r["type"], r["target"]) for r in doc["relationships"]}
        ex = extract_baseline(doc["text"])
        pred = {(e.name, e.type) for e in ex.entities if e.type in set(type_map.values())}
        tp, fp, fn = tp + len(gold & pred), fp + len(pred - gold), fn + len(gold - pred)
        pr = triples(ex)
        rtp, rfp, rfn = rtp + len(gold_rel & pr), rfp + len(pr - gold_rel), rfn + len(gold_rel - pr)
    return 2 * tp / (2 * tp + fp + fn), 2 * rtp / max(1, 2 * rtp + rfp + rfn)


@pytest.mark.skipif(not SAMPLE.exists(), reason="bundled sample dataset not written yet")
def test_sample_dataset_scores_are_real_but_imperfect() -> None:
    identity = {t: t for t in ("person", "organization", "location", "date")}
    entity_f1, relation_f1 = _scores(SAMPLE, identity)
    assert 0.5 < entity_f1 < 0.99
    assert 0.2 < relation_f1 < 0.9


@pytest.mark.skipif(not CONLL_DEV.exists(), reason="shared CoNLL04 data not available")
def test_conll04_cross_check_entity_f1_is_in_a_plausible_band() -> None:
    # CoNLL04 is harder news text with its own conventions: a baseline should be far from both
    # zero and perfect. Relationship types differ, so only entities are compared.
    entity_f1, _ = _scores(CONLL_DEV, {"Peop": "person", "Org": "organization", "Loc": "location"})
    assert 0.35 < entity_f1 < 0.8


def test_of_at_the_edge_of_a_capitalised_run_does_not_crash() -> None:
    """Found by hypothesis: '3 May of Ada' left nothing before 'of' to split off."""
    out = extract_baseline("3 May of Ada")
    assert all(e.evidence and e.evidence in "3 May of Ada" for e in out.entities)
