"""The JSONL gold format of ../shared/data: read it into ``DatasetItem``s, write it back.

One document per line::

    {"id": "...", "text": "...", "entities": [...], "relationships": [...],
     "schema": {"entity_types": [...], "relationship_types": [...]},   # optional
     "metadata": {...}}                                                 # or "meta"

A malformed line becomes a one-line warning naming its line number (and id when known) and
the rest of the file still loads: one typo must not cost a 1,000-item upload. Unknown keys are
ignored (``head``/``tail`` indices, Re-DocRED ``mentions``); relationships reference entities
by name, and names may repeat within a document.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from extraction_eval.backends.base import extraction_payload
from extraction_eval.errors import UsageError
from extraction_eval.scorefile import parse_extraction
from extraction_eval.types import DatasetItem

__all__ = [
    "JOURNAL_DATASET",
    "item_to_json",
    "journal_items",
    "parse_lines",
    "read_items",
    "sample_items",
    "write_items",
]


def read_items(path: str | Path) -> tuple[list[DatasetItem], list[str]]:
    """Items of a JSONL file and one warning per skipped line. A missing file is a UsageError."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return parse_lines(fh)
    except FileNotFoundError:
        raise UsageError(f"file not found: {p}") from None
    except IsADirectoryError:
        raise UsageError(f"not a file: {p}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {p}: {exc.strerror or exc}") from None


def _bundled(filename: str) -> list[DatasetItem]:
    ref = resources.files("extraction_eval").joinpath("data", filename)
    with resources.as_file(ref) as path:
        items, warnings = read_items(path)
    if warnings:  # pragma: no cover - the bundled files are validated by tests
        raise UsageError(f"bundled dataset {filename}: {warnings[0]}")
    return items


def sample_items() -> list[DatasetItem]:
    """The bundled sample dataset (``extraction-eval``), validated by the tests."""
    return _bundled("sample_dataset.jsonl")


JOURNAL_DATASET = "journal-example"


def journal_items() -> list[DatasetItem]:
    """The bundled journal dataset (``journal-example``): observations with schema-declared
    attributes (domain, polarity, intensity, time), validated by the tests."""
    return _bundled("journal_dataset.jsonl")


def parse_lines(lines: Iterable[bytes | str]) -> tuple[list[DatasetItem], list[str]]:
    """Parse JSONL lines (bytes or text); blank lines are skipped, duplicate ids keep the first."""
    items: list[DatasetItem] = []
    warnings: list[str] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            warnings.append(f"line {lineno}: not UTF-8 ({exc.reason} at byte {exc.start})")
            continue
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            warnings.append(f"line {lineno}: invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        item_id = obj.get("id") if isinstance(obj, dict) else None
        where = f"line {lineno}" + (f" (id {item_id!r})" if isinstance(item_id, str | int) else "")
        try:
            item = _to_item(obj)
        except (ValueError, TypeError) as exc:
            warnings.append(f"{where}: {_one_line(exc)}")
            continue
        if item.id in seen:
            warnings.append(f"{where}: duplicate id, first seen on line {seen[item.id]}; skipped")
            continue
        seen[item.id] = lineno
        items.append(item)
    return items, warnings


def _to_item(obj: Any) -> DatasetItem:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    item_id = obj.get("id")
    if isinstance(item_id, bool) or not isinstance(item_id, str | int) or str(item_id) == "":
        raise ValueError("missing or invalid 'id' (a non-empty string)")
    if not isinstance(obj.get("text"), str):
        raise ValueError("missing or invalid 'text' (a string)")
    metadata = obj.get("metadata", obj.get("meta"))
    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError("'metadata' must be an object")
    schema = obj.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise ValueError("'schema' must be an object with entity_types / relationship_types")
    for key in ("entities", "relationships"):
        if obj.get(key) is not None and not isinstance(obj[key], list):
            raise ValueError(f"{key!r} must be a list")
    data: dict[str, Any] = {
        "id": str(item_id),
        "text": obj["text"],
        "schema": schema,
        # the same normalisation as `score` reads gold with, so an uploaded dataset scores
        # exactly like the file it came from (evidence lists, attribute values)
        "expected": parse_extraction(obj),
        "metadata": metadata or {},
    }
    for key in ("source_trace_id", "source_observation_id", "status"):
        if obj.get(key) is not None:
            data[key] = obj[key]
    return DatasetItem.model_validate(data)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:3]:
            loc = ".".join(str(p) for p in err["loc"] if p != "expected")
            parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
        more = exc.error_count() - len(parts)
        return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
    return " ".join(str(exc).split())


# --- writing ----------------------------------------------------------------------------------


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
