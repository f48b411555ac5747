"""brat standoff: a folder of ``NAME.txt`` + ``NAME.ann`` pairs, one document each.

``.ann`` lines are parsed with `bratly <https://pypi.org/project/bratly/>`_ (its
``EntityAnnotation`` / ``RelationAnnotation.from_line``): ``T`` entities (type, fragments,
text) and ``R`` relations (``Arg1:T1 Arg2:T2``). ``A`` / ``M`` attributes on an entity become
its attributes (a binary one: ``"true"``). Other kinds (events, notes, normalisations,
equivalences) are not part of our format: counted in one note per file. A discontinuous
entity (``T1 Org 0 5;10 15``) has no single span: it is imported by its text without
offsets, and reported. ``N`` in a warning is the line of the ``.ann`` file.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from extraction_eval.datasets.importers.common import (
    BadRecord,
    Imported,
    make_item,
    read_text,
    span_entity,
)
from extraction_eval.errors import UsageError
from extraction_eval.limits import MAX_BRAT_DOCUMENTS
from extraction_eval.types import Entity, Relationship

if TYPE_CHECKING:
    from bratly.annotation_types import EntityAnnotation


def import_brat(folder: Path) -> Imported:
    """Only regular files inside ``folder`` are read: a link that leads out of it (say
    ``passwd.txt`` -> ``/etc/passwd``), a FIFO or a device is that document's warning, and
    an ``.ann`` without its ``.txt`` is named too (never dropped without a word)."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: brat standoff is a folder of .txt and .ann files")
    texts = sorted(folder.glob("*.txt"))
    if not texts:
        raise UsageError(f"{folder}: no .txt files (brat standoff: NAME.txt with NAME.ann)")
    if len(texts) > MAX_BRAT_DOCUMENTS:
        raise UsageError(f"{folder}: more than {MAX_BRAT_DOCUMENTS:,} documents")
    root = folder.resolve()
    out = Imported()
    for txt in texts:
        out.records += 1
        ann = txt.with_suffix(".ann")
        outside = [p.name for p in (txt, ann) if not _inside(p, root)]
        if outside:
            out.skip(txt.name, 1, txt.stem, f"{outside[0]} is a link to outside the folder")
            continue
        if not ann.is_file():
            out.skip(txt.name, 1, txt.stem, "no .ann file next to it")
            continue
        _document(out, txt, ann)
    paired = {t.stem for t in texts}
    for ann in sorted(folder.glob("*.ann")):
        if ann.stem not in paired:
            out.records += 1
            out.skip(ann.name, 1, ann.stem, "no .txt file next to it")
    return out


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (followed through any links) is in ``root``; a missing one is."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a link loop
        return False


def _document(out: Imported, txt: Path, ann: Path) -> None:
    with warnings.catch_warnings():  # bratly's models use pydantic's older class Config
        warnings.simplefilter("ignore", DeprecationWarning)
        from bratly.annotation_types import EntityAnnotation, RelationAnnotation
        from bratly.exceptions import ParsingError

    item_id, source = txt.stem, ann.name
    parsed: dict[str, EntityAnnotation] = {}
    entities: dict[str, Entity] = {}
    order: list[str] = []
    relationships: list[Relationship] = []
    attributes: dict[str, dict[str, str]] = {}
    other: dict[str, int] = {}
    number = 0
    try:
        try:
            text = read_text(txt)
        except UsageError as exc:  # one document's bad bytes cost only that document
            out.skip(txt.name, 1, item_id, str(exc).removeprefix(f"{txt}: "))
            return
        lines = read_text(ann).splitlines()
        pending: list[tuple[int, str]] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            kind = line[0]
            if kind == "T":
                try:
                    t = EntityAnnotation.from_line(line)
                except (ParsingError, ValueError) as exc:
                    raise BadRecord(f"bad entity line: {_first(exc)}") from None
                parsed[t.id] = t
                entities[t.id] = _entity(out, source, number, item_id, text, t)
                order.append(t.id)
            elif kind in "RAM":
                pending.append((number, line))  # may refer to a T further down
            else:
                other[kind] = other.get(kind, 0) + 1
        for number, line in pending:  # noqa: B007 (the line a failure names)
            if line[0] == "R":
                try:
                    r = RelationAnnotation.from_line(line, parsed)
                except (ParsingError, ValueError) as exc:
                    raise BadRecord(f"bad relation line: {_first(exc)}") from None
                relationships.append(
                    Relationship(
                        source=entities[r.argument1[1].id].name,
                        type=r.label,
                        target=entities[r.argument2[1].id].name,
                    )
                )
            else:
                target, key, value = _attribute(line)
                if target not in entities:
                    raise BadRecord(f"attribute on unknown entity {target}")
                attributes.setdefault(target, {})[key] = value
        kept = [entities[t].model_copy(update={"attributes": attributes.get(t, {})}) for t in order]
        out.add(make_item(item_id, text, kept, relationships), source, number or 1)
    except (BadRecord, UsageError, ValueError) as exc:
        out.skip(source, number or 1, item_id, _first(exc))
        return
    if other:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(other.items()))
        out.note(source, 1, item_id, f"lines not imported (not entities or relations): {kinds}")


def _entity(
    out: Imported, source: str, number: int, item_id: str, text: str, t: EntityAnnotation
) -> Entity:
    fragments = t.fragments
    label, content = t.label, t.content
    if len(fragments) == 1:
        f = fragments[0]
        return span_entity(text, f.start, f.end, label, quoted=content)
    for f in fragments:
        span_entity(text, f.start, f.end, label)  # each piece must be in the text
    spans = ";".join(f"{f.start}-{f.end}" for f in fragments)
    out.note(
        source,
        number,
        item_id,
        f"{t.id}: discontinuous span ({spans}) imported as {content!r} without offsets",
    )
    return Entity(name=content, type=label)


def _attribute(line: str) -> tuple[str, str, str]:
    """``A1\\tNegated T3`` -> (T3, Negated, true); ``A2\\tLevel T3 High`` -> (T3, Level, High)."""
    parts = line.split("\t")
    fields = parts[1].split() if len(parts) > 1 else []
    if len(fields) not in (2, 3):
        raise BadRecord(f"bad attribute line {line!r}")
    return fields[1], fields[0], fields[2] if len(fields) == 3 else "true"


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
