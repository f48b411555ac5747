"""Ensemble gold: several extractions of one item vote its expected output.

Which objects of different runs are "the same" is decided by the scoring's own one-to-one
alignment (``matching.align_entities`` / ``align_relationships``), so an object the vote keeps
is exactly an object the scorer would have matched. Pure: no I/O, no model calls.

Rules (the README's "Ensemble gold" section says the same):

- Runs are taken in a fixed order (weight descending, then run name), so the aggregate
  does not depend on the order the runs are listed in. Each run's objects are
  aligned with the clusters built so far; a matched object joins its cluster, an unmatched
  one starts a new cluster. A run adds at most one object to a cluster (the alignment is
  one-to-one).
- Entities are identified by name; their type is a voted field. (Span mode pairs by
  evidence *and* type, as the span scorer does: there a retyped entity is another object.)
  Relationships are identified by aligned endpoints and type (inverse and symmetric rules
  included): a relationship stated as the inverse joins in the cluster's orientation.
- An object is kept when the weight of the runs that produced it is more than
  ``min_agreement`` of the total weight. Errored runs (no output) abstain: they are not in the
  total.
- Each field (name, type, evidence, each attribute key; a missing attribute is the value
  "absent") takes the weighted-majority value among the cluster's members. Ties go to the
  value of the first run in that order, and are reported. An entity's offsets (start, end)
  are not voted: they come with the winning name and evidence.
- ``confidence = winning weight / total weight`` for objects and fields alike, so a field is
  never more certain than its object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from extraction_eval.errors import InvalidValue, one_line
from extraction_eval.evaluators.config import ScoringConfig
from extraction_eval.evaluators.gold_view import ignored_gold
from extraction_eval.evaluators.matching import align_entities, align_relationships
from extraction_eval.evaluators.similarity import name_key
from extraction_eval.types import Entity, Extraction, GoldOverride, Relationship

ABSENT = "<absent>"

Kind = Literal["entity", "relationship"]


@dataclass(frozen=True, slots=True)
class Vote:
    """One run's extraction of the item. ``output=None``: the run errored (it abstains)."""

    run: str
    weight: float
    output: Extraction | None


@dataclass(frozen=True, slots=True)
class FieldVote:
    value: str | None
    confidence: float
    # value -> (weight, runs) for every value some member gave, winner first
    ballots: tuple[tuple[str | None, float, tuple[str, ...]], ...]
    tie: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "confidence": self.confidence,
            "tie": self.tie,
            "ballots": [
                {"value": v, "weight": w, "runs": list(runs)} for v, w, runs in self.ballots
            ],
        }


@dataclass(frozen=True, slots=True)
class VotedObject:
    kind: Kind
    kept: bool
    confidence: float
    support: tuple[str, ...]  # the runs that produced it
    fields: dict[str, FieldVote]
    entity: Entity | None = None
    relationship: Relationship | None = None

    @property
    def obj(self) -> Entity | Relationship:
        found = self.entity if self.entity is not None else self.relationship
        assert found is not None
        return found

    @property
    def disputed(self) -> bool:
        return self.confidence < 1.0 or any(f.confidence < 1.0 for f in self.fields.values())

    def describe(self) -> str:
        if self.entity is not None:
            return f"{self.entity.name} ({self.entity.type})"
        assert self.relationship is not None
        r = self.relationship
        return f"{r.source} —{r.type}→ {r.target}"

    def to_json(self) -> dict[str, Any]:
        obj = self.obj
        return {
            "kind": self.kind,
            "kept": self.kept,
            "confidence": self.confidence,
            "support": list(self.support),
            "object": obj.model_dump(mode="json", exclude_defaults=True),
            "fields": {k: v.to_json() for k, v in sorted(self.fields.items())},
        }


@dataclass(frozen=True, slots=True)
class ItemVote:
    """The aggregate of one item: the kept objects as an :class:`Extraction`, and every
    cluster (kept or not) with its votes, for review."""

    expected: Extraction
    objects: tuple[VotedObject, ...]
    total_weight: float
    voters: tuple[str, ...]
    abstained: tuple[str, ...]
    ties: tuple[str, ...] = field(default=())

    @property
    def kept(self) -> tuple[VotedObject, ...]:
        return tuple(o for o in self.objects if o.kept)

    @property
    def min_confidence(self) -> float | None:
        """The least certain decision of the vote: a kept object or one of its fields (its
        confidence), or an object left out (1 − its confidence: the weight that agreed it is
        not there). None when no run produced any object."""
        values = [c for o in self.kept for c in (o.confidence, *_field_conf(o))]
        values += [1.0 - o.confidence for o in self.objects if not o.kept]
        return min(values) if values else None

    @property
    def mean_confidence(self) -> float | None:
        values = [o.confidence for o in self.kept]
        return sum(values) / len(values) if values else None

    def to_json(self) -> dict[str, Any]:
        return {
            "total_weight": self.total_weight,
            "voters": list(self.voters),
            "abstained": list(self.abstained),
            "min_confidence": self.min_confidence,
            "mean_confidence": self.mean_confidence,
            "ties": list(self.ties),
            "objects": [o.to_json() for o in self.objects],
        }


