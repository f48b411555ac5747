"""The judge's prompt, versioned like the extraction prompt: its version and content hash are
part of every verdict's cache key and of the judge's identity, so a changed prompt is never
answered from old verdicts nor backed by an old calibration."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from extraction_eval.llm.base import ChatMessage

JUDGE_PROMPT_VERSION = "judge-v1"
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
USER = "Text:\n<<<\n{context}\n>>>\n\nPairs:\n{pairs}\n"

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

PROMPT_HASH = hashlib.sha256(
    json.dumps([JUDGE_PROMPT_VERSION, SYSTEM, USER, JUDGE_SCHEMA], sort_keys=True).encode()
).hexdigest()[:16]

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


def messages(context: str, pairs: Sequence[tuple[str, str, str | None]]) -> tuple[ChatMessage, ...]:
    """The chat for one batch: numbered pairs (from 1) of one context."""
    lines = []
    for i, (a, b, type_) in enumerate(pairs, start=1):
        typed = f" (type {_name(type_)})" if type_ else ""
        lines.append(
            f"{i}. {json.dumps(_name(a), ensure_ascii=False)} vs "
            f"{json.dumps(_name(b), ensure_ascii=False)}{typed}"
        )
    user = USER.format(context=context, pairs="\n".join(lines))
    return (ChatMessage("system", SYSTEM), ChatMessage("user", user))
