"""The JSON output contract: the schema we ask models for, and the one parser for answers.

The schema is written for OpenAI strict structured outputs (every property required, no
additional properties), which is also the most portable: entity attributes are a list of
key/value pairs because strict mode cannot express a free-form map. The parser accepts both
that list and a plain object, so hand-written and user-pipeline outputs stay easy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from extraction_eval.errors import SchemaFailure
from extraction_eval.prompts.replies import read_json_reply, strict_refusal
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


def _pair(key: str | None = None, values: list[str] | None = None) -> dict[str, Any]:
    """One attribute ``{key, value}``; with a declaration, both are enums."""
    return _object({"key": _string([key] if key else None), "value": _string(values)})


def _attribute_list(declared: dict[str, list[str]] | None) -> dict[str, Any]:
    """Free pairs, or for a declared type one pair shape per key (anyOf when several)."""
    if declared is None:
        return {"type": "array", "items": _pair()}
    pairs = [_pair(key, list(values)) for key, values in declared.items()]
    return {"type": "array", "items": pairs[0] if len(pairs) == 1 else {"anyOf": pairs}}


def _variants(
    types: list[str],
    declarations: dict[str, dict[str, list[str]]],
    build: Callable[[dict[str, Any], dict[str, Any] | None], dict[str, Any]],
    *,
    free_attributes: bool,
) -> dict[str, Any]:
    """The object schema for one kind: unchanged without declarations; otherwise one variant
    per declared type (type fixed, attributes closed) plus one for the remaining types."""
    if not declarations:
        return build(_string(types), _attribute_list(None) if free_attributes else None)
    variants = [
        build(_string([name]), _attribute_list(keys)) for name, keys in declarations.items()
    ]
    declared = {" ".join(name.casefold().split()) for name in declarations}
    rest = [t for t in types if " ".join(t.casefold().split()) not in declared]
    if rest or not types:  # open types: anything else keeps free-form attributes
        variants.append(build(_string(rest), _attribute_list(None)))
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def extraction_json_schema(schema: Schema | None = None) -> dict[str, Any]:
    """JSON schema of the answer; with a ``schema``, types are constrained to its enums and
    declared attributes to their keys and allowed values.

    Strict mode allows no free-form map and requires every property, so declared attributes
    stay ``{key, value}`` pairs whose key and value are enums, and a type with declarations
    gets its own object variant (``anyOf``) fixing its type and its attribute pairs.
    """
    entity_types = list(schema.entity_types) if schema else []
    relationship_types = list(schema.relationship_types) if schema else []

    def entity(type_: dict[str, Any], attributes: dict[str, Any] | None) -> dict[str, Any]:
        return _object(
            {"name": _string(), "type": type_, "evidence": _string(), "attributes": attributes}
        )

    def relationship(type_: dict[str, Any], attributes: dict[str, Any] | None) -> dict[str, Any]:
        properties: dict[str, Any] = {
            "source": _string(),
            "type": type_,
            "target": _string(),
            "evidence": _string(),
        }
        if attributes is not None:
            properties["attributes"] = attributes
        return _object(properties)

    return _object(
        {
            "entities": {
                "type": "array",
                "items": _variants(
                    entity_types,
                    schema.attributes if schema else {},
                    entity,
                    free_attributes=True,
                ),
            },
            "relationships": {
                "type": "array",
                "items": _variants(
                    relationship_types,
                    schema.relationship_attributes if schema else {},
                    relationship,
                    free_attributes=False,
                ),
            },
        }
    )


def strip_fences(raw: str) -> str:
    """Remove one surrounding Markdown code fence (```json ... ```), which many models add.
    (Replies are read by ``read_extraction``, which also records the repair.)"""
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
    """Model text -> ``Extraction``, read leniently; ``SchemaFailure`` carries the raw text."""
    return read_extraction(raw)[0]


def read_extraction(raw: str, *, strict: bool = False) -> tuple[Extraction, tuple[str, ...]]:
    """Model text -> ``Extraction`` and the repairs it took (``prompts/replies.py``: fence,
    prose, wrapper). ``strict``: a reply that needed any is a ``SchemaFailure`` instead.
    Every failure carries the raw text for the item's row."""
    try:
        reply = read_json_reply(raw)
        if strict and reply.repairs:
            raise SchemaFailure(strict_refusal(reply.repairs))
        return coerce_extraction(reply.value), reply.repairs
    except SchemaFailure as exc:
        raise SchemaFailure(str(exc), raw=raw) from None
