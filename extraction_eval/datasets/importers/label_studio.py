"""Label Studio's JSON export (``Export → JSON``): a list of tasks.

Each task: ``{"id", "data": {"text": ...}, "annotations": [{"result": [...]}]}``; a result is
a span (``"type": "labels"``, ``value: {start, end, text, labels: [TYPE]}``) or a relation
(``"type": "relation"``, ``from_id``, ``to_id``, ``direction``, ``labels``). The first
annotation not cancelled is the gold. A relation without a label (Label Studio's default: its
labels are optional) is left out with one line, the task kept: an untyped gold relationship
could never be matched by a typed prediction. Label Studio's own SDK (``label-studio-sdk``) brings a
server client and dozens of dependencies to read this documented JSON, so ``json`` reads it and
this module checks the shape. ``N`` in a warning is the task's position in the list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from extraction_eval.datasets.importers.common import (
    BadRecord,
    Imported,
    label,
    make_item,
    read_text,
    record_id,
    relationship,
    span_entity,
)
from extraction_eval.datasets.lines import MAX_DEPTH, vetted
from extraction_eval.errors import UsageError
from extraction_eval.types import DatasetItem, Entity, Relationship

_SPACE = re.compile(r"[ \t\n\r]*")
# What decides where a value ends when it cannot be decoded: strings (skipped whole) and
# brackets; a scalar (a number past the digit limit) ends at the next delimiter.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_SCALAR = re.compile(r"[^,\]\s]+")
# JSON errors inside a string, which leave every string's bounds (and so the task's end)
# where they were: such a task is skipped; any other error refuses the file.
_INSIDE_A_STRING = ("Invalid \\escape", "Invalid \\uXXXX escape", "Invalid control character at")


def import_label_studio(path: Path) -> Imported:
    """Decoded one task at a time (never the whole list of dicts at once), each held to the
    JSONL reader's rules (``lines.vetted``): a task nested too deep, with a number past the
    digit limit or a NUL is one warning; lone surrogates are repaired, with a note."""
    out = Imported()
    for number, task, problem in _tasks(path, read_text(path)):
        out.records += 1
        item_id = None
        try:
            if task is None:
                raise BadRecord(problem)
            item_id = record_id(task.get("id"))
            if item_id is None:
                raise BadRecord("missing or bad task 'id'")
            item, notes = _item(item_id, task)
            out.add(item, path.name, number)
        except (ValueError, TypeError, RecursionError) as exc:
            out.skip(path.name, number, item_id, str(exc).splitlines()[0])
            continue
        for note in notes:  # kept, without what the note names
            out.note(path.name, number, item_id, note)
        if problem:  # kept, repaired
            out.note(path.name, number, item_id, problem)
    return out


def _tasks(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """(position, task or None, problem) per element of the top-level list."""
    decoder = json.JSONDecoder()
    pos = _skip(text, 1 if text.startswith("\ufeff") else 0)
    if text[pos : pos + 1] != "[":
        raise UsageError(f"{path}: Label Studio's JSON export is a list of tasks")
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == "]":
        pos = len(text) if not text[pos + 1 :].strip() else pos + 1
    number = 0
    while pos < len(text):
        number += 1
        try:
            task, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            if exc.msg not in _INSIDE_A_STRING:  # the list itself is broken: refused whole
                raise UsageError(
                    f"{path}: not JSON ({exc}); give Label Studio's JSON export"
                ) from None
            end = _value_end(path, text, pos, exc)
            yield number, None, f"invalid JSON ({exc.msg}, character {exc.pos - pos} of the task)"
        except RecursionError:
            end = _value_end(path, text, pos)
            yield number, None, f"nested more than {MAX_DEPTH} levels deep"
        except ValueError:  # a number past Python's digit limit for int conversion
            end = _value_end(path, text, pos)
            yield number, None, "invalid JSON (number too long)"
        else:
            obj, problem = vetted(text[pos:end], task)
            if obj is None and not isinstance(task, dict):
                problem = "task is not an object"
            yield number, obj, problem
        pos = _skip(text, end)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
        elif text[pos : pos + 1] == "]" and not text[pos + 1 :].strip():
            return
        else:
            raise UsageError(f"{path}: not JSON (expected ',' or ']' at character {pos})")


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _value_end(path: Path, text: str, pos: int, error: Exception | None = None) -> int:
    """Where the JSON value at ``pos`` ends, found without decoding it (it could not be);
    a value whose end cannot be found (a truncated file) refuses the file, naming ``error``."""
    if text[pos : pos + 1] not in ("[", "{"):
        if error is not None:  # a bad string as a whole element: the list itself is broken
            raise UsageError(f"{path}: not JSON ({error}); give Label Studio's JSON export")
        match = _SCALAR.match(text, pos)
        return match.end() if match else pos + 1
    depth = 0
    for token in _TOKEN.finditer(text, pos):
        kind = token.group()[0]
        if kind == '"':
            continue
        depth += 1 if kind in "[{" else -1
        if depth == 0:
            return token.end()
    problem = error or "a value never closes"
    raise UsageError(f"{path}: not JSON ({problem}); give Label Studio's JSON export")


def _text(data: Any) -> str:
    if not isinstance(data, dict):
        raise BadRecord("task has no 'data' object")
    if isinstance(data.get("text"), str):
        return str(data["text"])
    strings = [v for v in data.values() if isinstance(v, str)]
    if len(strings) != 1:
        raise BadRecord("task data has no 'text' (and not exactly one string field)")
    return strings[0]


def _annotation(task: dict[str, Any]) -> list[Any]:
    annotations = task.get("annotations")
    if not isinstance(annotations, list):
        raise BadRecord("task has no 'annotations' list")
    for a in annotations:
        if isinstance(a, dict) and not a.get("was_cancelled"):
            result = a.get("result", [])
            if not isinstance(result, list):
                raise BadRecord("annotation 'result' is not a list")
            return result
    raise BadRecord("no annotation (all cancelled, or none yet)")


def _item(item_id: str, task: dict[str, Any]) -> tuple[DatasetItem, list[str]]:
    """The task as an item, and a note per relation left out (no label)."""
    notes: list[str] = []
    text = _text(task.get("data"))
    result = _annotation(task)
    by_id: dict[str, Entity] = {}
    entities: list[Entity] = []
    relationships: list[Relationship] = []
    for r in result:
        if not isinstance(r, dict) or r.get("type") != "labels":
            continue
        value = r.get("value")
        if not isinstance(value, dict):
            raise BadRecord(f"span {r.get('id')!r} has no 'value'")
        labels = value.get("labels")
        if not isinstance(labels, list) or len(labels) != 1:
            raise BadRecord(f"span {r.get('id')!r}: expected one label, got {labels!r}")
        entity = span_entity(
            text,
            value.get("start"),
            value.get("end"),
            label(labels[0], f"span {r.get('id')!r}"),
            quoted=value.get("text"),
        )
        by_id[str(r.get("id"))] = entity
        entities.append(entity)
    for r in result:
        if not isinstance(r, dict) or r.get("type") != "relation":
            continue
        labels = r.get("labels") or []
        if labels == []:
            notes.append(
                f"relation {r.get('from_id')!r} -> {r.get('to_id')!r} has no label (Label"
                " Studio's default): left out, the rest of the task imported"
            )
            continue
        if not isinstance(labels, list) or len(labels) != 1:
            raise BadRecord(
                f"relation {r.get('from_id')!r} -> {r.get('to_id')!r}: expected one label,"
                f" got {labels!r}"
            )
        source, target = r.get("from_id"), r.get("to_id")
        if r.get("direction") == "left":
            source, target = target, source
        type_ = label(labels[0], "relation")
        relationships.append(relationship(by_id, source, target, type_))
    return make_item(item_id, text, entities, relationships), notes
