"""What every importer shares: spans into entities, one warning format, the import result.

A record (a task, a line, a document) with a problem is skipped whole and named in one line,
``FILE:N (id X): problem; skipped``: gold with half its objects would count the missing half
as false positives of every model scored against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from extraction_eval import regular_files
from extraction_eval.datasets.lines import check_record, decode_line, warning
from extraction_eval.errors import UsageError
from extraction_eval.limits import MAX_IMPORT_BYTES
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship


class BadRecord(ValueError):
    """One record cannot be imported; its message is the problem."""


@dataclass
class Imported:
    """The items an import made, in input order, and one warning per skipped record (or per
    thing imported with a caveat, e.g. a discontinuous brat span)."""

    items: list[DatasetItem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    records: int = 0  # records seen, good or bad
    seen: set[str] = field(default_factory=set)

    def add(self, item: DatasetItem, source: str, number: int) -> None:
        if item.id in self.seen:
            self.warnings.append(warning(source, number, item.id, "repeated id"))
            return
        self.seen.add(item.id)
        self.items.append(item)

    def skip(self, source: str, number: int, item_id: str | None, problem: str) -> None:
        self.warnings.append(warning(source, number, item_id, problem))

    def note(self, source: str, number: int, item_id: str | None, problem: str) -> None:
        """A caveat on something imported: the same shape, without '; skipped'."""
        id_part = f" (id {item_id})" if item_id is not None else ""
        self.warnings.append(f"{source}:{number}{id_part}: {problem}")


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file of at most ``MAX_IMPORT_BYTES``.

    Opened without blocking, then checked on the open descriptor: a FIFO (which would wait
    for a writer forever) or a device is refused, and the file checked is the file read."""
    try:
        return regular_files.open_regular(path, MAX_IMPORT_BYTES)
    except regular_files.NotReadable as exc:
        over = "over the limit" in str(exc)
        raise UsageError(f"{exc} for an import; split it" if over else str(exc)) from None


def read_text(path: Path) -> str:
    """A regular file's text, line endings kept as they are (offsets count them); NUL bytes
    or bytes that are not UTF-8 are a ``UsageError`` naming the file (the reader's rules)."""
    with open_regular(path) as fh:
        data = fh.read()
    text, problem = decode_line(data)
    if text is None:
        raise UsageError(f"{path}: {problem}")
    return text


def record_id(raw: Any) -> str | None:
    """A non-empty string or an integer id, as a string; anything else is no id."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or raw == "":
        return None
    return str(raw)


def label(raw: Any, what: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise BadRecord(f"{what}: label must be a non-empty string, got {raw!r}")
    return raw.strip()


def span_entity(text: str, start: Any, end: Any, type_: str, *, quoted: Any = None) -> Entity:
    """The entity a span names: ``text[start:end]`` as its name and evidence, offsets kept.
    ``quoted`` (the tool's copy of the span text, when it keeps one) must agree with it."""
    if isinstance(start, bool) or isinstance(end, bool):
        raise BadRecord(f"span {start!r}-{end!r}: offsets must be integers")
    if not isinstance(start, int) or not isinstance(end, int):
        raise BadRecord(f"span {start!r}-{end!r}: offsets must be integers")
    if not 0 <= start < end <= len(text):
        raise BadRecord(f"span {start}-{end} is outside the text (length {len(text)})")
    name = text[start:end]
    if not name.strip():
        raise BadRecord(f"span {start}-{end} is only whitespace")
    if quoted is not None and quoted != name:
        raise BadRecord(f"span {start}-{end} is {name!r} in the text but {quoted!r} in the file")
    return Entity(name=name, type=type_, evidence=name, start=start, end=end)


def relationship(
    entities: Mapping[str, Entity], source: Any, target: Any, type_: str
) -> Relationship:
    """A relationship between two imported entities (by the tool's ids), named by their text."""
    missing = [
        str(x) for x in (source, target) if not isinstance(x, (str, int)) or str(x) not in entities
    ]
    if missing:
        raise BadRecord(f"relation {type_!r} refers to unknown span(s) {', '.join(missing)}")
    return Relationship(
        source=entities[str(source)].name, type=type_, target=entities[str(target)].name
    )


def make_item(
    item_id: str, text: str, entities: list[Entity], relationships: list[Relationship]
) -> DatasetItem:
    if not text.strip():
        raise BadRecord("empty text")
    expected = Extraction(entities=entities, relationships=relationships)
    check_record(text, expected)  # the rules of our own JSONL upload
    return DatasetItem(id=item_id, text=text, expected=expected)
