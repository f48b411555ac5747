"""Extraction-aware diff of one item between two runs: which objects got fixed, which broke.

Both runs are scored against the gold with :func:`~extraction_eval.evaluators.score_item`
(the same one-to-one alignment and failure taxonomy the run's scores come from), then each
gold object is followed from A to B through the prediction it was aligned with:

- entity: ``right`` (aligned by name, type equal), ``wrong_type`` (aligned, type differs),
  ``missed``;
- relationship: ``right`` (aligned), ``reversed`` / ``wrong_type`` (an unaligned prediction
  the taxonomy names as its reversed or wrong_relation_type near miss), ``missed``.

``fixed`` = not right in A, right in B; ``broken`` = right in A, not right in B. ``retyped``
(a flag, so it can come with fixed or broken): a prediction stands for the gold object in both
runs and its type changed (for relationships: not merely the inverse type written the other
way round). ``flipped``: a relationship right in one run and reversed in the other.
Evidence: the grounding of that prediction changed (no evidence counts as not grounded).

Predictions aligned with no gold object and standing for none as a near miss (false
positives; every prediction on a gold-empty item, a hallucination) are paired between the runs
with the same alignment (typed for entities), so one kept in both is ``kept``, one only in B
``new``, one only in A ``gone``.

An errored item is an empty prediction (``pred=None``), as in scoring. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from extraction_eval.evaluators.clusters import entity_forms
from extraction_eval.evaluators.config import ScoringConfig, type_key
from extraction_eval.evaluators.item import ItemScore, score_item
from extraction_eval.evaluators.matching import align_entities, align_relationships
from extraction_eval.evaluators.similarity import name_key, name_similarity
from extraction_eval.evaluators.taxonomy import relationship_label
from extraction_eval.types import Entity, Extraction, Relationship, Schema

Kind = Literal["entity", "relationship"]
# "ignored": gold below the run's confidence floor (an ignore region, ``gold_view``): neither
# found nor missed, so never fixed or broken
State = Literal["right", "wrong_type", "reversed", "missed", "ignored"]
STATES: tuple[State, ...] = ("right", "wrong_type", "reversed", "missed", "ignored")
Change = Literal["fixed", "broken"]
EvidenceChange = Literal["grounded", "ungrounded"]
ExtraStatus = Literal["new", "gone", "kept"]

# The per-type counters ``diff_counts.DiffCounts`` keeps (stable order: JSON and tables use it).
COUNTER_NAMES: tuple[str, ...] = (
    "fixed",
    "broken",
    "retyped",
    "flipped",
    "evidence_grounded",
    "evidence_ungrounded",
    "new_false_positives",
    "gone_false_positives",
)


def _label(kind: Kind, obj: Entity | Relationship) -> str:
    return obj.name if isinstance(obj, Entity) else relationship_label(obj)


@dataclass(frozen=True, slots=True)
class SideObject:
    """The prediction standing for a gold object in one run (``None``: missed there)."""

    index: int  # into that run's predicted list of this kind
    label: str
    type: str
    grounded: bool
    # the gold entity's mention or alias this prediction matched, when not its own name
    via: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "label": self.label,
            "type": self.type,
            "grounded": self.grounded,
            **({} if self.via is None else {"via": self.via}),
        }


@dataclass(frozen=True, slots=True)
class GoldObjectDiff:
    """One gold object followed from run A to run B."""

    kind: Kind
    index: int  # into the gold list of this kind
    label: str
    type: str
    a: State
    b: State
    a_pred: SideObject | None
    b_pred: SideObject | None
    change: Change | None
    retyped: bool
    flipped: bool
    evidence: EvidenceChange | None  # the prediction's evidence became grounded / ungrounded

    @property
    def changed(self) -> bool:
        return bool(self.change or self.retyped or self.flipped or self.evidence)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "label": self.label,
            "type": self.type,
            "a": self.a,
            "b": self.b,
            "a_pred": None if self.a_pred is None else self.a_pred.to_json(),
            "b_pred": None if self.b_pred is None else self.b_pred.to_json(),
            "change": self.change,
            "retyped": self.retyped,
            "flipped": self.flipped,
            "evidence": self.evidence,
        }


@dataclass(frozen=True, slots=True)
class ExtraDiff:
    """A prediction aligned with no gold object (a false positive), in A, in B or in both."""

    kind: Kind
    status: ExtraStatus
    a_pred: SideObject | None
    b_pred: SideObject | None
    evidence: EvidenceChange | None  # kept ones only

    @property
    def label(self) -> str:
        side = self.b_pred or self.a_pred
        assert side is not None
        return side.label

    @property
    def type(self) -> str:
        side = self.b_pred or self.a_pred
        assert side is not None
        return side.type

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status,
            "label": self.label,
            "type": self.type,
            "a_pred": None if self.a_pred is None else self.a_pred.to_json(),
            "b_pred": None if self.b_pred is None else self.b_pred.to_json(),
            "evidence": self.evidence,
        }


@dataclass(frozen=True, slots=True)
class ItemDiff:
    """Everything that changed on one item between run A and run B."""

    item_id: str
    gold_empty: bool
    a_failed: bool
    b_failed: bool
    objects: tuple[GoldObjectDiff, ...]  # every gold object, entities first, in gold order
    extras: tuple[ExtraDiff, ...]  # every false positive of A or B

    def _count(self, flag: str) -> int:
        return sum(1 for o in self.objects if getattr(o, flag))

    @property
    def fixed(self) -> int:
        return sum(1 for o in self.objects if o.change == "fixed")

    @property
    def broken(self) -> int:
        return sum(1 for o in self.objects if o.change == "broken")

    @property
    def retyped(self) -> int:
        return self._count("retyped")

    @property
    def flipped(self) -> int:
        return self._count("flipped")

    def _evidence(self, change: EvidenceChange) -> int:
        on_gold = sum(1 for o in self.objects if o.evidence == change)
        return on_gold + sum(1 for x in self.extras if x.evidence == change)

    @property
    def evidence_grounded(self) -> int:
        return self._evidence("grounded")

    @property
    def evidence_ungrounded(self) -> int:
        return self._evidence("ungrounded")

    @property
    def new_false_positives(self) -> int:
        return sum(1 for x in self.extras if x.status == "new")

    @property
    def gone_false_positives(self) -> int:
        return sum(1 for x in self.extras if x.status == "gone")

    @property
    def regressions(self) -> int:
        """Broken gold objects plus new false positives: what ``compare`` sorts by (a new
        hallucination is how a gold-empty item breaks)."""
        return self.broken + self.new_false_positives

    @property
    def changed(self) -> bool:
        return (
            self.a_failed != self.b_failed
            or any(o.changed for o in self.objects)
            or any(x.status != "kept" or x.evidence for x in self.extras)
        )

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTER_NAMES}

    def to_json(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "gold_empty": self.gold_empty,
            "a_failed": self.a_failed,
            "b_failed": self.b_failed,
            "counts": self.counts(),
            "objects": [o.to_json() for o in self.objects],
            "extras": [x.to_json() for x in self.extras],
        }


# ---- one item ------------------------------------------------------------------------------


def _grounding(score: ItemScore) -> dict[tuple[str, int], bool]:
    return {(g.kind, g.index): g.grounded for g in score.groundings}


def _side(
    kind: Kind,
    preds: Sequence[Entity | Relationship],
    i: int,
    grounded: dict[tuple[str, int], bool],
) -> SideObject:
    p = preds[i]
    return SideObject(i, _label(kind, p), p.type.strip(), grounded.get((kind, i), False))


@dataclass(frozen=True, slots=True)
class FollowedRun:
    """One run's view of an item: what stands for each gold object, and its false positives.
    Small and plain: the runner stores it with the result (``to_json``), so ``compare`` diffs
    a changed item without scoring it again."""

    entity_state: list[tuple[State, int | None]]
    relationship_state: list[tuple[State, int | None]]
    entity_fp: list[int]
    relationship_fp: list[int]
    grounded: dict[tuple[str, int], bool]

    def to_json(self) -> list[Any]:
        return [
            [list(x) for x in self.entity_state],
            [list(x) for x in self.relationship_state],
            self.entity_fp,
            self.relationship_fp,
            [[k, i, g] for (k, i), g in sorted(self.grounded.items())],
        ]

    @classmethod
    def from_json(cls, data: Any) -> FollowedRun:
        """The stored view; ``ValueError`` / ``TypeError`` when it is not one."""
        ents, rels, efp, rfp, grounded = data

        def state(rows: Any) -> list[tuple[State, int | None]]:
            out: list[tuple[State, int | None]] = []
            for st, i in rows:
                if st not in STATES or not (i is None or type(i) is int):
                    raise ValueError(f"not a followed state: {st!r}, {i!r}")
                out.append((st, i))
            return out

        if not all(type(i) is int for i in (*efp, *rfp)):
            raise ValueError("false-positive indices must be integers")
        return cls(
            state(ents),
            state(rels),
            list(efp),
            list(rfp),
            {(str(k), int(i)): bool(g) for k, i, g in grounded},
        )


def follow(score: ItemScore) -> FollowedRun:
    ent: list[tuple[State, int | None]] = [("missed", None)] * score.listed("entity", "gold")
    for p in score.entity_pairs:
        ent[p.gold] = ("right" if p.type_equal else "wrong_type", p.pred)
    rel: list[tuple[State, int | None]] = [("missed", None)] * score.listed("relationship", "gold")
    for r in score.relationship_pairs:
        rel[r.gold] = ("right", r.pred)
    for kind, side, j in score.ignored:  # gold below the floor: not "missed"
        if side == "gold":
            (ent if kind == "entity" else rel)[j] = ("ignored", None)
    # near misses, from the taxonomy: the first prediction naming the gold object, reversed
    # before wrong type (the taxonomy's own precedence)
    for wanted, state in (("reversed", "reversed"), ("wrong_relation_type", "wrong_type")):
        for t in sorted(score.taxonomy, key=lambda t: t.index):
            if t.kind != "relationship" or t.side != "pred" or t.category != wanted:
                continue
            for j in t.related:
                if rel[j][0] == "missed":
                    rel[j] = (state, t.index)  # type: ignore[assignment]
    matched_e = {p.pred for p in score.entity_pairs}
    # a near miss stands for its gold object: it is followed there, not listed again as a
    # false positive
    matched_r = {i for _, i in rel if i is not None}
    # predictions aligned with ignored gold are neither matched nor false positives
    matched_e |= {i for k, side, i in score.ignored if side == "pred" and k == "entity"}
    matched_r |= {i for k, side, i in score.ignored if side == "pred" and k == "relationship"}
    return FollowedRun(
        ent,
        rel,
        [i for i in range(score.listed("entity", "pred")) if i not in matched_e],
        [i for i in range(score.listed("relationship", "pred")) if i not in matched_r],
        _grounding(score),
    )


def _via(gold: Entity, side: SideObject | None, cfg: ScoringConfig) -> SideObject | None:
    """``side`` with the gold entity's surface form its name matched best, when that is a
    mention or alias rather than the gold's own name (the scorer compares with every form)."""
    if side is None or cfg.match == "span":
        return side
    forms = entity_forms(gold, cfg)
    if len(forms) < 2:
        return side
    keys = [name_key(f, cfg.match) for f in forms]
    sim, _ = name_similarity([name_key(side.label, cfg.match)], keys, cfg.match, cfg.threshold)
    best = int(sim[0].argmax())
    return side if best == 0 else dataclasses.replace(side, via=forms[best])


