"""One item of the HTML report: its gold and each run's predicted objects, where their evidence
is in the text, and how each fared.

Evidence is located with the scorer's own :class:`~extraction_eval.evaluators.evidence.TextIndex`
(a predicted quote is found exactly as the scorer grounded it), so what the report highlights is
what was scored as grounded. Which prediction matched which gold object comes from the view of
the scorer's alignment the runner stored with each result (``results.counts``), so building a
report does not score the run again; a row without a usable stored view (stored before
``m008``, or scored with other settings) is scored here, with the same result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from extraction_eval.backends.local.report_rows import REPORT_RAW_CHARS, ReportRow
from extraction_eval.evaluators import ItemScore, ScoringConfig, score_dataset_item
from extraction_eval.evaluators.counts import StoredCounts, decode_counts
from extraction_eval.evaluators.diff import FollowedRun
from extraction_eval.evaluators.evidence import Span, TextIndex
from extraction_eval.evaluators.gold_view import ignored_gold
from extraction_eval.textsafe import escape_controls
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship
from extraction_eval.validation import web_url

Obj = dict[str, Any]


def _spans(found: tuple[Span, ...] | None) -> list[list[int]] | None:
    return None if found is None else [[s, e] for s, e in found]


def _has_evidence(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def mentions(text: str, spans: list[list[int]] | None, names: Iterable[Any]) -> list[list[int]]:
    """Where the object's names occur inside its evidence spans (case-insensitive), so a
    sentence-long quote marks the mention in it rather than the whole sentence."""
    out: list[list[int]] = []
    for start, end in spans or ():
        piece = text[start:end]
        lowered: str | None = piece.lower()
        if len(lowered or "") != len(piece):  # lower() moved offsets: a regex finds it
            lowered = None
        for name in names:
            name = name.strip() if isinstance(name, str) else ""
            if not name or len(name) >= len(piece):
                continue
            low = name.lower()
            if lowered is not None and len(low) == len(name):
                at = lowered.find(low)
                if at >= 0:
                    out.append([start + at, start + at + len(name)])
                continue
            m = re.search(re.escape(name), piece, re.IGNORECASE)
            if m is not None:
                out.append([start + m.start(), start + m.end()])
    return out


def _obj(kind: str, label: str, type_: Any, evidence: Any, spans: Any, via: str | None) -> Obj:
    return {"k": kind, "label": label, "type": type_, "ev": evidence, "sp": spans, "via": via}


def entity_object(e: Mapping[str, Any], index: TextIndex, quote: tuple[Span, ...] | None) -> Obj:
    """An entity located in the text: its evidence (``quote``, already looked up), else its
    offsets, else its name; ``sp`` None when none of them is found."""
    name, text = e.get("name"), index.text
    name = name if isinstance(name, str) else ""
    ev = e.get("evidence")
    spans: list[list[int]] | None = None
    via: str | None = None
    if _has_evidence(ev):
        spans, via = _spans(quote), "evidence" if quote is not None else None
    else:
        start, end = e.get("start"), e.get("end")
        if type(start) is int and type(end) is int and 0 <= start < end <= len(text):
            spans, via = [[start, end]], "offsets"
        else:
            found = index.find(name)
            if found is not None:
                spans, via = _spans(found), "name"
    obj = _obj("e", name, e.get("type"), ev, spans, via)
    if via == "evidence":
        found_names = mentions(text, spans, (name,))
        if found_names:
            obj["mn"] = found_names
    return obj


def relationship_label(r: Mapping[str, Any]) -> str:
    """``(source, type, target)``, as the taxonomy labels a relationship."""
    return f"({r.get('source')}, {r.get('type')}, {r.get('target')})"


def relationship_object(r: Mapping[str, Any], index: TextIndex, quote: Any) -> Obj:
    spans = _spans(quote)
    obj = _obj("r", relationship_label(r), r.get("type"), r.get("evidence"), spans, _via(quote))
    found_names = mentions(index.text, spans, (r.get("source"), r.get("target")))
    if found_names:
        obj["mn"] = found_names
    return obj


def _via(found: tuple[Span, ...] | None) -> str | None:
    return "evidence" if found is not None else None


def _payload(o: Entity | Relationship) -> dict[str, Any]:
    """The fields ``entity_object`` / ``relationship_object`` read (all str / int / None, as
    ``model_dump(mode="json")`` has them, without dumping the rest)."""
    if isinstance(o, Entity):
        return {
            "name": o.name,
            "type": o.type,
            "evidence": o.evidence,
            "start": o.start,
            "end": o.end,
        }
    return {"source": o.source, "type": o.type, "target": o.target, "evidence": o.evidence}


def gold_objects(gold: Extraction, index: TextIndex) -> list[Obj]:
    """The item's gold objects, entities first, each located in the text."""
    out: list[Obj] = []
    for e in gold.entities:
        quote = index.find(e.evidence or "") if _has_evidence(e.evidence) else None
        out.append(entity_object(_payload(e), index, quote))
    for r in gold.relationships:
        quote = index.find(r.evidence or "") if _has_evidence(r.evidence) else None
        out.append(relationship_object(_payload(r), index, quote))
    return out


