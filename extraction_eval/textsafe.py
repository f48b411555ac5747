"""Lone UTF-16 surrogates out of text before it is stored, exported or sent.

A truncated emoji in a model answer, a user pipeline's output, an exception message or a
JSON line (``"\\ud800"``) becomes a Python string that cannot be encoded as UTF-8: SQLite,
files and HTTP bodies all refuse it, and the item would get no row at all. Every place where
outside text enters the store runs it through here: a paired surrogate is joined into the
character it spells, a lone one becomes U+FFFD (the replacement character), and the caller
records that it happened. No I/O and no imports of the package: every layer may use it.
"""

from __future__ import annotations

import json
import re
from typing import Any

REPLACEMENT = "\ufffd"

# A surrogate code point in a str, or a JSON escape that decodes to one (\ud800-\udfff).
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def has_surrogates(text: str) -> bool:
    """Fast on every item: ASCII text is answered from a flag, other text by the C encoder;
    only text that fails to encode is searched."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.search(text) is not None
    return False


def clean_text(text: str) -> str:
    """``text`` encodable as UTF-8: surrogate pairs joined, lone surrogates -> U+FFFD."""
    if not has_surrogates(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_optional(text: str | None) -> tuple[str | None, bool]:
    """``clean_text`` of an optional string, and whether anything was replaced."""
    if text is None or not has_surrogates(text):
        return text, False
    return clean_text(text), True


def may_hold_surrogates(json_text: str) -> bool:
    """Whether a JSON document (before ``json.loads``) can decode to a lone surrogate: a
    cheap test, so the objects of the usual line are never walked."""
    if "\\u" not in json_text and not has_surrogates(json_text):
        return False
    return _SURROGATE_ESCAPE.search(json_text) is not None


def clean_json_value(value: Any) -> tuple[Any, bool]:
    """A decoded JSON value (keys and strings at any depth) with surrogates cleaned, and
    whether anything changed. Goes through the C encoder and decoder, not a Python walk."""
    dumped = json.dumps(value, ensure_ascii=False)
    if not has_surrogates(dumped):
        return value, False
    return json.loads(clean_text(dumped)), True


# Terminal controls (C0 but \t and \n, DEL, C1) and the bidirectional overrides and isolates
# that reorder shown text: what ``views.console`` strips from printed text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``): a model's
    raw reply shown whole, in a terminal or a page, with none of them acting."""
    return _CONTROL.sub(_escaped, text)
