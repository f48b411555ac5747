"""End-to-end relation extraction as Taillé et al. (EMNLP 2020, "Let's Stop Incorrect
Comparisons in End-to-end Relation Extraction!") define it.

A relation is a tuple of its type and its two arguments. ``re_strict``: the tuple
(head span, head type, relation type, tail span, tail type); ``re_boundaries``: (head span,
relation type, tail span), argument types ignored. A span is the argument entity's
half-open character offsets (its ``start``/``end``, else its first mention's). Per
document, predictions and gold are sets of tuples (a repeated tuple counts once):
tp = |P ∩ G|, fp = |P \\ G|, fn = |G \\ P|, summed over documents (micro); P = tp / (tp + fp),
R = tp / (tp + fn), F1 = 2tp / (2tp + fp + fn). Arguments are ordered (no symmetric types).

A relationship's arguments are its ``head``/``tail`` indices into the item's entities; a
predicted one without indices names them, and a name that fits exactly one predicted entity
(casefolded) stands for it. Relationships whose arguments carry no offsets, or cannot be
found, are counted (``without_offsets``), not scored. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from extraction_eval.evaluators.metrics import Counts, counts_json
from extraction_eval.evaluators.protocols.rows import CountRows
from extraction_eval.evaluators.protocols.spans import (
    DocumentFold,
    Problems,
    Span,
    check_span,
    entity_spans,
    type_key,
)
from extraction_eval.types import Entity, Extraction, Relationship

__all__ = ["RelextAccumulator"]

_Arg = tuple[Span, str]  # (span, entity type)


def _argument_spans(
    item_id: str,
    side: str,
    entities: Sequence[Entity],
    text: str,
    skip: Callable[[str, str, str], None],
) -> list[_Arg | None]:
    """Per entity, its span and type, or None when it has no usable offsets."""
    out: list[_Arg | None] = []
    for index, entity in enumerate(entities):
        spans = entity_spans(entity)
        if entity.start is not None or entity.end is not None:
            spans = [(entity.start, entity.end)]
        arg: _Arg | None = None
        if spans:
            start, end = spans[0]
            problem = check_span(start, end, len(text))
            if problem is not None:
                skip(item_id, f"{side} entity {index} ({entity.name[:60]!r})", problem)
            elif start is not None and end is not None:
                arg = ((start, end), entity.type)
        out.append(arg)
    return out


def _index(
    r: Relationship, which: str, entities: Sequence[Entity], by_name: dict[str, list[int]]
) -> int | str:
    """The argument's entity index, or why there is none."""
    value = r.head if which == "head" else r.tail
    if value is None:
        found = by_name.get(type_key(r.source if which == "head" else r.target), [])
        if len(found) == 1:
            return found[0]
        return "no entity of that name" if not found else "names two entities"
    if not 0 <= value < len(entities):
        return f"{which} {value} out of range ({len(entities)} entities)"
    return value


class RelextAccumulator(DocumentFold):
    """``re_strict`` and ``re_boundaries`` counts summed over documents, overall and per
    relation type."""

    def __init__(self, problems: Problems | None = None, rows: CountRows | None = None) -> None:
        super().__init__(problems, rows)
        self.counts = {"re_strict": [0, 0, 0], "re_boundaries": [0, 0, 0]}
        self.per_type: dict[str, dict[str, list[int]]] = {"re_strict": {}, "re_boundaries": {}}
        self.without_offsets = {"gold": 0, "predicted": 0}

    def _tuples(
        self, item_id: str, side: str, extraction: Extraction, text: str
    ) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
        entities = extraction.entities
        args = _argument_spans(item_id, side, entities, text, self._skip)
        by_name: dict[str, list[int]] = {}
        if any(r.head is None or r.tail is None for r in extraction.relationships):
            for i, e in enumerate(entities):  # only relationships without indices need names
                by_name.setdefault(type_key(e.name), []).append(i)
        strict: set[tuple[Any, ...]] = set()
        boundaries: set[tuple[Any, ...]] = set()
        n_entities = len(entities)
        for n, r in enumerate(extraction.relationships):
            if r.head is not None and r.tail is not None and 0 <= r.head < n_entities > r.tail >= 0:
                h, t = args[r.head], args[r.tail]
                if h is None or t is None:
                    self.without_offsets[side] += 1
                else:
                    strict.add((h[0], h[1], r.type, t[0], t[1]))
                    boundaries.add((h[0], r.type, t[0]))
                continue
            head = _index(r, "head", entities, by_name)
            tail = _index(r, "tail", entities, by_name)
            bad = next((x for x in (head, tail) if isinstance(x, str)), None)
            if bad is not None and "out of range" in bad:
                self._skip(item_id, f"{side} relationship {n}", bad)
                continue
            if isinstance(head, str) or isinstance(tail, str):
                self.without_offsets[side] += 1
                continue
            h, t = args[head], args[tail]
            if h is None or t is None:
                self.without_offsets[side] += 1
                continue
            strict.add((h[0], h[1], r.type, t[0], t[1]))
            boundaries.add((h[0], r.type, t[0]))
        return strict, boundaries

    def add(self, item_id: str, text: str, gold: Extraction, pred: Extraction | None) -> None:
        """One document; ``pred`` None is a failed item (its gold relations are missed)."""
        self.documents += 1
        self.failed = self.failed or pred is None
        gold_sets = self._tuples(item_id, "gold", gold, text)
        pred_sets = self._tuples(item_id, "predicted", pred or Extraction(), text)
        for name, g, p in zip(("re_strict", "re_boundaries"), gold_sets, pred_sets, strict=True):
            acc = self.counts[name]
            row = (len(p & g), len(p - g), len(g - p))
            for k in range(3):
                acc[k] += row[k]
            if self.rows is not None:
                self.rows.add(name, *row)
            type_at = 2 if name == "re_strict" else 1
            for side, tuples in ((0, p & g), (1, p - g), (2, g - p)):
                for tup in tuples:
                    self.per_type[name].setdefault(tup[type_at], [0, 0, 0])[side] += 1

    def report(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name, acc in self.counts.items():
            block: dict[str, Any] = counts_json(Counts(*acc), failed=self.failed)
            block["per_type"] = {
                label: counts_json(Counts(*c), failed=self.failed)
                for label, c in sorted(self.per_type[name].items())
            }
            block["documents"] = self.documents
            block["without_offsets"] = dict(self.without_offsets)
            block["skipped"] = self.skipped
            out[name] = block
        return out