@dataclass(frozen=True)
class Alignment:
    """Which prediction matched which gold object (gold index: entities first, then
    relationships), each predicted object's failure category, and the objects left out of
    the counts (gold below the run's confidence floor and the predictions aligned with it)."""

    entity_gold: dict[int, int]
    relationship_gold: dict[int, int]  # already offset by the number of gold entities
    category: dict[tuple[str, int], str]
    ignored: frozenset[tuple[str, int]] = frozenset()  # predictions: (kind, index)
    ignored_gold: frozenset[int] = frozenset()  # gold index, entities first

    @classmethod
    def of_view(cls, view: FollowedRun, n_gold_entities: int) -> Alignment:
        """From the stored view: an entity pair is ``right`` or ``wrong_type``; only a
        ``right`` relationship is a pair (``reversed`` / ``wrong_type`` are near misses)."""
        ents = {
            pred: j
            for j, (state, pred) in enumerate(view.entity_state)
            if pred is not None and state in ("right", "wrong_type")
        }
        rels = {
            pred: j + n_gold_entities
            for j, (state, pred) in enumerate(view.relationship_state)
            if pred is not None and state == "right"
        }
        return cls(ents, rels, {})

    @classmethod
    def of_score(cls, scored: ItemScore) -> Alignment:
        n = scored.listed("entity", "gold")  # ignored gold keeps its place
        return cls(
            {p.pred: p.gold for p in scored.entity_pairs},
            {p.pred: p.gold + n for p in scored.relationship_pairs},
            {(t.kind, t.index): t.category for t in scored.taxonomy if t.side == "pred"},
            frozenset((k, i) for k, side, i in scored.ignored if side == "pred"),
            frozenset(
                j if k == "entity" else j + n for k, side, j in scored.ignored if side == "gold"
            ),
        )


_SCORED = ("st", "g", "cat")  # what an object's scoring adds to where it is in the text


def predicted_objects(
    pred: Mapping[str, Any],
    index: TextIndex,
    align: Alignment,
    n_gold: int,
    like: list[Obj] | None = None,
) -> tuple[list[Obj], list[str]]:
    """The predicted objects with status (``matched`` / ``spurious`` / ``ungrounded`` /
    ``ignored``), spans, the gold they matched and their category; and each gold object's
    status (``matched`` / ``missed`` / ``ignored``).

    ``like``: another run's objects of the same prediction on the same text index (its
    stored output equal to this one's), scored otherwise: where each is in the text (spans,
    mentions, how found) is taken from them, only the scoring's fields are made again."""
    objects: list[Obj] = []
    shapes = iter(like) if like is not None else None
    for kind, key in (("entity", "entities"), ("relationship", "relationships")):
        gold_of = align.entity_gold if kind == "entity" else align.relationship_gold
        for i, o in enumerate(pred.get(key) or ()):
            ev = o.get("evidence")
            if shapes is not None:
                obj = {k: v for k, v in next(shapes).items() if k not in _SCORED}
                grounded = obj["via"] is not None  # found by its quote (when it has one)
            else:
                quote = index.find(ev) if _has_evidence(ev) else None
                if kind == "entity":
                    obj = entity_object(o, index, quote)
                else:
                    obj = relationship_object(o, index, quote)
                grounded = quote is not None
            if (kind, i) in align.ignored:
                obj["st"] = "ignored"  # aligned with gold below the run's confidence floor
            elif _has_evidence(ev) and not grounded:
                obj["st"] = "ungrounded"
            else:
                obj["st"] = "matched" if i in gold_of else "spurious"
            obj["g"] = gold_of.get(i)
            obj["cat"] = align.category.get((kind, i))
            objects.append(obj)
    matched = set(align.entity_gold.values()) | set(align.relationship_gold.values())
    low = align.ignored_gold
    statuses = [
        "matched" if j in matched else "ignored" if j in low else "missed" for j in range(n_gold)
    ]
    return objects, statuses


