"""Gold that gets better: which objects of a finished run a person should look at (likely gold
gaps first), and what a reviewer's verdict changes in an item's gold. Pure: no I/O.

Kinds of candidate (``KINDS``, in the order they are offered):

- ``grounded_fp``: a prediction no gold object matched whose name (and evidence, if any) is
  in the item's text (taxonomy ``spurious``, or ``hallucinated_on_empty`` when grounded):
  generative extractors find what annotators missed, so it is likely missing from gold;
- ``weak_gold_miss``: a gold object the model missed whose ensemble confidence is below 1;
- ``judge_disagreement``: string matching said no where a judge said yes; empty unless the
  caller passes judged pairs (the judge is a plug-in: nothing here depends on it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from extraction_eval.evaluators.config import EvidenceMode
from extraction_eval.evaluators.evidence import TextIndex
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, TaxonomyTag

CandidateKind = Literal["grounded_fp", "weak_gold_miss", "judge_disagreement"]
KINDS: tuple[CandidateKind, ...] = get_args(CandidateKind)
Verdict = Literal["add_to_gold", "prediction_wrong", "remove_from_gold", "unsure"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
VERDICT_SCORE = "gold_verdict"  # the categorical score a reviewer gives in the queue
QUESTION_MAX = 300  # a queue comment is one readable line


@dataclass(frozen=True, slots=True)
class JudgedPair:
    """A judge's view of one prediction string matching left unmatched (from the judge)."""

    kind: Literal["entity", "relationship"]
    pred_index: int
    judge_match: bool


@dataclass(frozen=True, slots=True)
class Candidate:
    """One object a person should decide on; ``key`` is stable across triage runs."""

    key: str
    dataset: str
    item_id: str
    kind: CandidateKind
    object_kind: Literal["entity", "relationship"]
    obj: Entity | Relationship
    question: str
    rank: tuple[float, ...]  # lower first: most likely gold gap
    trace_id: str | None = None
    confidence: float | None = None  # the gold object's ensemble confidence (a miss)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "dataset": self.dataset,
            "item_id": self.item_id,
            "kind": self.kind,
            "object_kind": self.object_kind,
            "object": self.obj.model_dump(mode="json"),
            "question": self.question,
            "trace_id": self.trace_id,
            "confidence": self.confidence,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Candidate:
        """A candidate as ``to_json`` wrote it (a review file line, a ledger row)."""
        kind = raw.get("kind")
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
        object_kind = raw.get("object_kind")
        if object_kind not in ("entity", "relationship"):
            raise ValueError(f"object_kind {object_kind!r} is not entity or relationship")
        obj: Entity | Relationship = (
            Entity.model_validate(raw.get("object"))
            if object_kind == "entity"
            else Relationship.model_validate(raw.get("object"))
        )
        confidence = raw.get("confidence")
        return cls(
            key=str(raw["key"]),
            dataset=str(raw["dataset"]),
            item_id=str(raw["item_id"]),
            kind=kind,
            object_kind=object_kind,
            obj=obj,
            question=str(raw.get("question") or ""),
            rank=(),
            trace_id=raw.get("trace_id") if isinstance(raw.get("trace_id"), str) else None,
            confidence=float(confidence) if isinstance(confidence, (int, float)) else None,
        )


def _label(kind: str, obj: Entity | Relationship) -> str:
    if isinstance(obj, Entity):
        return f"{obj.name!r} ({obj.type})"
    return f"({obj.source!r}, {obj.type}, {obj.target!r})"


def _one_line(text: str) -> str:
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= QUESTION_MAX else flat[: QUESTION_MAX - 1] + "…"


def question(kind: CandidateKind, object_kind: str, obj: Entity | Relationship) -> str:
    """The one-line question a reviewer answers, readable without this tool."""
    what = _label(object_kind, obj)
    if kind == "grounded_fp":
        article = "an" if object_kind == "entity" else "a"
        return _one_line(f"is {what} {article} {object_kind} the gold misses?")
    if kind == "weak_gold_miss":
        return _one_line(f"the model missed gold {object_kind} {what}: is it really in the text?")
    return _one_line(f"a judge accepts {what} where string matching did not: add it to gold?")


def candidate_key(dataset: str, item_id: str, kind: str, obj: Entity | Relationship) -> str:
    """Stable id of a candidate: the same object of the same item is one candidate."""
    payload = json.dumps(
        [dataset, item_id, kind, obj.model_dump(mode="json")], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:20]


def _objects(x: Extraction, kind: str) -> Sequence[Entity | Relationship]:
    return x.entities if kind == "entity" else x.relationships


def _gold_confidence(item: DatasetItem, kind: str, index: int) -> float | None:
    meta = item.metadata.get("gold")
    if not isinstance(meta, Mapping):
        return None
    entries = meta.get("entities" if kind == "entity" else "relationships")
    if not isinstance(entries, list) or index >= len(entries):
        return None
    entry = entries[index]
    c = entry.get("confidence") if isinstance(entry, Mapping) else None
    return float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None


