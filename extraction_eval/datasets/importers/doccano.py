"""doccano's JSONL export: one document a line.

Two shapes, both doccano's own: sequence labelling (``{"id", "text", "label": [[start, end,
"TYPE"], ...]}``) and relation extraction (``{"id", "text", "entities": [{"id", "label",
"start_offset", "end_offset"}], "relations": [{"id", "from_id", "to_id", "type"}]}``).
JSONL needs no parser library: our line reader (``lines``) reads each line, this module
checks the shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extraction_eval.datasets.importers.common import (
    BadRecord,
    Imported,
    label,
    make_item,
    open_regular,
    relationship,
    span_entity,
)
from extraction_eval.datasets.lines import Line, Stream, decoded_lines
from extraction_eval.types import DatasetItem, Entity, Relationship


def import_doccano(path: Path) -> Imported:
    """Read by our own JSONL reader (``lines.Stream``), so a doccano line is held to the
    same rules as a line we upload: one bad line (bad bytes, NUL, deep nesting, a huge
    number, a repeated id) is one warning, and lone surrogates are repaired with a note."""
    with open_regular(path) as fh:
        lines = Stream(decoded_lines(fh), path.name, _record)
        items = list(lines)
    return Imported(items=items, warnings=lines.warnings, records=lines.lines)


def _record(line: Line) -> DatasetItem:
    return _item(line.id, line.obj)


def _item(item_id: str, obj: dict[str, Any]) -> DatasetItem:
    text = obj.get("text")
    if not isinstance(text, str):
        raise BadRecord("missing or non-string 'text'")
    entities: list[Entity] = []
    relationships: list[Relationship] = []
    if "entities" in obj:  # relation extraction
        raw_entities, raw_relations = obj.get("entities"), obj.get("relations", [])
        if not isinstance(raw_entities, list) or not isinstance(raw_relations, list):
            raise BadRecord("'entities' and 'relations' must be lists")
        by_id: dict[str, Entity] = {}
        for e in raw_entities:
            if not isinstance(e, dict):
                raise BadRecord(f"entity {e!r} is not an object")
            entity = span_entity(
                text, e.get("start_offset"), e.get("end_offset"), label(e.get("label"), "entity")
            )
            by_id[str(e.get("id"))] = entity
            entities.append(entity)
        for r in raw_relations:
            if not isinstance(r, dict):
                raise BadRecord(f"relation {r!r} is not an object")
            type_ = label(r.get("type"), "relation")
            relationships.append(relationship(by_id, r.get("from_id"), r.get("to_id"), type_))
    else:  # sequence labelling
        spans = obj.get("label", obj.get("labels", []))
        if not isinstance(spans, list):
            raise BadRecord("'label' must be a list of [start, end, label]")
        for span in spans:
            if not (isinstance(span, list) and len(span) == 3):
                raise BadRecord(f"label {span!r} is not [start, end, label]")
            entities.append(span_entity(text, span[0], span[1], label(span[2], "span")))
    return make_item(item_id, text, entities, relationships)
