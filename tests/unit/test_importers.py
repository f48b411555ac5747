"""Importers from annotation tools: small fixtures in each tool's real export shape
(tests/data/importers), bad records named one line each, and every import round-tripped
through ``score`` (gold against itself: F1 1, every object matched to itself by offsets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from extraction_eval.analysis.score_files import score_files
from extraction_eval.datasets.importers import FORMATS, Imported, import_dataset
from extraction_eval.datasets.jsonl import write_items
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.evaluators import ScoringConfig

DATA = Path(__file__).resolve().parents[1] / "data" / "importers"

CASES = {
    "label-studio": (DATA / "label_studio.json", ["101", "102"]),
    "doccano": (DATA / "doccano_relations.jsonl", ["7", "8"]),
    "brat": (DATA / "brat", ["doc1", "doc2"]),
    "conll": (DATA / "conll2003.txt", ["conll2003-1", "conll2003-2"]),
}


def _check_offsets(imported: Imported) -> None:
    for item in imported.items:
        for e in item.expected.entities:
            if e.start is not None and e.end is not None:
                assert item.text[e.start : e.end] == e.name == e.evidence


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_imports_its_good_records(fmt: str) -> None:
    path, ids = CASES[fmt]
    imported = import_dataset(path, fmt)
    assert [i.id for i in imported.items] == ids
    _check_offsets(imported)


def test_label_studio_spans_relations_and_a_bad_task() -> None:
    imported = import_dataset(CASES["label-studio"][0], "label-studio")
    first = imported.items[0]
    assert [(e.name, e.type, e.start, e.end) for e in first.expected.entities] == [
        ("Mara Velloso", "Person", 0, 12),
        ("Kestrel Labs", "Organization", 20, 32),
        ("Port Ansel", "Location", 36, 46),
    ]
    # a "left" relation points from its to_id to its from_id
    assert [(r.source, r.type, r.target) for r in first.expected.relationships] == [
        ("Mara Velloso", "works_for", "Kestrel Labs"),
        ("Kestrel Labs", "based_in", "Port Ansel"),
    ]
    assert imported.records == 3
    assert imported.warnings == [
        "label_studio.json:3 (id 103): span 0-11 is 'Ilse Brandt' in the text but 'Ilse Brand'"
        " in the file; skipped"
    ]


def test_label_studio_relation_without_a_label_is_left_out_and_the_task_kept(
    tmp_path: Path,
) -> None:
    """Label Studio's relations have no label by default (``"labels": []``, or no key): the
    relation is left out with one line, the task's spans and labelled relation imported."""
    import json

    def span(sid: str, start: int, end: int, text: str, kind: str) -> dict[str, object]:
        value = {"start": start, "end": end, "text": text, "labels": [kind]}
        return {"id": sid, "type": "labels", "value": value}

    text = "Ann Lee works for Acme in Oslo."
    result = [
        span("s1", 0, 7, "Ann Lee", "Person"),
        span("s2", 18, 22, "Acme", "Organization"),
        span("s3", 26, 30, "Oslo", "Location"),
        {"type": "relation", "from_id": "s1", "to_id": "s2", "direction": "right", "labels": []},
        {"type": "relation", "from_id": "s2", "to_id": "s3", "direction": "right"},
        {"type": "relation", "from_id": "s1", "to_id": "s2", "labels": ["works_for"]},
    ]
    task = {"id": 7, "data": {"text": text}, "annotations": [{"result": result}]}
    path = tmp_path / "ls.json"
    path.write_text(json.dumps([task]))
    imported = import_dataset(path, "label-studio")
    assert [i.id for i in imported.items] == ["7"]
    item = imported.items[0]
    assert [e.name for e in item.expected.entities] == ["Ann Lee", "Acme", "Oslo"]
    assert [(r.source, r.type, r.target) for r in item.expected.relationships] == [
        ("Ann Lee", "works_for", "Acme")
    ]
    assert imported.warnings == [
        f"ls.json:1 (id 7): relation {a!r} -> {b!r} has no label (Label Studio's default):"
        " left out, the rest of the task imported"
        for a, b in (("s1", "s2"), ("s2", "s3"))
    ]


