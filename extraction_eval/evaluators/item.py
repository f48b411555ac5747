"""Per-item scoring: one item's gold and prediction into an :class:`ItemScore`.

An :class:`ItemScore` keeps only counts and pairs; every ratio is computed from counts when it
is asked for. A failed item (no output) never counts as a pass: its ratios are 0, never the
both-empty 1.0, and on a gold-empty item it fails ``zero_fp_pass``. Turning it into stored
scores is :mod:`.scores`; summing many into the run report is :mod:`.report`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from extraction_eval.evaluators.attributes import (
    AttributeViolation,
    check_attributes,
    violating_objects,
)
from extraction_eval.evaluators.clusters import gold_clusters
from extraction_eval.evaluators.config import MatchMode, ScoringConfig, type_key
from extraction_eval.evaluators.evidence import Span, TextIndex, find_in_other_text
from extraction_eval.evaluators.matching import (
    RELATIONSHIP_MATCH_TYPES,
    EntityPair,
    RelationshipPair,
    align_entities,
    align_relationships,
    any_name_matches,
)
from extraction_eval.evaluators.metrics import (
    Counts,
    accuracy,
    counts_json,
    f1,
    precision,
    ratio,
    recall,
    vacuous,
)
from extraction_eval.evaluators.similarity import name_key
from extraction_eval.evaluators.taxonomy import (
    CATEGORIES,
    TaxonomyEntry,
    classify_entities,
    classify_relationships,
)
from extraction_eval.types import Entity, Extraction, Relationship, Schema

Kind = Literal["entity", "relationship"]

VALUE_NAMES: tuple[str, ...] = (
    "entity_precision",
    "entity_recall",
    "entity_f1",
    "entity_typed_precision",
    "entity_typed_recall",
    "entity_typed_f1",
    "type_accuracy",
    "relationship_precision",
    "relationship_recall",
    "relationship_f1",
    "relationship_accuracy",
    "evidence_coverage_rate",
)


@dataclass(frozen=True, slots=True)
class TypeCount:
    """Per-type counts in one item. ``key`` is the casefolded type, ``label`` the
    alphabetically first spelling seen (deterministic whatever the order of objects)."""

    key: str
    label: str
    tp: int
    fp: int
    fn: int


@dataclass(frozen=True, slots=True)
class AttributeCount:
    """Agreement of one attribute key over matched pairs: ``agree`` of ``total`` gold values."""

    kind: Kind
    key: str
    agree: int
    total: int


@dataclass(frozen=True, slots=True)
class Grounding:
    """A predicted object that carries evidence; ``spans`` is None when it was not found."""

    kind: Kind
    index: int
    spans: tuple[Span, ...] | None

    @property
    def grounded(self) -> bool:
        return self.spans is not None


def _has_evidence(value: str | None) -> bool:
    return value is not None and bool(value.strip())


@dataclass(frozen=True, slots=True)
class ItemScore:
    """Everything learned about one item, as counts and pairs (indices into the lists given)."""

    item_id: str
    failed: bool
    gold_empty: bool
    n_gold_entities: int
    n_pred_entities: int
    entity_pairs: tuple[EntityPair, ...]
    entity_typed_pairs: tuple[EntityPair, ...]
    n_gold_relationships: int
    n_pred_relationships: int
    relationship_pairs: tuple[RelationshipPair, ...]
    entity_types: tuple[TypeCount, ...]
    relationship_types: tuple[TypeCount, ...]
    attributes: tuple[AttributeCount, ...]
    groundings: tuple[Grounding, ...]
    taxonomy: tuple[TaxonomyEntry, ...]
    # schema-declared attributes: whether the item's schema declares any, how many predicted
    # objects were checked against a declaration, and what broke it
    attributes_declared: bool = False
    attribute_checked: int = 0
    attribute_violations: tuple[AttributeViolation, ...] = ()
    # ensemble gold below the run's confidence floor: gold objects left out, and the
    # predictions aligned with them, dropped from every count (``gold_view``)
    # (kind, side, index into the stored lists) of each ignored object
    ignored: tuple[tuple[Kind, Literal["gold", "pred"], int], ...] = ()
    # ``values()`` once computed (the stored scores and the run summary both ask for them)
    _values: dict[str, float | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def ignored_gold(self) -> int:
        return sum(1 for _, side, _ in self.ignored if side == "gold")

    @property
    def ignored_predictions(self) -> int:
        return sum(1 for _, side, _ in self.ignored if side == "pred")

    def listed(self, kind: Kind, side: Literal["gold", "pred"]) -> int:
        """How many objects of ``kind`` the item's stored gold / prediction lists hold (the
        counted ones and the ignored ones): the range of every index here."""
        counted = {
            ("entity", "gold"): self.n_gold_entities,
            ("entity", "pred"): self.n_pred_entities,
            ("relationship", "gold"): self.n_gold_relationships,
            ("relationship", "pred"): self.n_pred_relationships,
        }[(kind, side)]
        return counted + sum(1 for k, s, _ in self.ignored if (k, s) == (kind, side))

    # ---- counts -------------------------------------------------------------------------
    @property
    def entities(self) -> Counts:
        tp = len(self.entity_pairs)
        return Counts(tp, self.n_pred_entities - tp, self.n_gold_entities - tp)

    @property
    def entities_typed(self) -> Counts:
        tp = len(self.entity_typed_pairs)
        return Counts(tp, self.n_pred_entities - tp, self.n_gold_entities - tp)

    @property
    def relationships(self) -> Counts:
        tp = len(self.relationship_pairs)
        return Counts(tp, self.n_pred_relationships - tp, self.n_gold_relationships - tp)

    @property
    def type_correct(self) -> int:
        return sum(1 for p in self.entity_pairs if p.type_equal)

    @property
    def predicted_objects(self) -> int:
        return self.n_pred_entities + self.n_pred_relationships

    def with_evidence(self, kind: Kind | None = None) -> int:
        return sum(1 for g in self.groundings if kind is None or g.kind == kind)

    def grounded(self, kind: Kind | None = None) -> int:
        return sum(1 for g in self.groundings if g.grounded and (kind is None or g.kind == kind))

    @property
    def hallucination_count(self) -> int:
        """Predicted objects on an item whose gold is empty (0 on other items and on a failed
        item, which predicted nothing: the run's rate leaves failed items out)."""
        return self.predicted_objects if self.gold_empty else 0

    @property
    def zero_fp_pass(self) -> bool | None:
        """True when a gold-empty item produced an output with no object; False when it
        predicted something or failed (a crash is not a pass); None on other items."""
        if not self.gold_empty:
            return None
        return not self.failed and self.predicted_objects == 0

    def match_type_counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(RELATIONSHIP_MATCH_TYPES, 0)
        for p in self.relationship_pairs:
            counts[p.match_type] += 1
        return counts

    def alias_match_counts(self) -> dict[str, int]:
        """Matches made through a gold entity's mention or alias rather than its own name
        (entities, typed entities, relationships with such an endpoint)."""
        return {
            "entities": sum(1 for p in self.entity_pairs if p.surface),
            "entities_typed": sum(1 for p in self.entity_typed_pairs if p.surface),
            "relationships": sum(1 for p in self.relationship_pairs if p.via_alias),
        }

    def entity_match_type_counts(self) -> dict[str, int]:
        counts = {"exact": 0, "fuzzy": 0}
        for p in self.entity_pairs:
            counts[p.match_type] += 1
        return counts

    def attribute_key_counts(self) -> dict[str, tuple[int, int]]:
        """(agree, total) per attribute key, entity and relationship pairs pooled."""
        out: dict[str, tuple[int, int]] = {}
        for a in self.attributes:
            agree, total = out.get(a.key, (0, 0))
            out[a.key] = (agree + a.agree, total + a.total)
        return dict(sorted(out.items()))

    @property
    def attribute_violation_count(self) -> int:
        """Predicted objects with at least one attribute outside their type's declaration."""
        return violating_objects(self.attribute_violations)

    def taxonomy_counts(self) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        for t in self.taxonomy:
            counts[t.category] += 1
        return counts

    # ---- ratios (computed, never stored) --------------------------------------------------
    def type_accuracy(self) -> float:
        c = self.entities
        return accuracy(self.type_correct, c.tp, both_empty=vacuous(c, failed=self.failed))

    def relationship_accuracy(self) -> float:
        """correct / extracted: matched relationships over predicted relationships."""
        c = self.relationships
        return accuracy(c.tp, c.predicted, both_empty=vacuous(c, failed=self.failed))

    def evidence_coverage_rate(self) -> float | None:
        """Grounded predicted objects / predicted objects; None when none carries evidence."""
        if not self.groundings:
            return None
        return ratio(self.grounded(), self.predicted_objects, both_empty=False)

    def values(self) -> dict[str, float | None]:
        """Item-level metric values (also what macro averages); all 0 on a failed item."""
        if self._values is None:
            object.__setattr__(self, "_values", self._compute_values())
        assert self._values is not None
        return dict(self._values)

    def _compute_values(self) -> dict[str, float | None]:
        e, t, r = self.entities, self.entities_typed, self.relationships
        x = self.failed
        return {
            "entity_precision": precision(e, failed=x),
            "entity_recall": recall(e, failed=x),
            "entity_f1": f1(e, failed=x),
            "entity_typed_precision": precision(t, failed=x),
            "entity_typed_recall": recall(t, failed=x),
            "entity_typed_f1": f1(t, failed=x),
            "type_accuracy": self.type_accuracy(),
            "relationship_precision": precision(r, failed=x),
            "relationship_recall": recall(r, failed=x),
            "relationship_f1": f1(r, failed=x),
            "relationship_accuracy": self.relationship_accuracy(),
            "evidence_coverage_rate": self.evidence_coverage_rate(),
        }

    def to_json(self) -> dict[str, Any]:
        """The ``--per-item`` line: counts, pairs, match types, grounding and taxonomy."""
        e, r = self.entities, self.relationships
        v = self.values()
        return {
            "id": self.item_id,
            "failed": self.failed,
            "gold_empty": self.gold_empty,
            "entities": {
                **counts_json(e, failed=self.failed),
                "type_correct": self.type_correct,
                "type_accuracy": v["type_accuracy"],
            },
            "entities_typed": counts_json(self.entities_typed, failed=self.failed),
            "relationships": {
                **counts_json(r, failed=self.failed),
                "accuracy": v["relationship_accuracy"],
            },
            "match_types": self.match_type_counts(),
            "entity_match_types": self.entity_match_type_counts(),
            **_alias_json(self.alias_match_counts()),
            "pairs": {
                "entities": [_entity_pair_json(p) for p in self.entity_pairs],
                "entities_typed": [_entity_pair_json(p) for p in self.entity_typed_pairs],
                "relationships": [
                    {
                        "pred": p.pred,
                        "gold": p.gold,
                        "match_type": p.match_type,
                        "similarity": p.similarity,
                        **({"via_alias": True} if p.via_alias else {}),
                    }
                    for p in self.relationship_pairs
                ],
            },
            "per_type": {
                "entities": {t.label: _tc_json(t) for t in self.entity_types},
                "relationships": {t.label: _tc_json(t) for t in self.relationship_types},
            },
            "attributes": attributes_json(self.attributes),
            "attribute_violations": {
                "checked": self.attribute_checked,
                "objects": self.attribute_violation_count,
                "violations": [v.to_json() for v in self.attribute_violations],
            },
            "evidence": {
                "predicted_objects": self.predicted_objects,
                "with_evidence": self.with_evidence(),
                "grounded": self.grounded(),
                "coverage_rate": v["evidence_coverage_rate"],
                "objects": [
                    {
                        "kind": g.kind,
                        "index": g.index,
                        "grounded": g.grounded,
                        "spans": None if g.spans is None else [list(s) for s in g.spans],
                    }
                    for g in self.groundings
                ],
            },
            "negative_space": {
                "zero_fp_pass": self.zero_fp_pass,
                # null on a failed item: there was no output to count hallucinations in
                "hallucination_count": None if self.failed else self.hallucination_count,
            },
            "taxonomy": [t.to_json() for t in self.taxonomy],
            "taxonomy_counts": self.taxonomy_counts(),
            **(
                {"ignored": {"gold": self.ignored_gold, "predictions": self.ignored_predictions}}
                if self.ignored_gold or self.ignored_predictions
                else {}
            ),
        }


def _entity_pair_json(p: EntityPair) -> dict[str, Any]:
    out = {"pred": p.pred, "gold": p.gold, "similarity": p.similarity, "type_equal": p.type_equal}
    if p.surface:
        out["surface"] = p.surface  # the gold entity's surface form that matched (0: its name)
    return out


def _alias_json(counts: dict[str, int]) -> dict[str, Any]:
    """``alias_matches`` when any match came through a mention or alias (absent otherwise, so
    items of gold without clusters read as they did)."""
    return {"alias_matches": counts} if any(counts.values()) else {}


def _tc_json(t: TypeCount) -> dict[str, Any]:
    return counts_json(Counts(t.tp, t.fp, t.fn))


def attributes_json(attrs: Iterable[AttributeCount]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {"entities": {}, "relationships": {}}
    for a in attrs:
        group = out["entities" if a.kind == "entity" else "relationships"]
        cur = group.setdefault(a.key, {"agree": 0, "total": 0})
        cur["agree"] += a.agree
        cur["total"] += a.total
    for group in out.values():
        for cur in group.values():
            cur["accuracy"] = ratio(cur["agree"], cur["total"], both_empty=False)
    return out


def _type_counts(
    pred_types: Sequence[str],
    gold_types: Sequence[str],
    matched_pred: set[int],
    matched_gold: set[int],
) -> tuple[TypeCount, ...]:
    """tp by the gold object's type; fp by the unmatched prediction's type; fn by gold type."""
    labels: dict[str, str] = {}
    acc: dict[str, list[int]] = {}
    for raw in (*pred_types, *gold_types):
        k, label = type_key(raw), raw.strip()
        if k not in labels:
            labels[k] = label
            acc[k] = [0, 0, 0]
        elif label < labels[k]:
            labels[k] = label
    for j, raw in enumerate(gold_types):
        acc[type_key(raw)][0 if j in matched_gold else 2] += 1
    for i, raw in enumerate(pred_types):
        if i not in matched_pred:
            acc[type_key(raw)][1] += 1
    return tuple(TypeCount(k, labels[k], *acc[k]) for k in sorted(labels))


def _attribute_counts(
    kind: Kind,
    pairs: Iterable[tuple[Mapping[str, str], Mapping[str, str]]],
) -> list[AttributeCount]:
    """Exact string agreement per gold attribute key on matched pairs ('unknown' == 'unknown')."""
    agree: dict[str, int] = {}
    total: dict[str, int] = {}
    for pred_attrs, gold_attrs in pairs:
        if not gold_attrs:
            continue
        for key, value in gold_attrs.items():
            total[key] = total.get(key, 0) + 1
            if pred_attrs.get(key) == value:
                agree[key] = agree.get(key, 0) + 1
    return [AttributeCount(kind, k, agree.get(k, 0), total[k]) for k in sorted(total)]


def score_item(
    *,
    item_id: str,
    text: str,
    gold: Extraction,
    pred: Extraction | None,
    config: ScoringConfig,
    context_texts: Mapping[str, str] | None = None,
    schema: Schema | None = None,
) -> ItemScore:
    """Score one item. ``pred=None`` means the item failed: scored as an empty prediction,
    flagged, and never a pass (ratios 0, zero_fp_pass False). ``context_texts`` (other items'
    texts by id; pass a ``ContextIndex`` when scoring many items) enables context_bleed.
    ``schema`` (the item's) checks predicted attributes against its declarations."""
    failed = pred is None
    p = pred if pred is not None else Extraction()
    pe: list[Entity] = list(p.entities)
    ge: list[Entity] = list(gold.entities)
    pr: list[Relationship] = list(p.relationships)
    gr: list[Relationship] = list(gold.relationships)
    gold_empty = not ge and not gr

    clusters = gold_clusters(ge, config, schema)
    ents = align_entities(pe, ge, config, clusters)
    rels = align_relationships(pr, gr, config, clusters)

    index = TextIndex(text, config.evidence)
    groundings: list[Grounding] = []

    def ground(kind: Kind, quotes: list[str | None]) -> list[bool | None]:
        """Grounded or not per object; None for an object without evidence."""
        out: list[bool | None] = []
        for i, quote in enumerate(quotes):
            if _has_evidence(quote):
                g = Grounding(kind, i, index.find(quote or ""))
                groundings.append(g)
                out.append(g.grounded)
            else:
                out.append(None)
        return out

    ent_grounded = ground("entity", [e.evidence for e in pe])
    rel_grounded = ground("relationship", [r.evidence for r in pr])

    def elsewhere(s: str) -> str | None:
        return find_in_other_text(s, item_id, context_texts)

    gold_names = [e.name for e in ge] + [x for r in gr for x in (r.source, r.target)]
    if clusters is not None:
        gold_names += [f for forms in clusters.forms for f in forms[1:]]

    def is_gold_entity(name: str) -> bool:
        return bool(any_name_matches([name], gold_names, config)[0])

    key_mode: MatchMode = "casefold" if config.match == "span" else config.match

    def key(name: str) -> str:
        return name_key(name, key_mode)

    taxonomy = classify_entities(
        pe,
        ge,
        ents.pairs,
        gold_empty=gold_empty,
        grounded=ent_grounded,
        text=index,
        elsewhere=elsewhere,
        key=key,
    )
    taxonomy += classify_relationships(
        pr,
        gr,
        rels.pairs,
        rels.matrices,
        gold_empty=gold_empty,
        grounded=rel_grounded,
        text=index,
        elsewhere=elsewhere,
        is_gold_entity=is_gold_entity,
    )
    attributes = _attribute_counts(
        "entity", ((pe[x.pred].attributes, ge[x.gold].attributes) for x in ents.pairs)
    ) + _attribute_counts(
        "relationship", ((pr[x.pred].attributes, gr[x.gold].attributes) for x in rels.pairs)
    )
    checked, violations = check_attributes(schema, pe, pr)
    return ItemScore(
        item_id=item_id,
        failed=failed,
        gold_empty=gold_empty,
        n_gold_entities=len(ge),
        n_pred_entities=len(pe),
        entity_pairs=ents.pairs,
        entity_typed_pairs=ents.typed_pairs,
        n_gold_relationships=len(gr),
        n_pred_relationships=len(pr),
        relationship_pairs=rels.pairs,
        entity_types=_type_counts(
            [e.type for e in pe],
            [e.type for e in ge],
            {x.pred for x in ents.typed_pairs},
            {x.gold for x in ents.typed_pairs},
        ),
        relationship_types=_type_counts(
            [r.type for r in pr],
            [r.type for r in gr],
            {x.pred for x in rels.pairs},
            {x.gold for x in rels.pairs},
        ),
        attributes=tuple(attributes),
        groundings=tuple(groundings),
        taxonomy=tuple(taxonomy),
        attributes_declared=schema is not None and schema.has_attributes,
        attribute_checked=checked,
        attribute_violations=violations,
    )
