"""The JSONL gold format: lenient reading with line-numbered warnings, byte-stable writing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from extraction_eval.datasets.jsonl import parse_lines, read_items, write_items
from extraction_eval.errors import UsageError
from extraction_eval.types import DatasetItem

GOOD = {
    "id": "d1",
    "text": "Ann Lee works for Acme in Oslo. Ann Lee is happy.",
    "entities": [
        {"name": "Ann Lee", "type": "Peop", "start": 0, "end": 7},
        {"name": "Acme", "type": "Org", "start": 18, "end": 22, "evidence": "works for Acme"},
        {"name": "Ann Lee", "type": "Peop", "start": 32, "end": 39},
    ],
    "relationships": [
        {"source": "Ann Lee", "type": "Work_For", "target": "Acme", "head": 0, "tail": 1},
    ],
    "meta": {"split": "test"},
    "unknown_key": [1, 2, 3],
}


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reads_shared_format_ignoring_extra_keys(tmp_path: Path) -> None:
    items, warnings = read_items(_write(tmp_path, [json.dumps(GOOD)]))
    assert warnings == []
    [item] = items
    assert (item.id, item.text, item.metadata) == ("d1", GOOD["text"], {"split": "test"})
    assert item.schema_ is None
    # names may repeat inside a document: both mentions are kept, in order
    assert [(e.name, e.start) for e in item.expected.entities] == [
        ("Ann Lee", 0),
        ("Acme", 18),
        ("Ann Lee", 32),
    ]
    assert item.expected.entities[1].evidence == "works for Acme"
    [rel] = item.expected.relationships
    assert (rel.source, rel.type, rel.target) == ("Ann Lee", "Work_For", "Acme")


def test_schema_and_metadata_keys(tmp_path: Path) -> None:
    line = dict(
        GOOD,
        schema={"entity_types": ["Peop"], "relationship_types": ["Work_For"]},
        metadata={"m": 1},
    )
    [item], _ = read_items(_write(tmp_path, [json.dumps(line)]))
    assert item.schema_ is not None and item.schema_.entity_types == ["Peop"]
    assert item.metadata == {"m": 1}  # "metadata" wins over "meta"


def test_malformed_lines_become_one_line_warnings_and_the_rest_loads(tmp_path: Path) -> None:
    lines = [
        json.dumps(GOOD),
        "{not json",
        json.dumps({"id": "no-text"}),
        "",
        json.dumps({"id": "bad-ent", "text": "x", "entities": [{"type": "Peop"}]}),
        json.dumps([1, 2]),
        json.dumps(dict(GOOD, id="d2")),
        json.dumps(dict(GOOD, id="d1")),
        json.dumps({"text": "no id"}),
        json.dumps(dict(GOOD, id="bad-schema", schema=["x"])),
    ]
    items, warnings = read_items(_write(tmp_path, lines))
    assert [i.id for i in items] == ["d1", "d2"]
    assert all("\n" not in w for w in warnings)
    assert warnings[0].startswith("data.jsonl:2: invalid JSON")
    assert warnings[1] == 'data.jsonl:3 (id no-text): missing or non-string "text"; skipped'
    assert warnings[2] == "data.jsonl:5 (id bad-ent): entities.0.name: Field required; skipped"
    assert warnings[3] == "data.jsonl:6: expected a JSON object, got list; skipped"
    assert warnings[4] == "data.jsonl:8 (id d1): duplicate id, first seen on line 1; skipped"
    assert warnings[5] == 'data.jsonl:9: missing or invalid "id"; skipped'
    assert warnings[6].startswith('data.jsonl:10 (id bad-schema): "schema" must be an object')
    assert len(warnings) == 7


def test_non_utf8_line_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n" + b'{"id": "\xff"}\n')
    items, warnings = read_items(path)
    assert [i.id for i in items] == ["d1"]
    assert warnings == ["x.jsonl:2: not UTF-8 (invalid start byte at byte 8); skipped"]


def test_integer_ids_become_strings_and_null_lists_are_empty() -> None:
    items, warnings = parse_lines([json.dumps(dict(GOOD, id=17, relationships=None))])
    assert warnings == [] and items[0].id == "17"
    assert items[0].expected.relationships == []
    _, warnings = parse_lines([json.dumps(dict(GOOD, entities={"a": 1}))])
    assert warnings == ['<input>:1 (id d1): "entities" must be a list; skipped']


def test_redocred_evidence_lists_are_read_like_the_score_command_reads_them() -> None:
    line = {
        "id": "r",
        "text": "A met B. B left.",
        "entities": [{"name": "A", "type": "PER", "mentions": [{"name": "A"}]}],
        "relationships": [
            {
                "source": "A",
                "type": "x",
                "target": "B",
                "evidence": [{"sent_id": 0, "text": "A met B."}, {"text": "B left."}],
            }
        ],
    }
    [item], warnings = parse_lines([json.dumps(line)])
    assert warnings == []
    assert item.expected.relationships[0].evidence == "A met B. … B left."


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="file not found"):
        read_items(tmp_path / "nope.jsonl")
    with pytest.raises(UsageError, match="not a file"):
        read_items(tmp_path)


def test_write_is_sorted_byte_stable_and_round_trips(tmp_path: Path) -> None:
    line = dict(GOOD, schema={"entity_types": ["Peop"], "relationship_types": []})
    items, _ = read_items(_write(tmp_path, [json.dumps(line), json.dumps(dict(GOOD, id="é"))]))
    buf = io.StringIO()
    assert write_items(items, buf) == 2
    text = buf.getvalue()
    first = json.loads(text.splitlines()[0])
    assert list(first) == sorted(first)
    assert "unknown_key" not in text and "null" not in text
    # head/tail index the entities (names repeat: "Ann Lee" twice) and round-trip
    assert first["relationships"][0]["head"] == 0 and first["relationships"][0]["tail"] == 1
    assert "mentions" not in text and "aliases" not in text  # absent: left out, never []
    assert '"é"' in text  # UTF-8 kept, not \u-escaped
    again, warnings = parse_lines(text.splitlines())
    assert warnings == [] and again == items
    buf2 = io.StringIO()
    write_items(again, buf2)
    assert buf2.getvalue() == text


def test_write_keeps_trace_links_and_status() -> None:
    item = DatasetItem(
        id="t",
        text="x",
        source_trace_id="tr",
        source_observation_id="ob",
        status="ARCHIVED",
    )
    buf = io.StringIO()
    write_items([item], buf)
    obj = json.loads(buf.getvalue())
    assert obj == {
        "id": "t",
        "text": "x",
        "entities": [],
        "relationships": [],
        "source_trace_id": "tr",
        "source_observation_id": "ob",
        "status": "ARCHIVED",
    }
    assert parse_lines([buf.getvalue()])[0] == [item]


@pytest.mark.parametrize(
    "name", ["conll04_test.jsonl", "conll04_negatives.jsonl", "redocred_dev_first100.jsonl"]
)
def test_shared_gold_files_load_completely(shared_data: Path, name: str) -> None:
    path = shared_data / name
    if not path.exists():
        pytest.skip(f"{name} not in {shared_data}")
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    items, warnings = read_items(path)
    assert warnings == []
    assert len(items) == len(raw)
    assert sum(len(i.expected.entities) for i in items) == sum(len(r["entities"]) for r in raw)
    assert sum(len(i.expected.relationships) for i in items) == sum(
        len(r["relationships"]) for r in raw
    )
    for item, r in zip(items, raw, strict=True):
        assert item.id == r["id"] and item.text == r["text"]
        assert item.metadata == r["meta"]
        for ent in item.expected.entities:
            assert ent.start is not None and item.text[ent.start : ent.end] == ent.name


def test_conll04_test_counts_match_readme(shared_data: Path) -> None:
    items, warnings = read_items(shared_data / "conll04_test.jsonl")
    assert warnings == []
    assert len(items) == 288
    assert sum(len(i.expected.entities) for i in items) == 1079
    assert sum(len(i.expected.relationships) for i in items) == 422
