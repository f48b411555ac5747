"""Judged matches beside the string figures: after the string alignment of an item, its
unmatched predictions and gold objects are candidate pairs for a semantic judge, and the pairs
it calls the same re-enter a one-to-one alignment among the unmatched.

The string figures are never touched: judged counts are the string counts plus the judged
matches (tp + m, fp − m, fn − m), kept in a block of their own (``judged``).

- **Entities**: a candidate pair is an unmatched prediction and an unmatched gold entity of
  the same type (casefolded); each prediction keeps its ``SHORTLIST_K`` most similar gold
  entities (rapidfuzz ``WRatio`` of the casefolded names, ties by gold position). The
  untyped and typed figures each re-align their own unmatched objects.
- **Relationships**: an unmatched prediction and an unmatched gold relationship of the same
  type are the same fact when each endpoint (source with source, target with target) matches
  by string under the scoring's name mode or is judged the same entity (asked with the gold
  endpoint's entity type, found by ``head``/``tail`` or by name); ``SHORTLIST_K`` gold
  relationships per prediction. Swapped endpoints (symmetric or inverse types) are left to
  the string matcher.
- Gold objects below the confidence floor (ignore regions) are never candidates; a failed
  item (no prediction) has none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rapidfuzz import fuzz, process

from extraction_eval.evaluators.config import ScoringConfig, type_key
from extraction_eval.evaluators.item import ItemScore
from extraction_eval.evaluators.matching import assign
from extraction_eval.evaluators.metrics import Counts, counts_json
from extraction_eval.evaluators.similarity import name_key, name_similarity
from extraction_eval.judge.base import Judge, JudgePair, Verdict, run_blocking
from extraction_eval.llm.context import item_context
from extraction_eval.types import Entity, Extraction, Relationship

SHORTLIST_K = 3  # gold candidates per prediction, most similar first
CONCURRENCY = 8  # items judged at once (a model judge's calls overlap)
KINDS = ("entities", "entities_typed", "relationships")


@dataclass(frozen=True, slots=True)
class JudgedMatch:
    """One judged pair that became a match, with its provenance."""

    kind: str  # entities | entities_typed | relationships
    pred: int
    gold: int
    pred_name: str
    gold_name: str
    reason: str
    source: str  # rules | model | cache | person | string
    judge: str = ""  # the judge's identity: model, endpoint, prompt version

    def to_json(self) -> dict[str, Any]:
        """The match as stored with a run and exported: who judged it (``judge``), what it
        said (``same``: always true for a match, a person's verdict included) and why, and
        whether the verdict was read from the cache rather than asked."""
        return {
            "kind": self.kind,
            "pred": self.pred,
            "gold": self.gold,
            "pred_name": self.pred_name,
            "gold_name": self.gold_name,
            "same": True,
            "reason": self.reason,
            "source": self.source,
            "cached": self.source == "cache",
            "judge": self.judge,
        }


@dataclass
class JudgedItem:
    item_id: str
    counts: dict[str, Counts]
    matches: list[JudgedMatch] = field(default_factory=list)
    candidates: int = 0  # distinct name pairs put to the judge
    failed: bool = False  # no prediction: nothing judged, never a both-empty 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "matches": [m.to_json() for m in self.matches],
            **{k: counts_json(self.counts[k], failed=self.failed) for k in KINDS},
        }


def _open(n: int, taken: Sequence[int], ignored: set[int]) -> list[int]:
    used = set(taken) | ignored
    return [i for i in range(n) if i not in used]


def _shortlist(names: Sequence[str], gold: Sequence[str], allowed: np.ndarray) -> list[list[int]]:
    """Per prediction, the indices (into ``gold``) of its ``SHORTLIST_K`` most similar
    allowed gold names."""
    if not names or not gold:
        return [[] for _ in names]
    sim = process.cdist(
        [n.casefold() for n in names], [g.casefold() for g in gold], scorer=fuzz.WRatio
    )
    out = []
    for i in range(len(names)):
        js = [j for j in np.argsort(-sim[i], kind="stable").tolist() if allowed[i, j]]
        out.append(js[:SHORTLIST_K])
    return out


@dataclass
class _Plan:
    """An item's candidates: entity pairs per kind, relationship pairs with the endpoint
    name pairs each needs judged, and the distinct name pairs to ask."""

    entity: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    rel: list[tuple[int, int, list[tuple[str, str, str | None]]]] = field(default_factory=list)
    asks: dict[tuple[str, str, str | None], int] = field(default_factory=dict)

    def ask(self, a: str, b: str, type_: str | None) -> None:
        self.asks.setdefault((a, b, type_), len(self.asks))


def _entity_candidates(
    plan: _Plan,
    kind: str,
    pe: Sequence[Entity],
    ge: Sequence[Entity],
    pairs: Sequence[tuple[int, int]],
    ignored: set[int],
) -> None:
    open_p = _open(len(pe), [p for p, _ in pairs], set())
    open_g = _open(len(ge), [g for _, g in pairs], ignored)
    if not open_p or not open_g:
        plan.entity[kind] = []
        return
    p_types = [type_key(pe[i].type) for i in open_p]
    g_types = [type_key(ge[j].type) for j in open_g]
    allowed = np.equal.outer(np.asarray(p_types, dtype=object), np.asarray(g_types, dtype=object))
    short = _shortlist([pe[i].name for i in open_p], [ge[j].name for j in open_g], allowed)
    found = []
    for row, js in enumerate(short):
        for col in js:
            i, j = open_p[row], open_g[col]
            found.append((i, j))
            plan.ask(pe[i].name, ge[j].name, ge[j].type)
    plan.entity[kind] = found


def _endpoint_types(r: Relationship, entities: Sequence[Entity]) -> tuple[str | None, str | None]:
    """The gold types of a gold relationship's endpoints (by ``head``/``tail``, else by
    name), so the judge's type guard applies to endpoints too; None when not found."""
    by_name = {e.name: e.type for e in entities}

    def one(index: int | None, name: str) -> str | None:
        if index is not None and 0 <= index < len(entities):
            return entities[index].type
        return by_name.get(name)

    return one(r.head, r.source), one(r.tail, r.target)


