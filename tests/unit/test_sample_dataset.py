"""The bundled sample dataset is well-formed gold: every quote, offset and endpoint checks out."""

from __future__ import annotations

import io
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.datasets.jsonl import read_items, write_items

ENTITY_TYPES = ["person", "organization", "location", "date"]
RELATIONSHIP_TYPES = [
    "employed_by",
    "employs",
    "located_in",
    "born_in",
    "married_to",
    "sibling_of",
    "member_of",
    "parent_of",
    "child_of",
    "created_by",
    "owns",
    "manages",
    "lived_in",
    "died_in",
    "colleague_of",
]

SAMPLE = Path(str(resources.files("extraction_eval").joinpath("data", "sample_dataset.jsonl")))


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]


def test_size_ids_and_loads_without_warnings(rows: list[dict[str, Any]]) -> None:
    assert 40 <= len(rows) <= 50
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    items, warnings = read_items(SAMPLE)
    assert warnings == [] and [i.id for i in items] == ids


def test_file_is_in_canonical_export_form() -> None:
    """Exporting what we read gives the same bytes, so `datasets export` diffs cleanly."""
    items, _ = read_items(SAMPLE)
    buf = io.StringIO()
    write_items(items, buf)
    assert buf.getvalue() == SAMPLE.read_text(encoding="utf-8")


def test_every_line_has_the_schema(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        assert r["schema"] == {
            "entity_types": ENTITY_TYPES,
            "relationship_types": RELATIONSHIP_TYPES,
        }, r["id"]


def test_texts_are_short(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", r["text"].strip()) if s]
        assert 1 <= len(sentences) <= 3, r["id"]
        assert len(r["text"]) <= 300, r["id"]


def test_entities_offsets_types_and_evidence(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        text = r["text"]
        for e in r["entities"]:
            assert e["type"] in ENTITY_TYPES, (r["id"], e)
            assert text[e["start"] : e["end"]] == e["name"], (r["id"], e)
            assert e["evidence"] and e["evidence"] in text, (r["id"], e)
            assert e["name"] in e["evidence"], (r["id"], e)


def test_relationships_types_endpoints_and_evidence(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        names = {e["name"] for e in r["entities"]}
        for rel in r["relationships"]:
            assert rel["type"] in RELATIONSHIP_TYPES, (r["id"], rel)
            assert rel["source"] in names and rel["target"] in names, (r["id"], rel)
            assert rel["source"] != rel["target"], (r["id"], rel)
            assert rel["evidence"] and rel["evidence"] in r["text"], (r["id"], rel)


def test_negative_space_items(rows: list[dict[str, Any]]) -> None:
    empty = [r for r in rows if not r["entities"]]
    assert 6 <= len(empty) <= 8
    assert all(not r["relationships"] for r in empty)
    # some items have entities but no relationship at all (hard negatives, negation)
    assert any(r["entities"] and not r["relationships"] for r in rows)


def test_covers_every_type_inverse_pairs_and_symmetric_types(rows: list[dict[str, Any]]) -> None:
    ent_types = {e["type"] for r in rows for e in r["entities"]}
    rel_types = {rel["type"] for r in rows for rel in r["relationships"]}
    assert ent_types == set(ENTITY_TYPES)
    assert rel_types == set(RELATIONSHIP_TYPES)
    # both phrasings of an inverse pair appear ("X works for Y" and "Y employs X")
    assert {"employed_by", "employs"} <= rel_types and {"parent_of", "child_of"} <= rel_types
    for sym in ("married_to", "sibling_of", "colleague_of"):
        assert sum(rel["type"] == sym for r in rows for rel in r["relationships"]) >= 3, sym


def test_not_copied_from_the_public_corpora(rows: list[dict[str, Any]], shared_data: Path) -> None:
    ours = {r["text"] for r in rows}
    for path in sorted(shared_data.glob("conll04_*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert json.loads(line)["text"] not in ours, path.name