_EMPTY: dict[str, Any] = {"entities": [], "relationships": []}


@dataclass
class RunSide:
    """One run's side of an item: the page's row fields and, for a paired diff, the stored
    view of the alignment (None when it was scored here) and the prediction."""

    entry: dict[str, Any]
    view: FollowedRun | None
    pred: dict[str, Any] | None  # None: the item errored


_MEMO_LIMIT = 50_000  # distinct count parts / views kept decoded (a few MB); cleared when more


class StoredViews:
    """Stored count parts and alignment views decoded once per distinct text: in a large run
    most items repeat another's counts and many another's view (both are small integers and
    states, not the item's words). The decoded objects are shared: nobody changes them."""

    def __init__(self) -> None:
        self.heads: dict[str, StoredCounts | None] = {}
        self.views: dict[str, FollowedRun | None] = {}

    def counts(self, text: str | None, key: str) -> StoredCounts | None:
        """:func:`decode_counts` (its ``followed`` part included)."""
        if len(self.heads) > _MEMO_LIMIT:
            self.heads.clear()
        return decode_counts(text, key, self.heads)

    def view(
        self, counts: StoredCounts, n_entities: int, n_relationships: int
    ) -> FollowedRun | None:
        """``counts.followed_run(n_entities, n_relationships)``, each distinct text parsed once."""
        text = counts.followed
        if not text:
            return None
        if text in self.views:
            run = self.views[text]
        else:
            if len(self.views) > _MEMO_LIMIT:
                self.views.clear()
            try:
                run = FollowedRun.from_json(json.loads(text))
            except (ValueError, TypeError):
                run = None
            self.views[text] = run
        if run is None:
            return None
        fits = (len(run.entity_state), len(run.relationship_state)) == (
            n_entities,
            n_relationships,
        )
        return run if fits else None


def same_answer(row: ReportRow, other: ReportRow) -> bool:
    """Two runs' results of an item that lay it out alike (the same output, error, stored
    counts and failure tags): scored alike, the second side can reuse the first's objects."""
    return (
        row.output == other.output
        and row.error == other.error
        and row.counts == other.counts
        and row.tags == other.tags
    )


def reused_side(like: RunSide, row: ReportRow) -> RunSide:
    """``run_side`` of ``row`` when ``like`` was made from a row with :func:`same_answer` (same
    item, scoring and key): its objects, statuses and categories, this row's own fields."""
    entry = like.entry
    return RunSide(_entry(row, entry["cats"], entry["pred"], entry["gst"]), like.view, like.pred)