def _evidence_change(a: SideObject | None, b: SideObject | None) -> EvidenceChange | None:
    if a is None or b is None or a.grounded == b.grounded:
        return None
    return "grounded" if b.grounded else "ungrounded"


def _retyped(
    kind: Kind, a: Relationship | Entity, b: Relationship | Entity, cfg: ScoringConfig
) -> bool:
    ta, tb = type_key(a.type), type_key(b.type)
    if ta == tb:
        return False
    if kind == "relationship" and cfg.inverse_of(ta) == tb:
        assert isinstance(a, Relationship) and isinstance(b, Relationship)
        # the inverse type with the endpoints swapped says the same thing
        return not (
            " ".join(a.source.casefold().split()) == " ".join(b.target.casefold().split())
            and " ".join(a.target.casefold().split()) == " ".join(b.source.casefold().split())
        )
    return True


def _gold_diffs(
    kind: Kind,
    gold: Sequence[Entity | Relationship],
    preds_a: Sequence[Entity | Relationship],
    preds_b: Sequence[Entity | Relationship],
    run_a: FollowedRun,
    run_b: FollowedRun,
    cfg: ScoringConfig,
) -> list[GoldObjectDiff]:
    states_a = run_a.entity_state if kind == "entity" else run_a.relationship_state
    states_b = run_b.entity_state if kind == "entity" else run_b.relationship_state
    out: list[GoldObjectDiff] = []
    # positional construction and no per-object sets: this runs for every gold object of
    # every changed item (100,000s in a large compare)
    for j, g in enumerate(gold):
        (sa, ia), (sb, ib) = states_a[j], states_b[j]
        a = None if ia is None else _side(kind, preds_a, ia, run_a.grounded)
        b = None if ib is None else _side(kind, preds_b, ib, run_b.grounded)
        if isinstance(g, Entity) and (g.mentions or g.aliases or cfg.alias_groups):
            a, b = _via(g, a, cfg), _via(g, b, cfg)
        change: Change | None = None
        if sa == "ignored" or sb == "ignored":
            pass  # an ignore region in either run: not counted either way
        elif sa != "right" and sb == "right":
            change = "fixed"
        elif sa == "right" and sb != "right":
            change = "broken"
        retyped = (
            ia is not None and ib is not None and _retyped(kind, preds_a[ia], preds_b[ib], cfg)
        )
        flipped = (sa == "right" and sb == "reversed") or (sa == "reversed" and sb == "right")
        out.append(
            GoldObjectDiff(
                kind,
                j,
                _label(kind, g),
                g.type.strip(),
                sa,
                sb,
                a,
                b,
                change,
                retyped,
                flipped,
                _evidence_change(a, b),
            )
        )
    return out