def test_doccano_both_export_shapes() -> None:
    rel = import_dataset(DATA / "doccano_relations.jsonl", "doccano")
    assert [(r.source, r.type, r.target) for r in rel.items[0].expected.relationships] == [
        ("Tomas Eriksen", "chairs", "Norrvik Rowing Club")
    ]
    assert rel.warnings[0] == (
        "doccano_relations.jsonl:3 (id 9): span 16-99 is outside the text (length 30); skipped"
    )
    # our JSONL reader's rules: a line that is not JSON is named by the id it still shows
    assert rel.warnings[1].startswith("doccano_relations.jsonl:4 (id 10): invalid JSON")
    assert rel.warnings[1].endswith("; skipped") and len(rel.warnings) == 2
    spans = import_dataset(DATA / "doccano_spans.jsonl", "doccano")
    assert [(e.name, e.type) for e in spans.items[0].expected.entities] == [
        ("Tomas Eriksen", "PER"),
        ("Norrvik Rowing Club", "ORG"),
    ]
    assert spans.warnings == []


def test_brat_entities_relations_attributes_and_what_is_reported() -> None:
    imported = import_dataset(DATA / "brat", "brat")
    doc1, doc2 = imported.items
    assert doc1.expected.entities[0].attributes == {"Confirmed": "true"}
    assert [(r.source, r.type, r.target) for r in doc1.expected.relationships] == [
        ("Anja Holm", "founded", "Tidewater Press"),
        ("Tidewater Press", "located_in", "Ekholm"),
    ]
    # a discontinuous span is imported by its text, without offsets, and reported
    assert doc2.expected.entities[1].model_dump(exclude_defaults=True) == {
        "name": "Vestby Kalmsund",
        "type": "Location",
    }
    assert imported.warnings == [
        "doc1.ann:1 (id doc1): lines not imported (not entities or relations): 1 #",
        "doc2.ann:2 (id doc2): T2: discontinuous span (11-17;22-30) imported as 'Vestby"
        " Kalmsund' without offsets",
        "doc3.ann:2 (id doc3): bad relation line: The referenced entity T9 doesn't exist; skipped",
    ]


def test_conll_documents_iob1_and_a_bad_tag() -> None:
    imported = import_dataset(DATA / "conll2003.txt", "conll")
    first = imported.items[0]
    assert first.text == "Greta Lund visited Orsa .\nOrsa Motors hired her ."
    assert [(e.name, e.type) for e in first.expected.entities] == [
        ("Greta Lund", "PER"),
        ("Orsa", "LOC"),
        ("Orsa Motors", "ORG"),
    ]
    assert imported.warnings == [
        "conll2003.txt:26 (id conll2003-3): expected 'TOKEN ... TAG' with a BIO tag, got"
        " 'Ula NNP B-NP X-PER'; skipped"
    ]


def test_conll_without_docstart_makes_an_item_per_sentence(tmp_path: Path) -> None:
    f = tmp_path / "s.conll"
    f.write_text("Ann B-PER\nran O\n\nBo B-PER\nEk I-PER\nB-PER B-PER\n", encoding="utf-8")
    imported = import_dataset(f, "conll")
    assert [i.text for i in imported.items] == ["Ann ran", "Bo Ek B-PER"]
    assert [e.name for e in imported.items[1].expected.entities] == ["Bo Ek", "B-PER"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_import_scores_perfectly_against_itself(fmt: str, tmp_path: Path) -> None:
    imported = import_dataset(CASES[fmt][0], fmt)
    gold = tmp_path / "gold.jsonl"
    with gold.open("w", encoding="utf-8") as fh:
        write_items(imported.items, fh)
    scored = score_files(gold, gold, ScoringConfig(match="exact", resamples=0))
    r = scored.report
    for block in ("entities", "entities_typed", "relationships"):
        assert r[block]["fn"] == r[block]["fp"] == 0
        assert r[block]["f1"] == 1.0
    for item, s in zip(imported.items, scored.items, strict=True):
        ents = item.expected.entities
        assert len(s.entity_pairs) == len(ents)
        for p in s.entity_pairs:  # matched to itself: same offsets
            assert (ents[p.pred].start, ents[p.pred].end) == (ents[p.gold].start, ents[p.gold].end)


def test_an_unknown_format_and_missing_input() -> None:
    with pytest.raises(InvalidValue):
        import_dataset(DATA / "label_studio.json", "spacy")
    with pytest.raises(UsageError):
        import_dataset(DATA / "label_studio.json", "brat")  # a file, not a folder
    with pytest.raises(UsageError):
        import_dataset(DATA / "doccano_spans.jsonl", "label-studio")  # not one JSON list