def run_side(
    item: DatasetItem,
    row: ReportRow,
    scoring: ScoringConfig,
    key: str,
    index: TextIndex,
    stored: StoredViews | None = None,
    like: tuple[ReportRow, RunSide] | None = None,
) -> RunSide:
    """One run's side of an item row (compact keys: a report embeds 100,000 of them), from
    the stored alignment when it was made with ``key`` (:func:`counts_key` of the run's own
    settings) and the item has no gold below the run's confidence floor, else by scoring the
    stored output (``item`` as the run saw it: ``GoldView.item``).

    ``like``: another run's row and side of this item on the same ``index`` (same text and
    evidence mode); when both stored the same output, its parsed prediction and its objects'
    places in the text are reused (:func:`predicted_objects`)."""
    stored = stored or StoredViews()
    failed = row.error is not None or row.output is None
    shapes: list[Obj] | None = None
    other = like[1] if like is not None and like[0].output == row.output else None
    if not failed and other is not None and other.pred is not None:
        pred: dict[str, Any] | None = other.pred  # shared, never changed
        shapes = other.entry["pred"]
    else:
        pred = None if failed else json.loads(row.output or "null")
    if not isinstance(pred, dict):
        pred, failed = None, True
    gold = item.expected
    n_ge, n_gr = len(gold.entities), len(gold.relationships)
    counts = stored.counts(row.counts, key)
    view = None
    # the stored view has no "ignored" state: an item with gold below the run's confidence
    # floor (``GoldView.item`` put the floor on it) is scored here
    if (
        counts is not None
        and counts.failed == failed
        and not ignored_gold(gold, item.metadata, None)
    ):
        view = stored.view(counts, n_ge, n_gr)
    shown = pred if pred is not None else _EMPTY
    if view is not None and row.tags is not None and _fits(view, shown):
        align = Alignment.of_view(view, n_ge)
        align.category.update({(kind, i): cat for cat, kind, side, i in row.tags if side == "pred"})
        categories = _counted(cat for cat, *_ in row.tags)
    else:  # no usable stored view: score it (as the runner did)
        view = None
        model = None if pred is None else Extraction.model_validate(pred)
        scored = score_dataset_item(item, model, scoring)
        align = Alignment.of_score(scored)
        if row.tags is not None:
            align = replace(
                align,
                category={(kind, i): cat for cat, kind, side, i in row.tags if side == "pred"},
            )
            categories = _counted(cat for cat, *_ in row.tags)
        else:
            categories = {k: v for k, v in sorted(scored.taxonomy_counts().items()) if v}
    objects, gold_status = predicted_objects(shown, index, align, n_ge + n_gr, shapes)
    return RunSide(_entry(row, categories, objects, gold_status), view, pred)


def _entry(
    row: ReportRow, categories: dict[str, int], objects: list[Obj], gold_status: list[str]
) -> dict[str, Any]:
    return {
        "err": row.error,
        "ek": row.error_kind,
        "ef1": _finite(row.f1[0]),
        "rf1": _finite(row.f1[1]),
        "cats": categories,
        "fail": row.error is not None or bool(categories),
        "lat": row.latency_ms,
        "cost": row.cost_usd,
        "url": web_url(row.trace_url),  # only http(s) becomes a link
        "pred": objects,
        "gst": gold_status,
        **_reply(row),
    }


def _reply(row: ReportRow) -> dict[str, Any]:
    """The raw reply (controls escaped, cut) of a failed or repaired item, and its repairs;
    nothing for a clean one, so a large report does not carry every answer twice."""
    out: dict[str, Any] = {}
    if row.raw_output is not None:
        raw = escape_controls(row.raw_output[:REPORT_RAW_CHARS])
        more = len(row.raw_output) > REPORT_RAW_CHARS
        out["raw"] = raw + (" … (cut: runs show RUN --item ID shows it whole)" if more else "")
    if row.repairs:
        out["rep"] = list(row.repairs)
    return out


def _fits(view: FollowedRun, pred: Mapping[str, Any]) -> bool:
    """The stored view accounts for exactly this prediction's objects (else re-score)."""
    n_e, n_r = len(pred.get("entities") or ()), len(pred.get("relationships") or ())
    ents = [i for _, i in view.entity_state if i is not None] + view.entity_fp
    rels = [i for _, i in view.relationship_state if i is not None] + view.relationship_fp
    return set(ents) == set(range(n_e)) and set(rels) == set(range(n_r))


def _finite(value: float | None) -> float | None:
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _counted(categories: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in categories:
        out[c] = out.get(c, 0) + 1
    return dict(sorted(out.items()))