def _extras(
    kind: Kind,
    preds_a: Sequence[Entity | Relationship],
    preds_b: Sequence[Entity | Relationship],
    run_a: FollowedRun,
    run_b: FollowedRun,
    cfg: ScoringConfig,
) -> list[ExtraDiff]:
    fp_a = run_a.entity_fp if kind == "entity" else run_a.relationship_fp
    fp_b = run_b.entity_fp if kind == "entity" else run_b.relationship_fp
    # the scorer's alignment, B's false positives against A's: kept = aligned (entities:
    # the typed alignment, so a false positive whose type changed is one gone and one new)
    fa, fb = [preds_a[i] for i in fp_a], [preds_b[i] for i in fp_b]
    ea = [x for x in fa if isinstance(x, Entity)]
    eb = [x for x in fb if isinstance(x, Entity)]
    if kind == "entity":
        pairs = [(p.pred, p.gold) for p in align_entities(eb, ea, cfg).typed_pairs]
    else:
        ra = [x for x in fa if isinstance(x, Relationship)]
        rb = [x for x in fb if isinstance(x, Relationship)]
        pairs = [(p.pred, p.gold) for p in align_relationships(rb, ra, cfg).pairs]
    b_to_a = dict(pairs)
    kept_a = set(b_to_a.values())
    out: list[ExtraDiff] = []
    for k, i in enumerate(fp_b):
        b = _side(kind, preds_b, i, run_b.grounded)
        if k in b_to_a:
            a = _side(kind, preds_a, fp_a[b_to_a[k]], run_a.grounded)
            out.append(ExtraDiff(kind, "kept", a, b, _evidence_change(a, b)))
        else:
            out.append(ExtraDiff(kind, "new", None, b, None))
    for k, i in enumerate(fp_a):
        if k not in kept_a:
            out.append(ExtraDiff(kind, "gone", _side(kind, preds_a, i, run_a.grounded), None, None))
    return out