def _rel_candidates(
    plan: _Plan,
    pr: Sequence[Relationship],
    gr: Sequence[Relationship],
    pairs: Sequence[tuple[int, int]],
    ignored: set[int],
    config: ScoringConfig,
    gold_entities: Sequence[Entity] = (),
) -> None:
    open_p = _open(len(pr), [p for p, _ in pairs], set())
    open_g = _open(len(gr), [g for _, g in pairs], ignored)
    if not open_p or not open_g:
        return
    allowed = np.equal.outer(
        np.asarray([type_key(pr[i].type) for i in open_p], dtype=object),
        np.asarray([type_key(gr[j].type) for j in open_g], dtype=object),
    )
    short = _shortlist(
        [f"{pr[i].source} {pr[i].target}" for i in open_p],
        [f"{gr[j].source} {gr[j].target}" for j in open_g],
        allowed,
    )
    mode = "casefold" if config.match == "span" else config.match
    for row, js in enumerate(short):
        i = open_p[row]
        for col in js:
            j = open_g[col]
            needs = []
            types = _endpoint_types(gr[j], gold_entities)
            ends = ((pr[i].source, gr[j].source), (pr[i].target, gr[j].target))
            for (a, b), t in zip(ends, types, strict=True):
                _, ok = name_similarity(
                    [name_key(a, mode)], [name_key(b, mode)], mode, config.threshold
                )
                if not bool(ok[0, 0]):
                    needs.append((a, b, t))
                    plan.ask(a, b, t)
            plan.rel.append((i, j, needs))


def _assign(
    kind: str,
    found: Sequence[tuple[int, int]],
    same: dict[tuple[int, int], Verdict],
    names: tuple[Sequence[Any], Sequence[Any]],
    judge: str,
) -> list[JudgedMatch]:
    """One-to-one among the judged-yes pairs (``evaluators.matching.assign``)."""
    yes = [(i, j) for i, j in found if (i, j) in same]
    if not yes:
        return []
    rows = sorted({i for i, _ in yes})
    cols = sorted({j for _, j in yes})
    adm = np.zeros((len(rows), len(cols)), dtype=bool)
    for i, j in yes:
        adm[rows.index(i), cols.index(j)] = True
    r, c = assign(adm, adm.astype(np.float64))
    out = []
    for a, b in zip(r.tolist(), c.tolist(), strict=True):
        i, j = rows[a], cols[b]
        v = same[(i, j)]
        pred, gold = names[0][i], names[1][j]
        out.append(JudgedMatch(kind, i, j, _label(pred), _label(gold), v.reason, v.source, judge))
    return sorted(out, key=lambda m: (m.pred, m.gold))


def _label(obj: Any) -> str:
    if isinstance(obj, Relationship):
        return f"{obj.source} —{obj.type}→ {obj.target}"
    return str(obj.name)


