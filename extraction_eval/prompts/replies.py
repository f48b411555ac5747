"""Reading a model's reply leniently, and saying what was repaired.

Real servers and smaller models rarely answer with bare JSON: they wrap it in a Markdown
fence, put a sentence before and after it, or nest it under one key (``{"result": {...}}``).
``read_json_reply`` undoes exactly those three things and names each it undid (``fence``,
``prose``, ``wrapper``), so a run can count them and ``--strict-json`` can refuse them.
Nothing cleverer: no trailing-comma fixes, no quote repair, no guessing between two objects.

Choices for awkward replies (each failure is one line saying what was found):

- the reply parses as JSON as it is: used as it is, nothing repaired (a fence *inside* a
  string of the object is just text);
- otherwise the top-level JSON objects in the text are found (a ``{`` that starts a valid
  object; objects inside it are part of it); exactly one must be there. Two or more (ten
  fenced blocks of JSON, say) are refused, naming how many: we never pick one;
- the text around that object is a ``fence`` when it is a Markdown code fence's opening and
  closing lines, and ``prose`` when anything else is left;
- one key whose value holds ``entities`` / ``relationships`` is unwrapped, one level only: a
  wrapper inside a wrapper (at any depth) is refused, naming the keys.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from extraction_eval.errors import SchemaFailure

# The repairs, in the order they are applied and listed.
REPAIRS = ("fence", "prose", "wrapper")
# Looking for the object is bounded: at most this many ``{`` that start no valid object are
# tried, and the characters they read together stay under a few times the reply's length, so a
# 50 MB reply of braces and unclosed strings costs a few passes over it, not one per brace.
MAX_OBJECT_STARTS = 256
_SCAN_PASSES = 4

_OPENING = re.compile(r"```[A-Za-z0-9_+.-]*[ \t]*\r?\n?[ \t]*\Z")
_CLOSING = re.compile(r"\A[ \t]*\r?\n?[ \t]*```")
_DECODER = json.JSONDecoder()
_CONTENT_KEYS = ("entities", "relationships")


@dataclass(frozen=True)
class ReadReply:
    """The JSON object of a reply and the repairs it took (empty: bare JSON)."""

    value: dict[str, Any]
    repairs: tuple[str, ...] = ()


def _top_level_objects(text: str) -> list[tuple[int, int, Any]]:
    """(start, end, value) of each top-level JSON object in ``text``, scanning left to right;
    objects nested in one are skipped with it. Bounded work (``MAX_OBJECT_STARTS``)."""
    found: list[tuple[int, int, Any]] = []
    position, failed, budget = text.find("{"), 0, _SCAN_PASSES * len(text)
    while position != -1 and failed < MAX_OBJECT_STARTS and budget > 0:
        try:
            value, end = _DECODER.raw_decode(text, position)
        except RecursionError:
            raise SchemaFailure("JSON nested too deeply to read") from None
        except json.JSONDecodeError as exc:
            failed += 1
            budget -= max(exc.pos - position, 1)
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found.append((position, end, value))
        position = text.find("{", end)
    return found


def _surroundings(before: str, after: str) -> tuple[str, ...]:
    """What the text around the object was: a fence's two lines, other text, or both."""
    repairs: list[str] = []
    opening, closing = _OPENING.search(before), _CLOSING.search(after)
    if opening and closing:
        repairs.append("fence")
        before, after = before[: opening.start()], after[closing.end() :]
    if before.strip() or after.strip():
        repairs.append("prose")
    return tuple(repairs)


_WRAPPER_DEPTH = 16  # single-key objects followed this deep to name a nest of wrappers


def _unwrap(value: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The object inside a single-key wrapper (``{"result": {...}}``), one level only; a nest
    of wrappers (any depth, as far as ``_WRAPPER_DEPTH``) is refused naming its keys."""
    if any(k in value for k in _CONTENT_KEYS) or len(value) != 1:
        return value, False
    keys: list[str] = []
    held: Any = value
    while isinstance(held, dict) and len(held) == 1 and len(keys) < _WRAPPER_DEPTH:
        ((key, held),) = held.items()
        keys.append(str(key))
        if isinstance(held, dict) and any(k in held for k in _CONTENT_KEYS):
            if len(keys) == 1:
                return held, True
            path = " then ".join(repr(k) for k in keys)
            raise SchemaFailure(f"a wrapper inside a wrapper ({path}): only one level is unwrapped")
    return value, False


def read_json_reply(raw: str) -> ReadReply:
    """The one JSON object in a model's reply, leniently (see the module's choices), with the
    repairs it took; ``SchemaFailure`` (one line) when there is none or more than one."""
    text = raw.strip()
    if not text:
        raise SchemaFailure("empty response")
    try:
        value = json.loads(text)
        repairs: tuple[str, ...] = ()
    except RecursionError:
        raise SchemaFailure("JSON nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        objects = _top_level_objects(text)
        if not objects:
            raise SchemaFailure(f"invalid JSON: {exc.msg} at line {exc.lineno}") from None
        if len(objects) > 1:
            raise SchemaFailure(
                f"the reply holds {len(objects)} JSON objects, not one (at characters"
                f" {', '.join(str(start) for start, _, _ in objects[:5])}"
                f"{', ...' if len(objects) > 5 else ''}): none is chosen"
            ) from None
        start, end, value = objects[0]
        repairs = _surroundings(text[:start], text[end:])
    if not isinstance(value, dict):
        raise SchemaFailure(f"expected a JSON object, got {type(value).__name__}")
    value, unwrapped = _unwrap(value)
    return ReadReply(value, (*repairs, "wrapper") if unwrapped else repairs)


def strict_refusal(repairs: tuple[str, ...]) -> str:
    """The schema failure of a reply that needed repairs under ``strict_json``."""
    what = {
        "fence": "a Markdown code fence",
        "prose": "text around the JSON",
        "wrapper": "a single-key wrapper object",
    }
    return "not bare JSON (strict_json): " + ", ".join(what[r] for r in repairs)
