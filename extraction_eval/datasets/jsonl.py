"""The gold JSONL format (../shared/data, uploads, exports, ``score --gold``): read and write it.

One document per line::

    {"id": "...", "text": "...", "entities": [...], "relationships": [...],
     "schema": {"entity_types": [...], "relationship_types": [...]},   # optional
     "metadata": {...}}                                                 # or "meta"

Lines are normalised here, once (normalise at the edge), so evaluators and backends only see
the pydantic types: numeric ids become strings, a list of evidence passages (Re-DocRED) becomes
one elided quote, attribute values become strings. Entities keep ``mentions`` (Re-DocRED's
surface forms) and ``aliases``, relationships their ``head``/``tail`` indices; other keys are
ignored. Relationships reference entities by name, and names may repeat within a document.
A malformed line is one warning (see ``lines``) and the rest of the file still loads: one
typo must not cost a 1,000-item upload or a scoring run.
In gold and prediction files a non-integer offset is dropped from its object with a warning
(the object is kept).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from extraction_eval.datasets.lines import Line, Stream, check_record, parse, read, stream
from extraction_eval.types import DatasetItem, Extraction, Schema

__all__ = [
    "EVIDENCE_JOINER",
    "GoldRecord",
    "extraction_payload",
    "item_to_json",
    "parse_extraction",
    "parse_lines",
    "read_gold",
    "read_items",
    "write_items",
]

T = TypeVar("T")

# Separator used when a list of evidence passages (e.g. Re-DocRED sentences) becomes one quote;
# grounding treats "…" as an elision, so each passage is looked up on its own.
EVIDENCE_JOINER = " … "


# --- normalising one object (gold line, prediction line, dataset item) -----------------------


def _evidence(value: Any) -> Any:
    """A list of passages (strings or {"text": ...}) becomes one elided quote."""
    if isinstance(value, dict) and "text" in value:
        value = value["text"]
    if isinstance(value, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in value]
        texts = [p for p in parts if isinstance(p, str) and p.strip()]
        return EVIDENCE_JOINER.join(texts) if texts else None
    return value


def _attributes(value: Any) -> Any:
    """Scalar attribute values become strings (JSON spelling); nulls are dropped."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for k, v in value.items():
        if v is None:
            continue
        out[str(k)] = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return out


def _offset_ok(value: Any) -> bool:
    """An offset or index JSON can spell: an integer (3 or 3.0), or absent."""
    if value is None or type(value) is int:
        return True
    return isinstance(value, float) and value.is_integer()


_OFFSET_GROUPS = (("start", "end"), ("head",), ("tail",))


def _drop_bad_offsets(obj: dict[str, Any], kind: str, n: int, problems: list[str]) -> None:
    """Non-integer offsets (and head/tail indices) of one object become absent, each said
    in ``problems``: the object is kept (the offset protocols count it as without offsets).
    Cheap when all is well: this runs on every object of every gold and prediction line."""
    for keys in _OFFSET_GROUPS:
        bad = next((k for k in keys if not _offset_ok(obj.get(k))), None)
        if bad is not None:
            dropped = " and ".join(keys)
            problems.append(
                f"{_what(obj, kind, n)}: {bad} {str(obj[bad])[:40]!r} is not an integer;"
                f" {dropped} dropped"
            )
            for k in keys:
                obj[k] = None
    mentions = obj.get("mentions")
    if not isinstance(mentions, list):
        return
    for i, m in enumerate(mentions):
        if not isinstance(m, dict) or (_offset_ok(m.get("start")) and _offset_ok(m.get("end"))):
            continue
        if mentions is obj["mentions"]:
            mentions = obj["mentions"] = list(mentions)  # the caller's line stays as read
        mentions[i] = {**m, "start": None, "end": None}
        problems.append(f"{_what(obj, kind, n)} mention {i}: offsets are not integers; dropped")


def _what(obj: dict[str, Any], kind: str, n: int) -> str:
    name = obj.get("name", obj.get("source"))
    return f"{kind} {n}" + (f" ({str(name)[:60]!r})" if name is not None else "")


def _clean_objects(raw: list[Any], kind: str = "", problems: list[str] | None = None) -> list[Any]:
    out = []
    for n, obj in enumerate(raw):
        if isinstance(obj, dict):
            obj = dict(obj)
            if problems is not None:
                _drop_bad_offsets(obj, kind, n, problems)
            if "evidence" in obj:
                obj["evidence"] = _evidence(obj["evidence"])
            if "attributes" in obj:
                obj["attributes"] = _attributes(obj["attributes"])
        out.append(obj)
    return out


def parse_extraction(obj: dict[str, Any], problems: list[str] | None = None) -> Extraction:
    """The entities/relationships of a JSON object (gold or prediction) as an Extraction.

    With ``problems``, a non-integer offset or index is dropped and said there (the object
    and the line are kept); without, it fails the line as any bad value does.
    Raises ``ValueError`` (a pydantic ``ValidationError`` for a bad entity or relationship)."""
    lists: dict[str, list[Any]] = {}
    for key, kind in (("entities", "entity"), ("relationships", "relationship")):
        value = obj.get(key)
        if value is not None and not isinstance(value, list):
            raise ValueError(f'"{key}" must be a list')
        lists[key] = _clean_objects(value or [], kind, problems)
    return Extraction.model_validate(lists)