def diff_item(
    *,
    item_id: str,
    text: str,
    gold: Extraction,
    pred_a: Extraction | None,
    pred_b: Extraction | None,
    config: ScoringConfig,
    schema: Schema | None = None,
    scores: tuple[ItemScore, ItemScore] | None = None,
) -> ItemDiff:
    """Diff one item's predictions in runs A and B against its gold. ``None`` is an errored
    item: an empty prediction, flagged ``a_failed`` / ``b_failed``. ``scores``: both
    predictions already scored with exactly these arguments (not scored again)."""
    if scores is not None:
        score_a, score_b = scores
    else:
        score_a = score_item(
            item_id=item_id, text=text, gold=gold, pred=pred_a, config=config, schema=schema
        )
        score_b = score_item(
            item_id=item_id, text=text, gold=gold, pred=pred_b, config=config, schema=schema
        )
    return diff_followed(
        item_id=item_id,
        gold=gold,
        pred_a=pred_a,
        pred_b=pred_b,
        run_a=follow(score_a),
        run_b=follow(score_b),
        config=config,
    )


def diff_followed(
    *,
    item_id: str,
    gold: Extraction,
    pred_a: Extraction | None,
    pred_b: Extraction | None,
    run_a: FollowedRun,
    run_b: FollowedRun,
    config: ScoringConfig,
) -> ItemDiff:
    """:func:`diff_item` from both runs' :func:`follow` of their scores (stored, or just
    made): the same diff, no scoring."""
    pa = pred_a if pred_a is not None else Extraction()
    pb = pred_b if pred_b is not None else Extraction()
    objects = _gold_diffs("entity", gold.entities, pa.entities, pb.entities, run_a, run_b, config)
    objects += _gold_diffs(
        "relationship", gold.relationships, pa.relationships, pb.relationships, run_a, run_b, config
    )
    extras = _extras("entity", pa.entities, pb.entities, run_a, run_b, config)
    extras += _extras("relationship", pa.relationships, pb.relationships, run_a, run_b, config)
    return ItemDiff(
        item_id=item_id,
        gold_empty=not gold.entities and not gold.relationships,
        a_failed=pred_a is None,
        b_failed=pred_b is None,
        objects=tuple(objects),
        extras=tuple(extras),
    )
