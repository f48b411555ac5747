"""The gold a run is scored against: labels mapped, low-confidence objects as ignore regions.

Every path that scores a dataset item (``run-experiment``, ``score``, ``compare``, ``report``,
``matrix``, ``runs finalize``) goes through :func:`score_dataset_item`, so they agree.

- **Labels.** The item's schema may map gold labels to the labels the pipeline is asked for
  (``Schema.labels``); gold types are mapped before scoring.
- **Ignore regions.** With a confidence ``floor``, an ensemble-gold object below it is neither
  a miss when nothing predicts it nor the cause of a false positive when something does: the
  prediction the scoring's own alignment pairs with it is dropped from the item's counts (as
  a "don't care" region in detection benchmarks). Both numbers are kept on the ``ItemScore``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from extraction_eval.evaluators.clusters import gold_clusters
from extraction_eval.evaluators.config import ScoringConfig, type_key
from extraction_eval.evaluators.item import ItemScore, Kind, score_item
from extraction_eval.evaluators.matching import align_entities, align_relationships
from extraction_eval.evaluators.taxonomy import Side
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, Schema

__all__ = [
    "GoldView",
    "IgnoredGold",
    "ignored_gold",
    "mapped_gold",
    "score_dataset_item",
]


# ``metadata.gold.ignore_below`` on an item as a run saw it: the run's confidence floor
IGNORE_BELOW = "ignore_below"


# schema -> (the schema, what the pipeline is asked, gold label key -> asked label): a run's or
# a dataset's schema is one object shared by every item, so each is worked out once
_SCHEMAS: dict[int, tuple[Schema, Schema, dict[str, str]]] = {}


def _asked(schema: Schema) -> tuple[Schema, dict[str, str]]:
    hit = _SCHEMAS.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_SCHEMAS) >= 256:  # items with schemas of their own: keep it small
            _SCHEMAS.clear()
        index = {type_key(gold): asked for gold, asked in schema.labels.items()}
        hit = _SCHEMAS[id(schema)] = (schema, schema.asked(), index)
    return hit[1], hit[2]


def mapped_gold(expected: Extraction, schema: Schema | None) -> Extraction:
    """Gold with its types mapped through the schema's ``labels`` (unchanged without any)."""
    if schema is None or not schema.labels:
        return expected
    index = _asked(schema)[1]

    def mapped(type_: str) -> str:
        return index.get(type_key(type_), type_)

    return Extraction(
        entities=[
            e if (t := mapped(e.type)) == e.type else e.model_copy(update={"type": t})
            for e in expected.entities
        ],
        relationships=[
            r if (t := mapped(r.type)) == r.type else r.model_copy(update={"type": t})
            for r in expected.relationships
        ],
    )


def scored_gold(item: DatasetItem) -> Extraction:
    """The item's gold as it is scored: labels mapped by its schema (all objects: ignored ones
    keep their place, so indices of a score point into this list)."""
    return mapped_gold(item.expected, item.schema_)


@dataclass(frozen=True, slots=True)
class IgnoredGold:
    """Indices of gold objects below the confidence floor (into ``expected``'s lists)."""

    entities: frozenset[int] = frozenset()
    relationships: frozenset[int] = frozenset()

    def __len__(self) -> int:
        return len(self.entities) + len(self.relationships)


def ignored_gold(
    expected: Extraction, metadata: Mapping[str, Any], floor: float | None
) -> IgnoredGold:
    """The gold objects whose ensemble confidence (``metadata.gold``, one entry per object, in
    order) is below ``floor``. Gold without confidences, or whose metadata does not line up
    with its objects, is trusted as it is."""
    meta = metadata.get("gold")
    if not isinstance(meta, Mapping):
        return IgnoredGold()
    if floor is None:  # the item as a run saw it (``GoldView.item``) carries the run's floor
        below = meta.get(IGNORE_BELOW)
        floor = float(below) if isinstance(below, (int, float)) else None
    if floor is None:
        return IgnoredGold()
    ents, rels = meta.get("entities"), meta.get("relationships")
    if not (
        isinstance(ents, list)
        and isinstance(rels, list)
        and len(ents) == len(expected.entities)
        and len(rels) == len(expected.relationships)
    ):
        return IgnoredGold()

    def low(entries: list[Any]) -> frozenset[int]:
        out = set()
        for j, m in enumerate(entries):
            c = m.get("confidence") if isinstance(m, Mapping) else None
            if isinstance(c, (int, float)) and not isinstance(c, bool) and c < floor:
                out.add(j)
        return frozenset(out)

    return IgnoredGold(low(ents), low(rels))


