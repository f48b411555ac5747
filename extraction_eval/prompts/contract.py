"""The JSON output contract: the schema we ask models for, and the one parser for answers.

The schema is written for OpenAI strict structured outputs (every property required, no
additional properties), which is also the most portable: entity attributes are a list of
key/value pairs because strict mode cannot express a free-form map. The parser accepts both
that list and a plain object, so hand-written and user-pipeline outputs stay easy.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from extraction_eval.errors import SchemaFailure
from extraction_eval.types import Extraction, Schema

SCHEMA_NAME = "extraction"

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\n?(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def _string(enum: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string"}
    if enum:
        out["enum"] = list(enum)
    return out


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def extraction_json_schema(schema: Schema | None = None) -> dict[str, Any]:
    """JSON schema of the answer; with a ``schema``, types are constrained to its enums."""
    entity_types = list(schema.entity_types) if schema else []
    relationship_types = list(schema.relationship_types) if schema else []
    attribute = _object({"key": _string(), "value": _string()})
    entity = _object(
        {
            "name": _string(),
            "type": _string(entity_types),
            "evidence": _string(),
            "attributes": {"type": "array", "items": attribute},
        }
    )
    relationship = _object(
        {
            "source": _string(),
            "type": _string(relationship_types),
            "target": _string(),
            "evidence": _string(),
        }
    )
    return _object(
        {
            "entities": {"type": "array", "items": entity},
            "relationships": {"type": "array", "items": relationship},
        }
    )


def strip_fences(raw: str) -> str:
    """Remove one surrounding Markdown code fence (```json ... ```), which many models add."""
    match = _FENCE.match(raw)
    return match.group("body").strip() if match else raw.strip()


def _attributes(value: Any) -> Any:
    if isinstance(value, list):
        out: dict[str, str] = {}
        for pair in value:
            if not (isinstance(pair, dict) and "key" in pair and "value" in pair):
                raise SchemaFailure(f"attribute is not a {{key, value}} pair: {pair!r:.80}")
            out[str(pair["key"])] = "" if pair["value"] is None else str(pair["value"])
        return out
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if value is None:
        return {}
    return value  # let pydantic report it


def _normalise(obj: dict[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    for key in ("entities", "relationships"):
        items = out.get(key)
        if items is None:
            out[key] = []
            continue
        if not isinstance(items, list):
            raise SchemaFailure(f"'{key}' must be a list, got {type(items).__name__}")
        fixed = []
        for entry in items:
            if isinstance(entry, dict) and "attributes" in entry:
                entry = {**entry, "attributes": _attributes(entry["attributes"])}
            fixed.append(entry)
        out[key] = fixed
    return out


def coerce_extraction(value: Any) -> Extraction:
    """An ``Extraction``, a dict or a JSON string -> ``Extraction``, else ``SchemaFailure``.

    A JSON object with neither ``entities`` nor ``relationships`` is a failure, not an empty
    extraction: otherwise an off-contract answer would silently score as "found nothing".
    """
    if isinstance(value, Extraction):
        return value
    if isinstance(value, (str, bytes)):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return parse_extraction(text)
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, dict):
        value = dump()
    if not isinstance(value, dict):
        raise SchemaFailure(f"expected a JSON object, got {type(value).__name__}")
    if "entities" not in value and "relationships" not in value:
        keys = ", ".join(sorted(map(str, value))[:5]) or "none"
        raise SchemaFailure(f"object has neither 'entities' nor 'relationships' (keys: {keys})")
    try:
        return Extraction.model_validate(_normalise(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise SchemaFailure(f"not the extraction schema: {where}: {first.get('msg')}") from None


def parse_extraction(raw: str) -> Extraction:
    """Model text -> ``Extraction``; ``SchemaFailure`` carries the raw text for the item's row."""
    body = strip_fences(raw)
    if not body:
        raise SchemaFailure("empty response", raw=raw)
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise SchemaFailure(f"invalid JSON: {exc.msg} at line {exc.lineno}", raw=raw) from None
    if not isinstance(value, dict):
        raise SchemaFailure(f"expected a JSON object, got {type(value).__name__}", raw=raw)
    try:
        return coerce_extraction(value)
    except SchemaFailure as exc:
        raise SchemaFailure(str(exc), raw=raw) from None