def _text(obj: dict[str, Any]) -> str:
    text = obj.get("text")
    if not isinstance(text, str):
        raise ValueError('missing or non-string "text"')
    return text


# --- gold files for `score` -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GoldRecord:
    id: str
    text: str
    extraction: Extraction
    line: int
    schema: Schema | None = None  # its attribute declarations are checked against predictions
    metadata: dict[str, Any] | None = None  # ensemble gold keeps per-object confidences here


def _gold_record(line: Line, problems: list[str] | None = None) -> GoldRecord:
    text = _text(line.obj)
    extraction = parse_extraction(line.obj, problems)
    raw_schema = line.obj.get("schema")  # a non-object schema is ignored when scoring
    schema = Schema.model_validate(raw_schema) if isinstance(raw_schema, dict) else None
    raw_meta = line.obj.get("metadata", line.obj.get("meta"))  # ../shared/data says "meta"
    metadata = raw_meta if isinstance(raw_meta, dict) else None
    return GoldRecord(line.id, text, extraction, line.number, schema, metadata)


def object_notes(
    path: Path, convert: Callable[[Line, list[str]], T]
) -> tuple[Callable[[Line], T], list[str]]:
    """``convert`` for ``lines.read`` whose per-object problems (a non-integer offset) become
    warnings ``FILE:LINE (id X): problem``: the line itself is kept."""
    notes: list[str] = []

    def each(line: Line) -> T:
        problems: list[str] = []
        record = convert(line, problems)
        notes.extend(f"{path.name}:{line.number} (id {line.id}): {p}" for p in problems)
        return record

    return each, notes


def read_gold(path: Path) -> tuple[list[GoldRecord], list[str]]:
    """Gold items ``{"id", "text", "entities", "relationships"}`` (extra keys ignored)."""
    convert, notes = object_notes(Path(path), _gold_record)
    got = read(path, convert)
    return got.records, got.warnings + notes


# --- dataset items (upload, export, the bundled datasets) -------------------------------------


def _dataset_item(line: Line) -> DatasetItem:
    obj = line.obj
    text = _text(obj)
    # the same normalisation as `score` reads gold with, so an uploaded dataset scores
    # exactly like the file it came from (evidence lists, attribute values)
    expected = parse_extraction(obj)
    check_record(text, expected)
    metadata = obj.get("metadata", obj.get("meta"))
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError('"metadata" must be an object')
    raw_schema = obj.get("schema")
    if raw_schema is not None and not isinstance(raw_schema, dict):
        raise ValueError('"schema" must be an object with entity_types / relationship_types')
    data: dict[str, Any] = {
        "id": line.id,
        "text": text,
        "schema": None if raw_schema is None else Schema.model_validate(raw_schema),
        "expected": expected,
        "metadata": metadata or {},
    }
    for key in ("source_trace_id", "source_observation_id", "status"):
        if obj.get(key) is not None:
            data[key] = obj[key]
    return DatasetItem.model_validate(data)


def read_items(path: str | Path) -> tuple[list[DatasetItem], list[str]]:
    """Items of a JSONL file and one warning per skipped line. A missing file is a UsageError."""
    got = read(path, _dataset_item)
    return got.records, got.warnings


@contextmanager
def stream_items(path: str | Path) -> Iterator[Stream[DatasetItem]]:
    """``read_items`` one line at a time (a large upload is never in memory at once); the
    stream's ``warnings`` are complete once it is exhausted. A missing file is a UsageError."""
    with stream(path, _dataset_item) as items:
        yield items


def parse_lines(
    lines: Iterable[bytes | str], source: str = "<input>"
) -> tuple[list[DatasetItem], list[str]]:
    """Parse JSONL lines (bytes or text); blank lines are skipped, duplicate ids keep the first.
    ``source`` names the lines in warnings (``read_items`` passes the file name)."""
    got = parse(lines, source, _dataset_item)
    return got.records, got.warnings


# --- writing ----------------------------------------------------------------------------------


def extraction_payload(extraction: Extraction) -> dict[str, Any]:
    """An extraction as compact JSON: absent offsets/evidence/attributes are left out.

    The one spelling of an extraction on disk: JSONL exports and the backends' stored payloads."""
    return {
        "entities": [_compact(e.model_dump(mode="json")) for e in extraction.entities],
        "relationships": [_compact(r.model_dump(mode="json")) for r in extraction.relationships],
    }


def _compact(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None and v != {}}


def item_to_json(item: DatasetItem) -> dict[str, Any]:
    """The JSONL object for one item; optional keys only when they carry something."""
    obj: dict[str, Any] = {"id": item.id, "text": item.text, **extraction_payload(item.expected)}
    if item.schema_ is not None:
        obj["schema"] = item.schema_.model_dump(mode="json")
    if item.metadata:
        obj["metadata"] = item.metadata
    if item.source_trace_id is not None:
        obj["source_trace_id"] = item.source_trace_id
    if item.source_observation_id is not None:
        obj["source_observation_id"] = item.source_observation_id
    if item.status != "ACTIVE":
        obj["status"] = item.status
    return obj


def write_items(items: Sequence[DatasetItem] | Iterable[DatasetItem], fp: TextIO) -> int:
    """Write one sorted-key JSON line per item (byte-stable: same items, same bytes)."""
    n = 0
    for item in items:
        fp.write(json.dumps(item_to_json(item), sort_keys=True, ensure_ascii=False) + "\n")
        n += 1
    return n
