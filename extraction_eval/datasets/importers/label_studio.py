"""Label Studio's JSON export (``Export → JSON``): a list of tasks.

Each task: ``{"id", "data": {"text": ...}, "annotations": [{"result": [...]}]}``; a result is
a span (``"type": "labels"``, ``value: {start, end, text, labels: [TYPE]}``) or a relation
(``"type": "relation"``, ``from_id``, ``to_id``, ``direction``, ``labels``). The first
annotation not cancelled is the gold. Label Studio's own SDK (``label-studio-sdk``) brings a
server client and dozens of dependencies to read this documented JSON, so ``json`` reads it and
this module checks the shape. ``N`` in a warning is the task's position in the list.
"""

from __future__ import annotations

import json
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
from extraction_eval.errors import UsageError
from extraction_eval.types import DatasetItem, Entity, Relationship


def import_label_studio(path: Path) -> Imported:
    try:
        tasks = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc}); give Label Studio's JSON export") from None
    if not isinstance(tasks, list):
        raise UsageError(f"{path}: Label Studio's JSON export is a list of tasks")
    out = Imported()
    for number, task in enumerate(tasks, start=1):
        out.records += 1
        item_id = None
        try:
            if not isinstance(task, dict):
                raise BadRecord("task is not an object")
            item_id = record_id(task.get("id"))
            if item_id is None:
                raise BadRecord("missing or bad task 'id'")
            out.add(_item(item_id, task), path.name, number)
        except (ValueError, TypeError) as exc:
            out.skip(path.name, number, item_id, str(exc).splitlines()[0])
    return out


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


def _item(item_id: str, task: dict[str, Any]) -> DatasetItem:
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
    return make_item(item_id, text, entities, relationships)
