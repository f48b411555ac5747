"""The extraction prompt as data: the same chat template runs locally or from LangFuse.

Templates use LangFuse's ``{{variable}}`` syntax and are compiled exactly as LangFuse compiles
them, so pushing the local files to LangFuse as a chat prompt changes nothing the model sees.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any, Literal

from extraction_eval.llm.base import ChatMessage
from extraction_eval.types import Schema

# bundled: the template files in this package; local-store: a version pushed to the local
# store (``prompts push`` without LangFuse); langfuse: fetched from LangFuse prompt management;
# fallback: the bundled template used because a LangFuse fetch failed.
PromptSource = Literal["bundled", "local-store", "langfuse", "fallback"]

PROMPT_NAME = "extraction"
TEMPLATE_VARIABLES = ("text", "entity_types", "relationship_types")

# Shown when a schema leaves the types open, so the model still uses comparable labels.
ANY_ENTITY_TYPES = "any (use short lowercase labels such as person, organization, location, date)"
ANY_RELATIONSHIP_TYPES = (
    "any (use short snake_case labels such as employed_by, located_in, born_in, married_to)"
)

_OPEN, _CLOSE = "{{", "}}"


def compile_template(content: str, variables: Mapping[str, Any]) -> str:
    """Substitute ``{{name}}`` in one pass; unknown names stay as written, like LangFuse.

    One pass matters: a text that itself contains ``{{entity_types}}`` is not expanded.
    """
    out: list[str] = []
    pos = 0
    while True:
        start = content.find(_OPEN, pos)
        end = content.find(_CLOSE, start) if start != -1 else -1
        if start == -1 or end == -1:
            out.append(content[pos:])
            return "".join(out)
        out.append(content[pos:start])
        name = content[start + len(_OPEN) : end].strip()
        if name in variables:
            value = variables[name]
            out.append("" if value is None else str(value))
        else:
            out.append(content[start : end + len(_CLOSE)])
        pos = end + len(_CLOSE)


def template_variables(content: str) -> list[str]:
    """Variable names in a template, in order (what LangFuse shows as the prompt's variables)."""
    names: list[str] = []
    pos = 0
    while True:
        start = content.find(_OPEN, pos)
        end = content.find(_CLOSE, start) if start != -1 else -1
        if start == -1 or end == -1:
            return names
        names.append(content[start + len(_OPEN) : end].strip())
        pos = end + len(_CLOSE)


def _declared(declarations: Mapping[str, Mapping[str, Sequence[str]]]) -> str:
    """Declared attributes as prompt text; they ride in the type variables, so templates
    (local or already pushed to LangFuse) need no new variable."""
    if not declarations:
        return ""
    parts = [
        f"{name}: " + "; ".join(f"{key} = {' | '.join(values)}" for key, values in keys.items())
        for name, keys in declarations.items()
    ]
    return (
        '. Declared attributes, as {"key", "value"} pairs using only these keys and values'
        " (leave out a key the text does not settle): " + " / ".join(parts)
    )


def prompt_variables(text: str, schema: Schema | None) -> dict[str, str]:
    """The values for the template; also what a LangFuse prompt client's ``compile`` gets."""
    entity_types = list(schema.entity_types) if schema else []
    relationship_types = list(schema.relationship_types) if schema else []
    return {
        "text": text,
        "entity_types": (", ".join(entity_types) if entity_types else ANY_ENTITY_TYPES)
        + _declared(schema.attributes if schema else {}),
        "relationship_types": (
            ", ".join(relationship_types) if relationship_types else ANY_RELATIONSHIP_TYPES
        )
        + _declared(schema.relationship_attributes if schema else {}),
    }


def messages_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """sha256 over roles and contents only: the same words fetched from anywhere hash the same."""
    canonical = [
        {"role": str(m.get("role", "")), "content": str(m.get("content", ""))} for m in messages
    ]
    payload = json.dumps(canonical, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PromptTemplate:
    """A chat prompt (raw templates) plus where it came from, for the run record and tracing.

    ``client`` holds a LangFuse prompt client when the prompt was fetched from LangFuse, so
    generations can be linked to the prompt version; it never affects what is sent.
    """

    name: str
    messages: list[dict[str, str]]
    version: int | None = None
    label: str | None = None
    source: PromptSource = "bundled"
    client: Any = field(default=None, compare=False, repr=False)

    @cached_property
    def content_hash(self) -> str:
        """Keys the response cache; messages are treated as immutable once built."""
        return messages_hash(self.messages)

    @property
    def variables(self) -> list[str]:
        names: list[str] = []
        for message in self.messages:
            for name in template_variables(message.get("content", "")):
                if name not in names:
                    names.append(name)
        return names

    def compile(self, text: str, schema: Schema | None) -> tuple[ChatMessage, ...]:
        values = prompt_variables(text, schema)
        return tuple(
            ChatMessage(role=m["role"], content=compile_template(m.get("content", ""), values))
            for m in self.messages
        )


def _read(resource: str) -> str:
    return (
        (resources.files("extraction_eval.prompts") / resource).read_text(encoding="utf-8").rstrip()
    )


def local_messages() -> list[dict[str, str]]:
    """The bundled template files, in the chat format LangFuse stores."""
    return [
        {"role": "system", "content": _read("extraction.system.txt")},
        {"role": "user", "content": _read("extraction.user.txt")},
    ]


def load_local_prompt() -> PromptTemplate:
    return PromptTemplate(name=PROMPT_NAME, messages=local_messages(), source="bundled")
