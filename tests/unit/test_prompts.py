"""The local prompt template, its LangFuse-compatible compile, and the JSON output contract."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langfuse.model import TemplateParser

from extraction_eval.errors import SchemaFailure
from extraction_eval.prompts.contract import (
    coerce_extraction,
    extraction_json_schema,
    parse_extraction,
    strip_fences,
)
from extraction_eval.prompts.template import (
    ANY_ENTITY_TYPES,
    ANY_RELATIONSHIP_TYPES,
    PromptTemplate,
    compile_template,
    load_local_prompt,
    template_variables,
)
from extraction_eval.types import Extraction, Schema

SCHEMA = Schema(entity_types=["person", "organization"], relationship_types=["employed_by"])


def test_local_prompt_is_a_system_and_user_chat_with_exactly_the_three_variables() -> None:
    prompt = load_local_prompt()
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert prompt.source == "bundled" and prompt.name == "extraction"
    assert prompt.version is None and prompt.label is None and prompt.client is None
    # No stray "{{" in the JSON example: LangFuse would treat it as a variable.
    assert sorted(prompt.variables) == ["entity_types", "relationship_types", "text"]
    assert template_variables(prompt.messages[1]["content"]) == ["text"]


def test_compiled_prompt_carries_text_types_and_the_evidence_contract() -> None:
    system, user = load_local_prompt().compile("Ada works at Acme.", SCHEMA)
    assert (system.role, user.role) == ("system", "user")
    assert "Entity types: person, organization" in system.content
    assert "Relationship types: employed_by" in system.content
    assert "<text>\nAda works at Acme.\n</text>" in user.content
    assert '"evidence"' in system.content and '"attributes"' in system.content
    assert "{{" not in system.content + user.content


def test_open_schema_asks_for_any_type() -> None:
    system, _ = load_local_prompt().compile("x", None)
    assert ANY_ENTITY_TYPES in system.content and ANY_RELATIONSHIP_TYPES in system.content
    system2, _ = load_local_prompt().compile("x", Schema())
    assert system2 == system


def test_compile_leaves_unknown_variables_and_does_not_expand_inserted_text() -> None:
    template = "A {{ text }} B {{unknown}} C {{text}}"
    assert compile_template(template, {"text": "{{unknown}}"}) == (
        "A {{unknown}} B {{unknown}} C {{unknown}}"
    )
    assert compile_template("{{a}} {{b", {"a": None}) == " {{b"


_template_parts = st.lists(
    st.one_of(
        st.sampled_from(["{{text}}", "{{ entity_types }}", "{{nope}}", "{{", "}}", "{", "}"]),
        st.text(alphabet="ab {}\n", max_size=6),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(parts=_template_parts, value=st.text(alphabet="xy{}", max_size=8))
def test_compile_matches_langfuse_template_parser(parts: list[str], value: str) -> None:
    template = "".join(parts)
    variables = {"text": value, "entity_types": "person"}
    assert compile_template(template, variables) == TemplateParser.compile_template(
        template, variables
    )


def test_content_hash_follows_content_only() -> None:
    base = load_local_prompt()
    same = PromptTemplate(
        name="other", messages=list(base.messages), version=7, label="production", source="langfuse"
    )
    assert same.content_hash == base.content_hash
    changed = PromptTemplate(
        name=base.name,
        messages=[base.messages[0], {"role": "user", "content": "Text: {{text}}"}],
    )
    assert changed.content_hash != base.content_hash
    assert len(base.content_hash) == 64


def _objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found.extend(_objects(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_objects(value))
    return found


def test_json_schema_follows_openai_strict_mode_rules() -> None:
    schema = extraction_json_schema()
    objects = _objects(schema)
    assert len(objects) == 4  # root, entity, attribute pair, relationship
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    entity = schema["properties"]["entities"]["items"]
    assert set(entity["properties"]) == {"name", "type", "evidence", "attributes"}
    rel = schema["properties"]["relationships"]["items"]
    assert set(rel["properties"]) == {"source", "type", "target", "evidence"}
    assert "enum" not in entity["properties"]["type"]


def test_json_schema_constrains_types_to_the_item_schema() -> None:
    schema = extraction_json_schema(SCHEMA)
    entity = schema["properties"]["entities"]["items"]["properties"]["type"]
    rel = schema["properties"]["relationships"]["items"]["properties"]["type"]
    assert entity["enum"] == ["person", "organization"]
    assert rel["enum"] == ["employed_by"]


def test_gemini_schema_is_accepted_by_the_sdk_and_drops_openai_only_keywords() -> None:
    from google.genai import types

    from extraction_eval.llm.gemini_provider import to_gemini_schema

    converted = to_gemini_schema(extraction_json_schema(SCHEMA))
    assert "additionalProperties" not in json.dumps(converted)
    assert converted["propertyOrdering"] == ["entities", "relationships"]
    config = types.GenerateContentConfig(
        response_mime_type="application/json", response_schema=converted
    )
    assert config.response_schema is not None
    nullable = to_gemini_schema({"type": ["string", "null"]})
    assert nullable == {"type": "string", "nullable": True}


def test_contract_shaped_answer_parses_with_attribute_pairs() -> None:
    answer = {
        "entities": [
            {
                "name": "Ada",
                "type": "person",
                "evidence": "Ada works at Acme.",
                "attributes": [{"key": "role", "value": "engineer"}],
            }
        ],
        "relationships": [
            {"source": "Ada", "type": "employed_by", "target": "Acme", "evidence": "Ada works"}
        ],
    }
    extraction = parse_extraction(json.dumps(answer))
    assert extraction.entities[0].attributes == {"role": "engineer"}
    assert extraction.relationships[0].target == "Acme"


@pytest.mark.parametrize(
    "raw",
    [
        '```json\n{"entities": [], "relationships": []}\n```',
        '```\n{"entities": [], "relationships": []}```',
        '  {"entities": [], "relationships": []}\n',
    ],
)
def test_code_fences_are_stripped(raw: str) -> None:
    assert parse_extraction(raw) == Extraction()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "invalid JSON"),
        ("", "empty response"),
        ("[1, 2]", "expected a JSON object"),
        ('"{\\"entities\\": []}"', "expected a JSON object"),
        ('{"answer": 42}', "neither 'entities' nor 'relationships'"),
        ('{"entities": {"name": "x"}}', "'entities' must be a list"),
        ('{"entities": [{"type": "person"}]}', "entities.0.name"),
        ('{"entities": [{"name": "A", "type": "p", "attributes": [1]}]}', "key, value"),
    ],
)
def test_off_contract_answers_are_schema_failures_with_the_raw_text(raw: str, message: str) -> None:
    with pytest.raises(SchemaFailure, match=message) as info:
        parse_extraction(raw)
    assert info.value.raw == raw


def test_strip_fences_keeps_unfenced_text() -> None:
    assert strip_fences("no fence here") == "no fence here"


def test_coerce_accepts_objects_dicts_and_json() -> None:
    ex = Extraction.model_validate({"entities": [{"name": "A", "type": "person"}]})
    assert coerce_extraction(ex) is ex
    assert coerce_extraction(ex.model_dump()) == ex
    assert coerce_extraction(ex.model_dump_json()) == ex
    with pytest.raises(SchemaFailure):
        coerce_extraction(42)