def _field_conf(o: VotedObject) -> list[float]:
    return [f.confidence for f in o.fields.values()]


@dataclass(slots=True)
class _Cluster:
    members: list[tuple[int, Any]]  # (vote index, object in the cluster's orientation)

    @property
    def rep(self) -> Any:
        return self.members[0][1]


def _check(votes: Sequence[Vote], min_agreement: float) -> None:
    if not 0.0 <= min_agreement < 1.0:
        raise InvalidValue("min_agreement", f"must be in [0, 1), got {min_agreement}")
    if not votes:
        raise InvalidValue("models", "no run to vote")
    for v in votes:
        if not v.weight > 0:
            raise InvalidValue("models", f"run {v.run!r}: weight must be > 0, got {v.weight}")
    names = [v.run for v in votes]
    if len(set(names)) != len(names):
        raise InvalidValue("models", "two runs have the same name")


def vote_item(
    votes: Sequence[Vote], config: ScoringConfig, *, min_agreement: float = 0.5
) -> ItemVote:
    """Aggregate one item's extractions by weighted majority (module docstring: the rules)."""
    _check(votes, min_agreement)
    order = sorted(range(len(votes)), key=lambda i: (-votes[i].weight, votes[i].run))
    voting = [i for i in order if votes[i].output is not None]
    abstained = tuple(votes[i].run for i in order if votes[i].output is None)
    total = sum(votes[i].weight for i in voting)
    rank = {i: r for r, i in enumerate(order)}
    ties: list[str] = []

    # entities: cluster by name (span: evidence), type voted as a field
    ent_clusters: list[_Cluster] = []
    # per vote: entity name key -> its cluster index (to map relationship endpoints)
    joined: dict[int, dict[str, int]] = {}
    key_mode = "casefold" if config.match == "span" else config.match
    for i in voting:
        out = votes[i].output
        assert out is not None
        reps = [c.rep for c in ent_clusters]
        # untyped pairs: an entity is the same object whatever type a run gave it
        pairs = align_entities(out.entities, reps, config).pairs
        matched = {p.pred: p.gold for p in pairs}
        names: dict[str, int] = {}
        for k, e in enumerate(out.entities):
            if k in matched:
                ci = matched[k]
                ent_clusters[ci].members.append((i, e))
            else:
                ci = len(ent_clusters)
                ent_clusters.append(_Cluster([(i, e)]))
            names.setdefault(name_key(e.name, key_mode), ci)
        joined[i] = names

    # relationships: endpoints renamed to their entity cluster's first name, then aligned
    def canonical(i: int, name: str) -> str:
        ci = joined[i].get(name_key(name, key_mode))
        return ent_clusters[ci].rep.name if ci is not None else name

    rel_clusters: list[_Cluster] = []
    for i in voting:
        out = votes[i].output
        assert out is not None
        mine = [
            r.model_copy(
                update={"source": canonical(i, r.source), "target": canonical(i, r.target)}
            )
            for r in out.relationships
        ]
        reps = [c.rep for c in rel_clusters]
        alignment = align_relationships(mine, reps, config)
        for p in alignment.pairs:
            r = mine[p.pred]
            rep = reps[p.gold]
            if p.match_type.startswith("inverse") or (
                name_key(r.source, key_mode) != name_key(rep.source, key_mode)
                and name_key(r.source, key_mode) == name_key(rep.target, key_mode)
            ):
                # stated the other way round: turn it into the cluster's orientation
                r = r.model_copy(update={"source": r.target, "target": r.source, "type": rep.type})
            rel_clusters[p.gold].members.append((i, r))
        taken = {p.pred for p in alignment.pairs}
        for k, r in enumerate(mine):
            if k not in taken:
                rel_clusters.append(_Cluster([(i, r)]))

    def field_vote(
        what: str, members: list[tuple[int, Any]], get: Callable[[Any], Any]
    ) -> FieldVote:
        weight: dict[Any, float] = {}
        runs: dict[Any, list[str]] = {}
        first: dict[Any, int] = {}
        for i, obj in members:
            value = get(obj)
            weight[value] = weight.get(value, 0.0) + votes[i].weight
            runs.setdefault(value, []).append(votes[i].run)
            first[value] = min(first.get(value, len(order)), rank[i])
        ranked = sorted(weight, key=lambda v: (-weight[v], first[v]))
        win = ranked[0]
        tie = len(ranked) > 1 and abs(weight[ranked[1]] - weight[win]) < 1e-12
        if tie:
            ties.append(
                f"{what}: tie between {win!r} and {ranked[1]!r} at weight {weight[win]:g};"
                f" took {win!r} (heaviest run, then run name)"
            )
        return FieldVote(
            value=win,
            confidence=weight[win] / total if total else 0.0,
            ballots=tuple((v, weight[v], tuple(runs[v])) for v in ranked),
            tie=tie,
        )

    def attribute_votes(what: str, members: list[tuple[int, Any]]) -> dict[str, FieldVote]:
        keys = sorted({k for _, o in members for k in o.attributes})

        def getter(key: str) -> Callable[[Any], Any]:
            return lambda o: o.attributes.get(key, ABSENT)

        return {
            f"attributes.{k}": field_vote(f"{what} attribute {k}", members, getter(k)) for k in keys
        }

    def support(c: _Cluster) -> tuple[float, tuple[str, ...]]:
        ids = sorted({i for i, _ in c.members}, key=lambda i: rank[i])
        return sum(votes[i].weight for i in ids), tuple(votes[i].run for i in ids)

    objects: list[VotedObject] = []
    final_name: dict[int, str] = {}
    for ci, c in enumerate(ent_clusters):
        w, runs = support(c)
        label = f"entity {c.rep.name!r}"
        fields = {
            "name": field_vote(f"{label} name", c.members, lambda e: e.name),
            "type": field_vote(f"{label} type", c.members, lambda e: e.type),
            "evidence": field_vote(f"{label} evidence", c.members, lambda e: e.evidence),
            **attribute_votes(label, c.members),
        }
        name = fields["name"].value or c.rep.name
        final_name[ci] = name
        evidence = fields["evidence"].value
        # offsets are not voted: they come with the winning name and evidence
        spans = [
            (e.start, e.end)
            for _, e in sorted(c.members, key=lambda m: rank[m[0]])
            if e.name == name and e.evidence == evidence
        ]
        start, end = spans[0] if spans else (None, None)
        entity = Entity(
            name=name,
            type=fields["type"].value or c.rep.type,
            evidence=evidence,
            start=start,
            end=end,
            attributes=_attributes(fields),
        )
        kept = total > 0 and w > min_agreement * total + 1e-12
        objects.append(
            VotedObject("entity", kept, w / total if total else 0.0, runs, fields, entity=entity)
        )

    rep_cluster = {c.rep.name: ci for ci, c in enumerate(ent_clusters)}
    for c in rel_clusters:
        w, runs = support(c)
        rep = c.rep
        label = f"relationship {rep.source!r} {rep.type} {rep.target!r}"
        fields = {
            "evidence": field_vote(f"{label} evidence", c.members, lambda r: r.evidence),
            **attribute_votes(label, c.members),
        }
        rel = Relationship(
            source=final_name.get(rep_cluster.get(rep.source, -1), rep.source),
            type=rep.type,
            target=final_name.get(rep_cluster.get(rep.target, -1), rep.target),
            evidence=fields["evidence"].value,
            attributes=_attributes(fields),
        )
        kept = total > 0 and w > min_agreement * total + 1e-12
        objects.append(
            VotedObject(
                "relationship", kept, w / total if total else 0.0, runs, fields, relationship=rel
            )
        )

    expected = Extraction(
        entities=[o.entity for o in objects if o.kept and o.entity is not None],
        relationships=[o.relationship for o in objects if o.kept and o.relationship is not None],
    )
    return ItemVote(
        expected=expected,
        objects=tuple(objects),
        total_weight=total,
        voters=tuple(votes[i].run for i in voting),
        abstained=abstained,
        ties=tuple(ties),
    )