@dataclass(frozen=True, slots=True)
class ItemView:
    """What a finder sees of one item of a run (the gold as scored, the output, its tags)."""

    dataset: str
    item: DatasetItem
    output: Extraction | None
    taxonomy: Sequence[TaxonomyTag]
    trace_id: str | None = None
    judged: Sequence[JudgedPair] = ()
    evidence_mode: EvidenceMode = "relaxed"


def _make(
    view: ItemView,
    kind: CandidateKind,
    object_kind: str,
    obj: Any,
    rank: tuple[float, ...],
    confidence: float | None = None,
) -> Candidate:
    return Candidate(
        key=candidate_key(view.dataset, view.item.id, kind, obj),
        dataset=view.dataset,
        item_id=view.item.id,
        kind=kind,
        object_kind="entity" if object_kind == "entity" else "relationship",
        obj=obj,
        question=question(kind, object_kind, obj),
        rank=rank,
        trace_id=view.trace_id,
        confidence=confidence,
    )


def grounded_false_positives(view: ItemView) -> list[Candidate]:
    """Unmatched predictions found in the text: the taxonomy's ``spurious`` (name and evidence
    grounded by construction), and ``hallucinated_on_empty`` ones whose name is in the text."""
    if view.output is None:
        return []
    text = TextIndex(view.item.text, view.evidence_mode)
    out: list[Candidate] = []
    for tag in view.taxonomy:
        if tag.side != "pred" or tag.category not in ("spurious", "hallucinated_on_empty"):
            continue
        objs = _objects(view.output, tag.kind)
        if not 0 <= tag.index < len(objs):
            continue
        obj = objs[tag.index]
        if tag.category == "hallucinated_on_empty":
            names = [obj.name] if isinstance(obj, Entity) else [obj.source, obj.target]
            if not all(text.contains(n) for n in names):
                continue
        has_evidence = 0.0 if obj.evidence else 1.0  # evidence found beats a name alone
        # an entity before a relationship: a relationship's endpoint may be the gap itself
        later = 0.0 if tag.kind == "entity" else 1.0
        out.append(_make(view, "grounded_fp", tag.kind, obj, (0.0, later, has_evidence)))
    return out


def weak_gold_misses(view: ItemView) -> list[Candidate]:
    """Missed gold objects whose ensemble confidence is below 1 (lowest confidence first)."""
    out: list[Candidate] = []
    for tag in view.taxonomy:
        if tag.side != "gold" or tag.category != "missed":
            continue
        objs = _objects(view.item.expected, tag.kind)
        conf = _gold_confidence(view.item, tag.kind, tag.index)
        if conf is None or conf >= 1.0 or not 0 <= tag.index < len(objs):
            continue
        out.append(_make(view, "weak_gold_miss", tag.kind, objs[tag.index], (1.0, conf), conf))
    return out


def judge_disagreements(view: ItemView) -> list[Candidate]:
    """Predictions string matching left unmatched that the judge accepted (none unjudged)."""
    if view.output is None:
        return []
    out: list[Candidate] = []
    for pair in view.judged:
        objs = _objects(view.output, pair.kind)
        if pair.judge_match and 0 <= pair.pred_index < len(objs):
            obj = objs[pair.pred_index]
            out.append(_make(view, "judge_disagreement", pair.kind, obj, (2.0,)))
    return out


Finder = Callable[[ItemView], list[Candidate]]
FINDERS: dict[CandidateKind, Finder] = {
    "grounded_fp": grounded_false_positives,
    "weak_gold_miss": weak_gold_misses,
    "judge_disagreement": judge_disagreements,
}


@dataclass
class Selection:
    """The candidates picked (best first) and how many more there were."""

    candidates: list[Candidate] = field(default_factory=list)
    found: dict[str, int] = field(default_factory=dict)  # per kind, before the limit
    held_back: int = 0  # over the limit


def select_candidates(
    views: Iterable[ItemView],
    *,
    kinds: Sequence[CandidateKind] = KINDS,
    limit: int | None = None,
) -> Selection:
    """Every candidate of ``kinds`` over the run, most likely gold gaps first, then item order;
    a candidate found twice (same key) counts once."""
    found: dict[str, Candidate] = {}
    order: dict[str, int] = {}
    for n, view in enumerate(views):
        for kind in kinds:
            for c in FINDERS[kind](view):
                if c.key not in found:
                    found[c.key], order[c.key] = c, n
    ranked = sorted(found.values(), key=lambda c: (c.rank, order[c.key], c.key))
    counts: dict[str, int] = {}
    for c in ranked:
        counts[c.kind] = counts.get(c.kind, 0) + 1
    keep = ranked if limit is None else ranked[:limit]
    return Selection(keep, counts, len(ranked) - len(keep))


