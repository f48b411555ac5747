"""What every importer shares: spans into entities, one warning format, the import result.

A record (a task, a line, a document) with a problem is skipped whole and named in one line,
``FILE:N (id X): problem; skipped``: gold with half its objects would count the missing half
as false positives of every model scored against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.datasets.lines import warning
from extraction_eval.errors import UsageError
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship

# An input file larger than this is refused before it is read (a dataset, not a dump).
MAX_IMPORT_BYTES = 512 * 1024 * 1024


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


def check_size(path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    if size > MAX_IMPORT_BYTES:
        raise UsageError(f"{path}: larger than {MAX_IMPORT_BYTES} bytes; split it")


def read_text(path: Path) -> str:
    """A file's text, line endings kept as they are (offsets count them)."""
    check_size(path)
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: {exc}") from None


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
    return DatasetItem(
        id=item_id,
        text=text,
        expected=Extraction(entities=entities, relationships=relationships),
    )
