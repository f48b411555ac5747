"""The judge's prompt, versioned like the extraction prompt: its version and content hash are
part of every verdict's cache key and of the judge's identity, so a changed prompt is never
answered from old verdicts nor backed by an old calibration.

The built-in text (``BUILTIN``, version ``judge-v1``) is what local mode sends. With LangFuse
keys it comes from LangFuse prompt management instead (``JUDGE_PROMPT_NAME`` at
``JUDGE_PROMPT_LABEL``, created from the built-in text when missing: ``judge/managed.py``),
and its LangFuse version is the version. Templates use LangFuse's ``{{variable}}`` syntax
(``context``, ``pairs``) and are compiled exactly as the extraction prompt's are.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from extraction_eval.llm.base import ChatMessage
from extraction_eval.prompts.template import compile_template, messages_hash, template_variables

JUDGE_PROMPT_VERSION = "judge-v1"
JUDGE_PROMPT_NAME = "extraction-eval-judge"  # its name in LangFuse prompt management
JUDGE_PROMPT_LABEL = "production"  # the label fetched (LangFuse's default)
JUDGE_VARIABLES = ("context", "pairs")
_LABEL = re.compile(r"[A-Za-z0-9_.\-]{1,36}")  # a LangFuse label: one short word


def judge_prompt_label(label: str | None) -> str:
    """The label the judge prompt is read at (None: ``JUDGE_PROMPT_LABEL``). Raises
    ``InvalidValue`` for one LangFuse could not have (empty, spaces, control characters),
    before any work, rather than a warning once a run has spent its budget."""
    if label is None:
        return JUDGE_PROMPT_LABEL
    if not _LABEL.fullmatch(label):
        from extraction_eval.errors import InvalidValue

        raise InvalidValue(
            "judge_prompt_label",
            f"must be a LangFuse label (letters, digits, _ . -; at most 36), got {label!r}",
        )
    return label


# Context sent with a batch: the whole text when it is short, else windows around the names
MAX_CONTEXT_CHARS = 6_000
CONTEXT_WINDOW = 400
MAX_NAME_CHARS = 300

SYSTEM = (
    "You judge entity extraction. For each numbered pair of names, say whether both name the "
    "same real-world entity in the given text (the same person, organisation, place, date or "
    "thing; for a relationship's endpoint, the same participant of the same fact). An acronym, "
    "a shortened name, an alias or a name with a title can be the same entity; two different "
    "entities of the same type are not. Answer only with JSON: "
    '{"verdicts": [{"id": <pair number>, "same": true|false, "reason": "<at most 20 words>"}]}'
)
USER = "Text:\n<<<\n{{context}}\n>>>\n\nPairs:\n{{pairs}}\n"

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "same": {"type": "boolean"},
                    "reason": {"type": "string"},
                },
                "required": ["id", "same", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}

PromptSource = Literal["bundled", "langfuse", "fallback"]


@dataclass(frozen=True)
class JudgePrompt:
    """The judge's chat template and where it came from. ``version``: ``judge-v1`` for the
    built-in text, ``langfuse:NAME@N`` for LangFuse's version N; ``ref`` (version and content
    hash) is what the cache key and the judge's identity carry."""

    messages: tuple[Mapping[str, str], ...]
    version: str = JUDGE_PROMPT_VERSION
    source: PromptSource = "bundled"

    @cached_property
    def content_hash(self) -> str:
        """sha256 over the messages and the answer schema, first 16 hex digits."""
        payload = json.dumps([messages_hash(self.messages), JUDGE_SCHEMA], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def ref(self) -> str:
        return f"{self.version}/{self.content_hash}"

    def missing_variables(self) -> list[str]:
        """The variables the judge fills that no message uses (a prompt without ``pairs``
        would never show the model what to judge)."""
        used = {n for m in self.messages for n in template_variables(m.get("content", ""))}
        return [v for v in JUDGE_VARIABLES if v not in used]


BUILTIN = JudgePrompt(
    messages=({"role": "system", "content": SYSTEM}, {"role": "user", "content": USER})
)
PROMPT_HASH = BUILTIN.content_hash

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    return _CONTROL.sub(" ", text)


def _name(text: str) -> str:
    text = " ".join(_clean(text).split())
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 1] + "…"


def context_for(text: str, names: Sequence[str]) -> str:
    """The text the judge reads: whole when short, else windows around each name's first
    occurrence (a 10 MB document is never sent, nor kept in a prompt)."""
    if len(text) <= MAX_CONTEXT_CHARS:
        return _clean(text)
    spans: list[tuple[int, int]] = []
    for name in dict.fromkeys(names):
        name = name.strip()[:MAX_NAME_CHARS]
        # case-insensitive search on the text itself: its offsets are the text's (casefolding
        # first would shift them: "ß" becomes "ss")
        found = re.search(re.escape(name), text, re.IGNORECASE) if name else None
        if found is not None:
            end = min(len(text), found.end() + CONTEXT_WINDOW)
            spans.append((max(0, found.start() - CONTEXT_WINDOW), end))
    if not spans:
        spans = [(0, MAX_CONTEXT_CHARS)]
    spans.sort()
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[str] = []
    used = 0
    for start, end in merged:
        piece = text[start : min(end, start + MAX_CONTEXT_CHARS - used)]
        out.append(piece)
        used += len(piece)
        if used >= MAX_CONTEXT_CHARS:
            break
    return _clean(" … ".join(out))


def messages(
    context: str,
    pairs: Sequence[tuple[str, str, str | None]],
    prompt: JudgePrompt = BUILTIN,
) -> tuple[ChatMessage, ...]:
    """The chat for one batch: numbered pairs (from 1) of one context, in ``prompt``."""
    lines = []
    for i, (a, b, type_) in enumerate(pairs, start=1):
        typed = f" (type {_name(type_)})" if type_ else ""
        lines.append(
            f"{i}. {json.dumps(_name(a), ensure_ascii=False)} vs "
            f"{json.dumps(_name(b), ensure_ascii=False)}{typed}"
        )
    values: dict[str, Any] = {"context": context, "pairs": "\n".join(lines)}
    return tuple(
        ChatMessage(m["role"], compile_template(m.get("content", ""), values))
        for m in prompt.messages
    )