async def judge_item(
    judge: Judge,
    score: ItemScore,
    text: str,
    gold: Extraction,
    pred: Extraction | None,
    config: ScoringConfig,
) -> JudgedItem:
    """The judged counts of one scored item (``gold``: as it was scored, labels mapped)."""
    base = {
        "entities": score.entities,
        "entities_typed": score.entities_typed,
        "relationships": score.relationships,
    }
    if pred is None or score.failed:
        return JudgedItem(score.item_id, base, failed=True)
    ignored = {
        kind: {i for k, side, i in score.ignored if k == kind and side == "gold"}
        for kind in ("entity", "relationship")
    }
    plan = _Plan()
    pe, ge = pred.entities, gold.entities
    for kind, pairs in (
        ("entities", score.entity_pairs),
        ("entities_typed", score.entity_typed_pairs),
    ):
        _entity_candidates(plan, kind, pe, ge, [(p.pred, p.gold) for p in pairs], ignored["entity"])
    rel_pairs = [(p.pred, p.gold) for p in score.relationship_pairs]
    _rel_candidates(
        plan,
        pred.relationships,
        gold.relationships,
        rel_pairs,
        ignored["relationship"],
        config,
        gold.entities,
    )
    asks = list(plan.asks)
    if not asks:
        return JudgedItem(score.item_id, base)
    with item_context(score.item_id):
        verdicts = await judge.judge([JudgePair(a, b, t, text) for a, b, t in asks])
    said = dict(zip(asks, verdicts, strict=True))
    matches: list[JudgedMatch] = []
    for kind in ("entities", "entities_typed"):
        yes = {
            (i, j): v
            for i, j in plan.entity.get(kind, [])
            if (v := said[(pe[i].name, ge[j].name, ge[j].type)]).same
        }
        matches += _assign(kind, list(yes), yes, (pe, ge), judge.identity)
    rel_yes: dict[tuple[int, int], Verdict] = {}
    for i, j, needs in plan.rel:
        found = [said[need] for need in needs]
        if all(v.same for v in found):
            reason = "; ".join(v.reason for v in found) or "endpoints match by string"
            source = found[0].source if found else "string"
            rel_yes[(i, j)] = Verdict(True, reason, source)
    matches += _assign(
        "relationships",
        list(rel_yes),
        rel_yes,
        (pred.relationships, gold.relationships),
        judge.identity,
    )
    counts = dict(base)
    for kind in KINDS:
        m = sum(1 for x in matches if x.kind == kind)
        c = base[kind]
        counts[kind] = Counts(c.tp + m, c.fp - m, c.fn - m)
    return JudgedItem(score.item_id, counts, matches, len(asks))


def judge_items(
    judge: Judge,
    work: Sequence[tuple[ItemScore, str, Extraction, Extraction | None]],
    config: ScoringConfig,
) -> list[JudgedItem]:
    """Judge every item, ``CONCURRENCY`` at a time; the judge is closed afterwards."""

    async def run() -> list[JudgedItem]:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(s: ItemScore, text: str, g: Extraction, p: Extraction | None) -> JudgedItem:
            async with gate:
                return await judge_item(judge, s, text, g, p, config)

        try:
            return list(await asyncio.gather(*(one(*w) for w in work)))
        finally:
            await judge.aclose()

    return run_blocking(run)


def judged_report(
    judge: Judge, items: Sequence[JudgedItem], calibration: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``judged`` block of the report: judged P/R/F1 per kind, the judged matches, what
    judging cost, and the calibration backing the judge (or that none does)."""
    any_failed = any(it.failed for it in items)
    out: dict[str, Any] = {"judge": judge.identity, "shortlist_k": SHORTLIST_K}
    sums = {k: [0, 0, 0] for k in KINDS}
    for it in items:
        for k in KINDS:
            c = it.counts[k]
            sums[k][0] += c.tp
            sums[k][1] += c.fp
            sums[k][2] += c.fn
    for k in KINDS:
        out[k] = counts_json(Counts(*sums[k]), failed=any_failed)
    out["matches"] = {k: sum(1 for it in items for m in it.matches if m.kind == k) for k in KINDS}
    n = len(items)
    out["candidates"] = {
        "pairs": sum(it.candidates for it in items),
        "per_item": sum(it.candidates for it in items) / n if n else 0.0,
    }
    out["stats"] = judge.stats.to_json()
    out["overruled"] = int(getattr(judge, "overruled", 0))  # pairs a person settled
    out["calibration"] = calibration
    out["backing"] = (
        str(calibration.get("backing")) if calibration else "no calibration for this judge"
    )
    return out
