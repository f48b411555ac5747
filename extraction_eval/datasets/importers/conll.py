"""CoNLL-2003-style columns: one token a line, its tag in the last column, a blank line
between sentences, ``-DOCSTART-`` between documents.

Tags are BIO: ``B-TYPE`` begins an entity, ``I-TYPE`` continues it, ``O`` is outside; an
``I-TYPE`` after ``O`` or after another type begins one too (IOB1, the original CoNLL-2003
files). An item is a document when the file has ``-DOCSTART-`` lines, else a sentence; its
text is the tokens joined by single spaces, sentences by newlines, so offsets are exact in it.

No maintained library reads this: ``conllu`` and ``pyconll`` read CoNLL-U (ten columns, no
entity tags); ``seqeval`` decodes BIO tags to token spans but is unmaintained since 2020 and
needs scikit-learn; none gives character offsets, which are the point here. So this is a
small strict reader: a line whose tag is not ``O`` / ``B-X`` / ``I-X`` skips its item.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from extraction_eval.datasets.importers.common import (
    Imported,
    make_item,
    open_regular,
    span_entity,
)
from extraction_eval.datasets.lines import bounded_lines, decode_line
from extraction_eval.types import DatasetItem

_TAG = re.compile(r"^(?:O|[BI]-\S+)$")


@dataclass
class _Sentence:
    lines: list[tuple[int, str, str]] = field(default_factory=list)  # (line, token, tag)
    problem: tuple[int, str] | None = None  # the first bad line


@dataclass
class _Doc:
    sentences: list[_Sentence] = field(default_factory=lambda: [_Sentence()])


def import_conll(path: Path) -> Imported:
    out = Imported()
    with open_regular(path) as fh:  # line by line: a bad line costs only its item
        docs, marked = _split(bounded_lines(fh))
    units: list[list[_Sentence]] = []
    for doc in docs:
        sentences = [s for s in doc.sentences if s.lines]
        if marked:  # -DOCSTART- in the file: an item per document
            units.append(sentences)
        else:
            units.extend([s] for s in sentences)
    for n, unit in enumerate((u for u in units if u), start=1):
        out.records += 1
        item_id = f"{path.stem}-{n}"
        problems = [s.problem for s in unit if s.problem is not None]
        if problems:
            out.skip(path.name, problems[0][0], item_id, problems[0][1])
            continue
        try:
            out.add(_item(item_id, unit), path.name, unit[0].lines[0][0])
        except ValueError as exc:  # BadRecord, the reader's rules, pydantic
            out.skip(path.name, unit[0].lines[0][0], item_id, str(exc).splitlines()[0])
    return out


def _split(lines: Iterable[bytes]) -> tuple[list[_Doc], bool]:
    """Documents of sentences, and whether the file marks documents (-DOCSTART-). A line
    that is not UTF-8 (or holds NUL bytes) is its sentence's problem, as in our JSONL."""
    docs, marked = [_Doc()], False
    for number, data in enumerate(lines, start=1):
        raw, problem = decode_line(data)
        if raw is None:
            sentence = docs[-1].sentences[-1]
            if sentence.problem is None:
                sentence.problem = (number, problem)
            sentence.lines.append((number, "?", "O"))
            continue
        raw = raw.rstrip("\r\n")
        line = raw.strip()
        if line.startswith("-DOCSTART-"):
            docs.append(_Doc())
            marked = True
            continue
        sentences = docs[-1].sentences
        if not line:
            if sentences[-1].lines:
                sentences.append(_Sentence())
            continue
        cols = line.split()
        sentence = sentences[-1]
        if len(cols) < 2 or not _TAG.match(cols[-1]):
            if sentence.problem is None:
                sentence.problem = (number, f"expected 'TOKEN ... TAG' with a BIO tag, got {raw!r}")
            sentence.lines.append((number, cols[0], "O"))
            continue
        sentence.lines.append((number, cols[0], cols[-1]))
    return docs, marked


def _item(item_id: str, sentences: list[_Sentence]) -> DatasetItem:
    parts: list[str] = []
    spans: list[tuple[str, int, int]] = []  # (type, start, end)
    offset = 0
    for s, sentence in enumerate(sentences):
        if s:
            parts.append("\n")
            offset += 1
        open_: tuple[str, int, int] | None = None
        for t, (_, token, tag) in enumerate(sentence.lines):
            if t:
                parts.append(" ")
                offset += 1
            start, end = offset, offset + len(token)
            parts.append(token)
            offset = end
            prefix, _, type_ = tag.partition("-")
            if prefix == "I" and open_ is not None and open_[0] == type_:
                open_ = (type_, open_[1], end)
                continue
            if open_ is not None:
                spans.append(open_)
                open_ = None
            if prefix in ("B", "I"):
                open_ = (type_, start, end)
        if open_ is not None:
            spans.append(open_)
    text = "".join(parts)
    entities = [span_entity(text, start, end, type_) for type_, start, end in spans]
    return make_item(item_id, text, entities, [])
