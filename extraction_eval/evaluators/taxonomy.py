"""Failure taxonomy: why each object of an item was not a clean match.

Each gold object left unmatched is ``missed``. Each predicted object gets at most one category,
the first that applies in a fixed precedence (README, "Scoring reference"), so category counts
add up and never double count an object. Near-miss categories (truncated, merged, reversed,
wrong_relation_type) look only at gold objects the alignment left unmatched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from extraction_eval.evaluators.evidence import TextIndex
from extraction_eval.evaluators.matching import (
    EntityPair,
    RelationshipMatrices,
    RelationshipPair,
)
from extraction_eval.types import Entity, Relationship

Category = Literal[
    "missed",
    "spurious",
    "wrong_type",
    "truncated",
    "merged",
    "hallucinated_on_empty",
    "ungrounded",
    "context_bleed",
    "reversed",
    "wrong_relation_type",
    "hallucinated_argument",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
Kind = Literal["entity", "relationship"]
Side = Literal["gold", "pred"]


@dataclass(frozen=True, slots=True)
class TaxonomyEntry:
    """One object and its category. ``related`` are gold indices the category points at
    (the gold of a wrong_type pair, the gold name a truncation came from, ...); ``source_id``
    is the other item whose text holds a context_bleed string."""

    category: Category
    kind: Kind
    side: Side
    index: int
    label: str
    related: tuple[int, ...] = ()
    source_id: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "category": self.category,
            "kind": self.kind,
            "side": self.side,
            "index": self.index,
            "label": self.label,
        }
        if self.related:
            out["related"] = list(self.related)
        if self.source_id is not None:
            out["source_id"] = self.source_id
        return out


def relationship_label(r: Relationship) -> str:
    return f"({r.source}, {r.type}, {r.target})"


def truncated_of(pred_key: str, gold_keys: Sequence[tuple[int, str]]) -> tuple[int, ...]:
    """Gold objects whose name properly contains the prediction (a shorter substring)."""
    if not pred_key:
        return ()
    return tuple(j for j, g in gold_keys if len(pred_key) < len(g) and pred_key in g)


def merged_of(pred_key: str, gold_keys: Sequence[tuple[int, str]]) -> tuple[int, ...]:
    """Gold objects whose names the prediction contains, when there are two or more."""
    hits = tuple(j for j, g in gold_keys if g and len(g) < len(pred_key) and g in pred_key)
    return hits if len(hits) >= 2 else ()


Elsewhere = Callable[[str], str | None]


def _not_found(
    missing: Sequence[str], elsewhere: Elsewhere
) -> tuple[Literal["context_bleed", "ungrounded"], str | None]:
    for s in missing:
        other = elsewhere(s)
        if other is not None:
            return "context_bleed", other
    return "ungrounded", None


def classify_entities(
    pred: Sequence[Entity],
    gold: Sequence[Entity],
    pairs: Sequence[EntityPair],
    *,
    gold_empty: bool,
    grounded: Sequence[bool | None],
    text: TextIndex,
    elsewhere: Elsewhere,
    key: Callable[[str], str],
) -> list[TaxonomyEntry]:
    """Precedence for a predicted entity: hallucinated_on_empty; if matched: wrong_type, then
    context_bleed/ungrounded evidence; if unmatched: truncated, merged, context_bleed,
    ungrounded, spurious. ``grounded[i]`` is None when entity i carries no evidence."""
    out: list[TaxonomyEntry] = []
    by_pred = {p.pred: p for p in pairs}
    matched_gold = {p.gold for p in pairs}
    open_gold = [(j, key(g.name)) for j, g in enumerate(gold) if j not in matched_gold]
    for j, _ in open_gold:
        out.append(TaxonomyEntry("missed", "entity", "gold", j, gold[j].name))
    for i, e in enumerate(pred):
        entry: TaxonomyEntry | None
        if gold_empty:
            entry = TaxonomyEntry("hallucinated_on_empty", "entity", "pred", i, e.name)
        elif i in by_pred:
            pair = by_pred[i]
            entry = None
            if not pair.type_equal:
                entry = TaxonomyEntry("wrong_type", "entity", "pred", i, e.name, (pair.gold,))
            elif grounded[i] is False and e.evidence is not None:
                cat, other = _not_found([e.evidence], elsewhere)
                entry = TaxonomyEntry(cat, "entity", "pred", i, e.name, source_id=other)
        else:
            k = key(e.name)
            truncated = truncated_of(k, open_gold)
            merged = () if truncated else merged_of(k, open_gold)
            if truncated:
                entry = TaxonomyEntry("truncated", "entity", "pred", i, e.name, truncated)
            elif merged:
                entry = TaxonomyEntry("merged", "entity", "pred", i, e.name, merged)
            else:
                missing = [] if text.contains(e.name) else [e.name]
                if grounded[i] is False and e.evidence is not None:
                    missing.append(e.evidence)
                if missing:
                    cat, other = _not_found(missing, elsewhere)
                    entry = TaxonomyEntry(cat, "entity", "pred", i, e.name, source_id=other)
                else:
                    entry = TaxonomyEntry("spurious", "entity", "pred", i, e.name)
        if entry is not None:
            out.append(entry)
    return out


def classify_relationships(
    pred: Sequence[Relationship],
    gold: Sequence[Relationship],
    pairs: Sequence[RelationshipPair],
    matrices: RelationshipMatrices | None,
    *,
    gold_empty: bool,
    grounded: Sequence[bool | None],
    text: TextIndex,
    elsewhere: Elsewhere,
    is_gold_entity: Callable[[str], bool],
) -> list[TaxonomyEntry]:
    """Precedence for a predicted relationship: hallucinated_on_empty; if matched:
    context_bleed/ungrounded evidence; if unmatched: reversed, wrong_relation_type,
    context_bleed, hallucinated_argument, ungrounded, spurious."""
    out: list[TaxonomyEntry] = []
    if not pred and not gold:
        return out
    by_pred = {p.pred for p in pairs}
    matched_gold = {p.gold for p in pairs}
    open_gold = np.asarray([j for j in range(len(gold)) if j not in matched_gold], dtype=np.intp)
    for j in open_gold:
        out.append(
            TaxonomyEntry("missed", "relationship", "gold", int(j), relationship_label(gold[j]))
        )
    if matrices is not None and open_gold.size and len(pred) > len(by_pred):
        reversed_, wrong_type = matrices.near_misses(open_gold.tolist())
    else:
        reversed_ = wrong_type = np.zeros((len(pred), 0), dtype=bool)
    for i, r in enumerate(pred):
        if i in by_pred and grounded[i] is not False:
            continue  # the common case: matched, nothing to report
        label = relationship_label(r)
        if gold_empty:
            out.append(TaxonomyEntry("hallucinated_on_empty", "relationship", "pred", i, label))
            continue
        if i in by_pred:
            if r.evidence is not None:
                cat, other = _not_found([r.evidence], elsewhere)
                out.append(TaxonomyEntry(cat, "relationship", "pred", i, label, source_id=other))
            continue
        if reversed_[i].any():
            related = tuple(int(j) for j in open_gold[reversed_[i]])
            out.append(TaxonomyEntry("reversed", "relationship", "pred", i, label, related))
            continue
        if wrong_type[i].any():
            related = tuple(int(j) for j in open_gold[wrong_type[i]])
            out.append(
                TaxonomyEntry("wrong_relation_type", "relationship", "pred", i, label, related)
            )
            continue
        absent = [s for s in (r.source, r.target) if not text.contains(s)]
        missing = list(absent)
        if grounded[i] is False and r.evidence is not None:
            missing.append(r.evidence)
        if not missing:
            out.append(TaxonomyEntry("spurious", "relationship", "pred", i, label))
            continue
        cat, other = _not_found(missing, elsewhere)
        if cat == "ungrounded" and any(not is_gold_entity(s) for s in absent):
            out.append(TaxonomyEntry("hallucinated_argument", "relationship", "pred", i, label))
        else:
            out.append(TaxonomyEntry(cat, "relationship", "pred", i, label, source_id=other))
    return out