def _attributes(fields: dict[str, FieldVote]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, f in fields.items():
        if key.startswith("attributes.") and f.value is not None and f.value != ABSENT:
            out[key.removeprefix("attributes.")] = f.value
    return out


# --- human overrides on top of the vote ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GoldObject:
    """One object of the built gold: from the vote, or put there or changed by a person."""

    kind: Kind
    obj: Entity | Relationship
    confidence: float  # the vote's; 1.0 for an object a person added or changed
    source: Literal["vote", "override"] = "vote"
    reason: str | None = None

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {"confidence": round(self.confidence, 6), "source": self.source}
        if self.reason:
            out["reason"] = self.reason
        return out


def _target_of(kind: Kind, obj: Entity | Relationship) -> str:
    if isinstance(obj, Entity):
        return " ".join(obj.name.casefold().split())
    return "|".join(" ".join(x.casefold().split()) for x in (obj.source, obj.type, obj.target))


def _target_key(kind: Kind, target: str) -> str:
    if kind == "entity":
        return " ".join(target.casefold().split())
    return "|".join(" ".join(x.casefold().split()) for x in target.split("|"))


_SETTABLE = {
    "entity": ("name", "type", "evidence"),
    "relationship": ("source", "type", "target", "evidence"),
}


JUDGE_ACTIONS = ("same", "not_same")  # overrule the semantic judge, not the vote


def check_override(o: GoldOverride) -> None:
    """Refuse an override that could never apply (before it is stored)."""
    if o.action in JUDGE_ACTIONS:
        if o.kind != "entity":
            raise InvalidValue(
                "kind",
                f"a {o.action} override names two entities (relationships are judged"
                " through their endpoints)",
            )
        if not (o.target or "").strip() or not (o.value or "").strip():
            raise InvalidValue(
                "target",
                f"a {o.action} override needs the predicted name (target) and the"
                " gold name (value)",
            )
    if o.action in ("remove", "set") and not (o.target or "").strip():
        raise InvalidValue("target", f"a {o.action} override needs the object it changes")
    if o.kind == "relationship" and o.target and o.target.count("|") != 2:
        raise InvalidValue("target", "a relationship is named 'source|type|target'")
    if o.action == "set":
        f = o.field or ""
        if f not in _SETTABLE[o.kind] and not f.startswith("attributes."):
            allowed = ", ".join((*_SETTABLE[o.kind], "attributes.<key>"))
            raise InvalidValue("field", f"{f!r} cannot be set on {o.kind}; use one of {allowed}")
        if o.value is None:
            raise InvalidValue("value", "a set override needs a value")
    if o.action == "add":
        _parse_added(o)
    if not o.reason.strip():
        raise InvalidValue("reason", "say why (it is kept with the gold)")


def _parse_added(o: GoldOverride) -> Entity | Relationship:
    try:
        raw = json.loads(o.value or "")
        return (
            Entity.model_validate(raw) if o.kind == "entity" else Relationship.model_validate(raw)
        )
    except (ValueError, TypeError) as exc:
        raise InvalidValue(
            "value", f"an added {o.kind} must be its JSON object: {one_line(exc)}"
        ) from None


def apply_overrides(
    vote: ItemVote, overrides: Sequence[GoldOverride]
) -> tuple[list[GoldObject], list[str]]:
    """The kept objects with every override of the item applied in order (later ones win).

    An override whose target is no longer in the vote is reported, never silently dropped."""
    objects = [GoldObject(o.kind, o.obj, o.confidence) for o in vote.kept]
    problems: list[str] = []
    for o in overrides:
        if o.action in JUDGE_ACTIONS:  # the judge's, not the vote's
            continue
        label = f"override #{o.id} ({o.action} {o.kind}" + (f" {o.target!r})" if o.target else ")")
        if o.action == "add":
            new = _parse_added(o)
            key = _target_of(o.kind, new)
            objects = [
                g for g in objects if not (g.kind == o.kind and _target_of(g.kind, g.obj) == key)
            ]
            objects.append(GoldObject(o.kind, new, 1.0, "override", o.reason))
            continue
        want = _target_key(o.kind, o.target or "")
        at = [
            k
            for k, g in enumerate(objects)
            if g.kind == o.kind and _target_of(g.kind, g.obj) == want
        ]
        if not at:
            problems.append(f"{label}: no such {o.kind} in the gold any more; not applied")
            continue
        k = at[0]
        if o.action == "remove":
            del objects[k]
            continue
        g = objects[k]
        field_name = o.field or ""
        if field_name.startswith("attributes."):
            attrs = dict(g.obj.attributes)
            attrs[field_name.removeprefix("attributes.")] = o.value or ""
            changed = g.obj.model_copy(update={"attributes": attrs})
        else:
            changed = g.obj.model_copy(update={field_name: o.value})
        objects[k] = GoldObject(o.kind, changed, 1.0, "override", o.reason)
    return objects, problems


def gold_extraction(objects: Sequence[GoldObject]) -> Extraction:
    return Extraction(
        entities=[g.obj for g in objects if isinstance(g.obj, Entity)],
        relationships=[g.obj for g in objects if isinstance(g.obj, Relationship)],
    )


def trusted_gold(
    expected: Extraction, metadata: Mapping[str, Any], min_confidence: float
) -> tuple[Extraction, int]:
    """The gold without the objects whose ensemble confidence is below ``min_confidence``, and
    how many were left out (which objects: ``gold_view.ignored_gold``, the one definition the
    scorer's ignore regions use). Gold without confidences is returned as it is."""
    low = ignored_gold(expected, metadata, min_confidence)
    if not len(low):
        return expected, 0
    return (
        Extraction(
            entities=[x for j, x in enumerate(expected.entities) if j not in low.entities],
            relationships=[
                x for j, x in enumerate(expected.relationships) if j not in low.relationships
            ],
        ),
        len(low),
    )