@dataclass(frozen=True, slots=True)
class Decision:
    """A reviewer's verdict on a candidate; ``comment`` is already one safe line."""

    candidate: Candidate
    verdict: Verdict
    reviewer: str | None = None
    comment: str | None = None

    @property
    def reason(self) -> str:
        who = self.reviewer or "a reviewer"
        why = f": {self.comment}" if self.comment else ""
        return f"review {self.verdict} by {who}{why}"


def safe_comment(text: str | None, secrets: Iterable[str] = ()) -> tuple[str | None, list[str]]:
    """A reviewer's comment as one line fit to store: control characters become spaces and
    anything secret-shaped is masked; what was done is said (never the secret itself)."""
    if text is None:
        return None, []
    from extraction_eval.redact import redact

    notes: list[str] = []
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    if flat != " ".join(text.split()):
        notes.append("control characters replaced")
    masked = redact(flat, list(secrets) or None)
    if masked != flat:
        notes.append("a secret-looking value masked")
    return (masked[:QUESTION_MAX] or None), notes


def _same(a: Entity | Relationship, b: Entity | Relationship) -> bool:
    def key(x: Entity | Relationship) -> tuple[str, ...]:
        parts = (x.name, x.type) if isinstance(x, Entity) else (x.source, x.type, x.target)
        return tuple(" ".join(p.casefold().split()) for p in parts)

    return type(a) is type(b) and key(a) == key(b)


def apply_decisions(
    item: DatasetItem, decisions: Sequence[Decision]
) -> tuple[DatasetItem, list[str], list[Decision]]:
    """The item with the verdicts applied, flagged human-verified, one line per verdict that
    could not apply, and the decisions that did (``unsure`` is not one).

    ``add_to_gold`` on a prediction adds it; ``remove_from_gold`` on a gold object removes
    it; a gold object confirmed (``add_to_gold`` / ``prediction_wrong``)
    gets confidence 1; ``prediction_wrong`` on a prediction and ``unsure`` change no object.
    Ensemble-gold metadata (one entry per object) stays lined up with the objects."""
    lists: dict[str, list[Any]] = {
        "entity": list(item.expected.entities),
        "relationship": list(item.expected.relationships),
    }
    gold_meta = item.metadata.get("gold")
    meta: dict[str, list[Any]] | None = None
    if isinstance(gold_meta, Mapping):
        ents, rels = gold_meta.get("entities"), gold_meta.get("relationships")
        if (
            isinstance(ents, list)
            and isinstance(rels, list)
            and len(ents) == len(lists["entity"])
            and len(rels) == len(lists["relationship"])
        ):
            meta = {"entity": list(ents), "relationship": list(rels)}
    problems: list[str] = []
    applied: list[dict[str, Any]] = []
    done: list[Decision] = []
    for d in decisions:
        c = d.candidate
        objs = lists[c.object_kind]
        at = next((k for k, g in enumerate(objs) if _same(g, c.obj)), None)
        entry = {"confidence": 1.0, "source": "review", "reason": d.reason}
        label = f"item {c.item_id!r}: {d.verdict} on {_label(c.object_kind, c.obj)}"
        if d.verdict == "unsure":
            continue
        if d.verdict == "add_to_gold" and at is None:
            objs.append(c.obj)
            if meta is not None:
                meta[c.object_kind].append(entry)
        elif d.verdict == "remove_from_gold" and at is not None:
            del objs[at]
            if meta is not None:
                del meta[c.object_kind][at]
        elif d.verdict in ("add_to_gold", "prediction_wrong") and at is not None:
            if meta is not None and c.kind == "weak_gold_miss":
                meta[c.object_kind][at] = entry  # confirmed by a person
        elif d.verdict == "remove_from_gold":
            problems.append(f"{label}: it is not in the gold; nothing removed")
            continue
        applied.append(
            {"key": c.key, "verdict": d.verdict, "reviewer": d.reviewer, "reason": d.reason}
        )
        done.append(d)
    metadata = dict(item.metadata)
    if meta is not None and isinstance(gold_meta, Mapping):
        metadata["gold"] = {
            **gold_meta,
            "entities": meta["entity"],
            "relationships": meta["relationship"],
        }
    if applied:
        review = metadata.get("review")
        previous = review.get("verdicts", []) if isinstance(review, Mapping) else []
        kept = [v for v in previous if isinstance(v, Mapping)]
        keys = {v["key"] for v in applied}
        metadata["review"] = {
            "human_verified": True,
            "verdicts": [v for v in kept if v.get("key") not in keys] + applied,
        }
    expected = Extraction(entities=lists["entity"], relationships=lists["relationship"])
    return item.model_copy(update={"expected": expected, "metadata": metadata}), problems, done
