"""Offsets as the offset protocols read them: half-open character spans checked against the
text, and one line per object that cannot be scored (the object is skipped, the rest scored).

Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from extraction_eval.types import Entity

if TYPE_CHECKING:
    from extraction_eval.evaluators.protocols.rows import CountRows

__all__ = [
    "MAX_PROBLEM_LINES",
    "PROTOCOLS_LABEL",
    "DocumentFold",
    "Problems",
    "Span",
    "check_span",
    "entity_spans",
    "type_key",
]

Span = tuple[int, int]

# How a skipped object's line starts (one line per object, whichever protocols skip it).
PROTOCOLS_LABEL = "protocols"

# A file with 100,000 bad offsets says so in a bounded number of lines plus a count.
MAX_PROBLEM_LINES = 50


def type_key(value: str) -> str:
    """Names compare casefolded with whitespace collapsed (as the matcher compares them)."""
    return " ".join(value.casefold().split())


def check_span(start: int | None, end: int | None, text_length: int) -> str | None:
    """Why ``start``/``end`` is not a usable span of a text of ``text_length`` characters,
    or None when it is. Both None is "no offsets", which callers count, not a problem."""
    if start is None or end is None:
        return f"start {start} without end {end}" if (start, end) != (None, None) else None
    if start > end:
        return f"reversed offsets {start}..{end}"
    if start < 0 or end > text_length:
        return f"offsets {start}..{end} outside the text (length {text_length})"
    if start == end:
        return f"empty span {start}..{end}"
    return None


def entity_spans(entity: Entity) -> list[tuple[int | None, int | None]]:
    """The spans an entity stands for: its mentions that carry offsets (Re-DocRED lists every
    one), else its own ``start``/``end``; empty when it has no offsets at all."""
    spans: list[tuple[int | None, int | None]] = [
        (m.start, m.end) for m in entity.mentions if m.start is not None or m.end is not None
    ]
    if spans:
        return spans
    if entity.start is not None or entity.end is not None:
        return [(entity.start, entity.end)]
    return []


@dataclass
class Problems:
    """Bad objects: one line each naming the item and the problem (the first
    ``MAX_PROBLEM_LINES``), and how many there were in all. Shared by the protocols of one
    report, so an object two protocols skip is still one line."""

    protocol: str
    lines: list[str] = field(default_factory=list)
    count: int = 0
    seen: set[tuple[str, str, str]] = field(default_factory=set)

    def add(self, item_id: str, what: str, problem: str) -> None:
        if (item_id, what, problem) in self.seen:
            return
        self.seen.add((item_id, what, problem))
        self.count += 1
        if len(self.lines) < MAX_PROBLEM_LINES:
            self.lines.append(f"{self.protocol}: item {item_id}: {what}: {problem}; skipped")

    def warnings(self) -> list[str]:
        more = self.count - len(self.lines)
        tail = [f"{self.protocol}: ... and {more} more skipped object(s)"] if more > 0 else []
        return [*self.lines, *tail]


class DocumentFold:
    """What every protocol's accumulator keeps besides its counts: the report's shared
    ``problems``, the per-item count ``rows`` for the CIs, how many objects it skipped, how
    many documents it saw and whether one of them failed."""

    def __init__(self, problems: Problems | None, rows: CountRows | None) -> None:
        self.rows = rows
        self.problems = Problems(PROTOCOLS_LABEL) if problems is None else problems
        self.skipped = 0
        self.failed = False
        self.documents = 0

    def _skip(self, item_id: str, what: str, problem: str) -> None:
        self.skipped += 1
        self.problems.add(item_id, what, problem)
