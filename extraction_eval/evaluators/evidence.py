"""Grounding: is a quoted string really in the source text, and where?

``strict``: the quote is trimmed and typographic quote characters are unified (on both sides).
``relaxed``: additionally whitespace runs collapse to one space and both sides are casefolded.
A quote that is not found whole may be an elision: if it contains ``...`` or ``…``, it is
grounded when every part is found, in order. Offsets are always in the original text.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Mapping

from extraction_eval.evaluators.config import EvidenceMode

Span = tuple[int, int]

_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "`": "'",
        "\u00b4": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
    }
)
_QUOTE_CHARS = re.compile(
    "[\u2018\u2019\u201a\u201b\u2032`\u00b4\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb]"
)


def normalize(text: str, mode: EvidenceMode) -> str:
    """The comparable form of a quote under ``mode`` (README, "Scoring reference")."""
    out = text.strip().translate(_QUOTES)
    if mode == "relaxed":
        out = " ".join(out.casefold().split())
    return out


class TextIndex:
    """One item's text, prepared for repeated lookups; normalised forms are built lazily
    (the relaxed offset map, a Python loop over the text, only once a relaxed match exists)."""

    __slots__ = ("_relaxed", "_relaxed_map", "_relaxed_plain", "_strict", "mode", "text")

    def __init__(self, text: str, mode: EvidenceMode) -> None:
        self.text = text
        self.mode: EvidenceMode = mode
        self._strict: str | None = None
        self._relaxed_plain: str | None = None
        self._relaxed: str | None = None
        self._relaxed_map: list[int] = []

    def _find_strict(self, quote: str, start: int) -> Span | None:
        q = quote.strip()
        if not q:
            return None
        pos = self.text.find(q, start)
        if pos >= 0:
            return pos, pos + len(q)
        if self._strict is None:
            # 1:1 character mapping, so offsets stay valid; "" marks "nothing to unify".
            has = _QUOTE_CHARS.search(self.text) is not None
            self._strict = self.text.translate(_QUOTES) if has else ""
        if _QUOTE_CHARS.search(q) is None and not self._strict:
            return None  # neither side changes under quote unification
        q = q.translate(_QUOTES)
        pos = (self._strict or self.text).find(q, start)
        return (pos, pos + len(q)) if pos >= 0 else None

    def _find_relaxed(self, quote: str, start: int) -> Span | None:
        q = normalize(quote, "relaxed")
        if not q:
            return None
        if self._relaxed_plain is None:
            self._relaxed_plain = normalize(self.text, "relaxed")
        if q not in self._relaxed_plain:
            return None
        if self._relaxed is None:
            self._relaxed, self._relaxed_map = _relaxed_with_map(self.text)
        # Map the original start offset to the first normalised position at or after it.
        pos = self._relaxed.find(q, bisect.bisect_left(self._relaxed_map, start))
        if pos < 0:
            return None
        return self._relaxed_map[pos], self._relaxed_map[pos + len(q) - 1] + 1

    def _find(self, quote: str, relaxed: bool) -> tuple[Span, ...] | None:
        find_one = self._find_relaxed if relaxed else self._find_strict
        whole = find_one(quote, 0)
        if whole is not None:
            return (whole,)
        if "…" not in quote and "..." not in quote:
            return None
        parts = [p for p in quote.replace("...", "…").split("…") if p.strip()]
        if len(parts) < 2:
            return None
        spans: list[Span] = []
        cursor = 0
        for part in parts:
            span = find_one(part, cursor)
            if span is None:
                return None
            spans.append(span)
            cursor = span[1]
        return tuple(spans)

    def find(self, quote: str) -> tuple[Span, ...] | None:
        """Spans of ``quote`` in the text (several for an elided quote), or None."""
        found = self._find(quote, relaxed=False)
        if found is None and self.mode == "relaxed":
            found = self._find(quote, relaxed=True)
        return found

    def contains(self, name: str) -> bool:
        """A name is in the text when it is found whole under this index's mode."""
        if self._find_strict(name, 0) is not None:
            return True
        return self.mode == "relaxed" and self._find_relaxed(name, 0) is not None


def _relaxed_with_map(text: str) -> tuple[str, list[int]]:
    chars: list[str] = []
    origin: list[int] = []
    in_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if not in_space:
                chars.append(" ")
                origin.append(i)
                in_space = True
            continue
        in_space = False
        for c in ch.translate(_QUOTES).casefold():
            chars.append(c)
            origin.append(i)
    return "".join(chars), origin


class ContextIndex(Mapping[str, str]):
    """All texts of a set (id -> text), joined once so that "is this string verbatim in another
    item's text?" is one C-level search instead of a loop over items. Pass it as
    ``context_texts`` to :func:`~extraction_eval.evaluators.score_item` for every item."""

    __slots__ = ("_ids", "_joined", "_starts", "_texts")

    def __init__(self, texts: Mapping[str, str]) -> None:
        self._texts = dict(texts)
        self._ids = sorted(self._texts)  # sorted: reported ids never depend on input order
        self._starts: list[int] = []
        pos = 0
        for key in self._ids:
            self._starts.append(pos)
            pos += len(self._texts[key]) + 1
        self._joined = "\x00".join(self._texts[k] for k in self._ids)

    def __getitem__(self, key: str) -> str:
        return self._texts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def find_other(self, needle: str, exclude_id: str) -> str | None:
        """The id of another item whose text contains ``needle`` verbatim, if any."""
        if not needle or "\x00" in needle:
            return None
        pos = self._joined.find(needle)
        while pos >= 0:
            idx = bisect.bisect_right(self._starts, pos) - 1
            if self._ids[idx] != exclude_id:
                return self._ids[idx]
            nxt = idx + 1
            if nxt >= len(self._starts):
                return None
            pos = self._joined.find(needle, self._starts[nxt])
        return None


def find_in_other_text(needle: str, item_id: str, context: Mapping[str, str] | None) -> str | None:
    """Context bleed lookup for any mapping; fast when ``context`` is a :class:`ContextIndex`."""
    needle = needle.strip()
    if not needle or not context:
        return None
    if isinstance(context, ContextIndex):
        return context.find_other(needle, item_id)
    # The smallest matching id, so the answer never depends on the mapping's order.
    return min((k for k, t in context.items() if k != item_id and needle in t), default=None)