def score_dataset_item(
    item: DatasetItem,
    pred: Extraction | None,
    config: ScoringConfig,
    *,
    floor: float | None = None,
    context_texts: Mapping[str, str] | None = None,
) -> ItemScore:
    """Score a dataset item's prediction against its gold: labels mapped by the item's schema,
    gold objects below ``floor`` (ensemble confidence) ignored with the predictions aligned
    to them. The one function every scoring path calls."""
    schema = item.schema_
    gold = mapped_gold(item.expected, schema)
    asked = _asked(schema)[0] if schema is not None else None
    ignore = ignored_gold(item.expected, item.metadata, floor)
    if not len(ignore):
        return score_item(
            item_id=item.id,
            text=item.text,
            gold=gold,
            pred=pred,
            config=config,
            context_texts=context_texts,
            schema=asked,
        )
    p = pred if pred is not None else Extraction()
    # the scoring's own alignment on the whole gold decides which predictions an ignored
    # gold object takes with it
    clusters = gold_clusters(list(gold.entities), config, asked)
    ents = align_entities(list(p.entities), list(gold.entities), config, clusters)
    rels = align_relationships(list(p.relationships), list(gold.relationships), config, clusters)
    drop_pe = {x.pred for x in ents.pairs if x.gold in ignore.entities}
    drop_pr = {x.pred for x in rels.pairs if x.gold in ignore.relationships}
    pe = _kept(p.entities, drop_pe)
    pr = _kept(p.relationships, drop_pr)
    ge = _kept(gold.entities, ignore.entities)
    gr = _kept(gold.relationships, ignore.relationships)
    scored = score_item(
        item_id=item.id,
        text=item.text,
        gold=Extraction(
            entities=[gold.entities[j] for j in ge],
            relationships=[gold.relationships[j] for j in gr],
        ),
        pred=None
        if pred is None
        else Extraction(
            entities=[p.entities[i] for i in pe], relationships=[p.relationships[i] for i in pr]
        ),
        config=config,
        context_texts=context_texts,
        schema=asked,
    )
    ignored: list[tuple[Kind, Side, int]] = [
        *(("entity", "gold", j) for j in sorted(ignore.entities)),
        *(("relationship", "gold", j) for j in sorted(ignore.relationships)),
        *(("entity", "pred", i) for i in sorted(drop_pe)),
        *(("relationship", "pred", i) for i in sorted(drop_pr)),
    ]
    return _remapped(scored, pe, pr, ge, gr, tuple(ignored))


def _kept(objects: Sequence[Entity] | Sequence[Relationship], dropped: Any) -> list[int]:
    return [i for i in range(len(objects)) if i not in dropped]


def _remapped(
    s: ItemScore,
    pe: list[int],
    pr: list[int],
    ge: list[int],
    gr: list[int],
    ignored: tuple[tuple[Kind, Side, int], ...],
) -> ItemScore:
    """``s`` (scored on the kept objects) with every index pointing into the original lists,
    so stored taxonomy, pairs and groundings still name the objects of the stored output."""

    def pred_map(kind: str) -> list[int]:
        return pe if kind == "entity" else pr

    def gold_map(kind: str) -> list[int]:
        return ge if kind == "entity" else gr

    return replace(
        s,
        entity_pairs=tuple(replace(x, pred=pe[x.pred], gold=ge[x.gold]) for x in s.entity_pairs),
        entity_typed_pairs=tuple(
            replace(x, pred=pe[x.pred], gold=ge[x.gold]) for x in s.entity_typed_pairs
        ),
        relationship_pairs=tuple(
            replace(x, pred=pr[x.pred], gold=gr[x.gold]) for x in s.relationship_pairs
        ),
        groundings=tuple(replace(g, index=pred_map(g.kind)[g.index]) for g in s.groundings),
        taxonomy=tuple(
            replace(
                t,
                index=(pred_map(t.kind) if t.side == "pred" else gold_map(t.kind))[t.index],
                related=tuple(gold_map(t.kind)[j] for j in t.related),
            )
            for t in s.taxonomy
        ),
        attribute_violations=tuple(
            replace(v, index=pred_map(v.kind)[v.index]) for v in s.attribute_violations
        ),
        ignored=ignored,
    )


@dataclass(frozen=True, slots=True)
class GoldView:
    """How a stored run saw its gold: the confidence floor and the schema it ran with (the
    run's ``--schema``, else the dataset's for items without their own). Read from the run's
    recorded config, so ``compare``, ``report`` and ``matrix`` score as the run did."""

    floor: float | None = None
    schema: Schema | None = None  # the run's override: every item
    dataset_schema: Schema | None = None  # the dataset's: items without their own

    @classmethod
    def of_run(cls, config: Mapping[str, Any]) -> GoldView:
        floor = config.get("min_gold_confidence")
        return cls(
            floor=float(floor) if isinstance(floor, (int, float)) else None,
            schema=_schema(config.get("schema")),
            dataset_schema=_schema(config.get("dataset_schema")),
        )

    def item(self, item: DatasetItem) -> DatasetItem:
        """The item as the run saw it: the schema the run gave it (labels still on it: scoring
        maps the gold) and, on ensemble gold, the run's floor (``metadata.gold.ignore_below``),
        so :func:`score_dataset_item` scores it as the run did without being told."""
        update: dict[str, Any] = {}
        schema = self.schema or item.schema_ or self.dataset_schema
        if schema is not item.schema_:
            update["schema_"] = schema
        gold = item.metadata.get("gold")
        if self.floor is not None and isinstance(gold, Mapping):
            update["metadata"] = {**item.metadata, "gold": {**gold, IGNORE_BELOW: self.floor}}
        return item.model_copy(update=update) if update else item

    def schemas_key(self) -> Any:
        """What of the view beyond the floor decides counts (its schemas), for
        ``counts_key``; None when the run had neither, so older keys stay valid."""
        if self.schema is None and self.dataset_schema is None:
            return None
        return [
            s.model_dump(mode="json") if s else None for s in (self.schema, self.dataset_schema)
        ]

    def score(
        self,
        item: DatasetItem,
        pred: Extraction | None,
        config: ScoringConfig,
        *,
        context_texts: Mapping[str, str] | None = None,
    ) -> ItemScore:
        return score_dataset_item(
            self.item(item), pred, config, floor=self.floor, context_texts=context_texts
        )


def _schema(value: Any) -> Schema | None:
    return Schema.model_validate(value) if isinstance(value, dict) else None
