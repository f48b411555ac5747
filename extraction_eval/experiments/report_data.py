"""What the HTML report shows, read from the store: run configs and summaries, and per item its
text, gold and predicted objects with where their evidence is in the text and how each fared.

Plain JSON-able data (no HTML here); ``extraction_eval.reports`` renders it. Evidence is
located with the scorer's own :class:`~extraction_eval.evaluators.evidence.TextIndex` (the
spans of predicted evidence are the scorer's groundings), so what the report highlights is
exactly what was scored as grounded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import ItemScore, ScoringConfig, score_item
from extraction_eval.evaluators.evidence import Span, TextIndex
from extraction_eval.evaluators.item import Grounding
from extraction_eval.evaluators.taxonomy import CATEGORIES, relationship_label
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult, Relationship

# How a highlighted span was found: the object's evidence quote, the gold's character offsets,
# or (no evidence, no offsets) the first occurrence of the entity's name.
LOCATED_BY = ("evidence", "offsets", "name")
# A predicted object's status in the highlight (the legend's four styles with the gold side).
PRED_STATUSES = ("matched", "spurious", "ungrounded")
GOLD_STATUSES = ("matched", "missed")

ItemsFor = Callable[[RunRecord], Sequence[DatasetItem]]


@dataclass
class ReportData:
    """Everything the report renders. ``items`` rows are compact dicts (see ``item_row``)
    because a 10,000-item report embeds them all as JSON."""

    runs: list[dict[str, Any]]
    items: list[dict[str, Any]]
    types: list[str]
    categories: list[str] = field(default_factory=lambda: list(CATEGORIES))
    # two runs: the paired comparison and the per-item diff (filled by ``comparison``)
    comparison: dict[str, Any] | None = None
    latencies: list[list[float]] = field(default_factory=list)  # per run, ms, cache misses

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "items": self.items,
            "types": self.types,
            "categories": self.categories,
            "comparison": self.comparison,
        }


def scoring_from_record(record: dict[str, Any] | None) -> ScoringConfig:
    """The scoring configuration a run recorded (``describe``), defaults for what it lacks."""
    known = {f.name for f in dataclasses.fields(ScoringConfig) if not f.name.startswith("_")}
    kwargs: dict[str, Any] = {}
    for key, value in (record or {}).items():
        if key not in known:
            continue
        if key == "inverse_pairs":
            value = tuple(tuple(pair) for pair in value)
        elif key == "symmetric":
            value = frozenset(value)
        kwargs[key] = value
    return ScoringConfig(**kwargs)


def local_items(store: LocalStore) -> ItemsFor:
    """A run's dataset items from the local store, at the version the run used."""

    def items_for(run: RunRecord) -> Sequence[DatasetItem]:
        version = run.dataset_version if isinstance(run.dataset_version, int) else None
        return store.get_items(run.dataset, version=version)

    return items_for


def run_items(store: LocalStore) -> tuple[ItemsFor, Callable[[], None]]:
    """Where each run's items come from: the local store for local runs; for LangFuse-mode
    runs LangFuse (the dataset lives there; connected on first use, keys from the
    environment). Returns the reader and a ``close`` to call when done."""
    from extraction_eval.backends.langfuse.datasets import LangfuseDatasetBackend

    local = local_items(store)
    remote: list[LangfuseDatasetBackend] = []

    def items_for(run: RunRecord) -> Sequence[DatasetItem]:
        if run.backend != "langfuse":
            return local(run)
        if not remote:
            remote.append(LangfuseDatasetBackend.from_env())
        return remote[0].get_items(run.dataset, version=run.dataset_version)

    def close() -> None:
        for backend in remote:
            backend.close()

    return items_for, close


def _spans(found: tuple[Span, ...] | None) -> list[list[int]] | None:
    return None if found is None else [[s, e] for s, e in found]


def _locate_entity(
    e: Entity, index: TextIndex, quote_spans: tuple[Span, ...] | None
) -> tuple[list[list[int]] | None, str | None]:
    """Where an entity is in the text: its evidence (already looked up), else its offsets,
    else its name. (None, None) when none of them is found."""
    if e.evidence is not None and e.evidence.strip():
        return _spans(quote_spans), "evidence" if quote_spans is not None else None
    text = index.text
    if e.start is not None and e.end is not None and 0 <= e.start < e.end <= len(text):
        return [[e.start, e.end]], "offsets"
    found = index.find(e.name)
    return (_spans(found), "name") if found is not None else (None, None)


def _gold_objects(gold: Extraction, index: TextIndex) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in gold.entities:
        quote = index.find(e.evidence) if e.evidence and e.evidence.strip() else None
        sp, via = _locate_entity(e, index, quote)
        out.append(_obj("e", e.name, e.type, e.evidence, sp, via))
    for r in gold.relationships:
        quote = index.find(r.evidence) if r.evidence and r.evidence.strip() else None
        out.append(_obj("r", relationship_label(r), r.type, r.evidence, _spans(quote), _via(quote)))
    return out


def _via(found: tuple[Span, ...] | None) -> str | None:
    return "evidence" if found is not None else None


def _obj(
    kind: str,
    label: str,
    type_: str,
    evidence: str | None,
    spans: list[list[int]] | None,
    via: str | None,
) -> dict[str, Any]:
    return {"k": kind, "label": label, "type": type_, "ev": evidence, "sp": spans, "via": via}


def _run_objects(
    result: ItemResult, scored: ItemScore, index: TextIndex, n_gold_entities: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """The predicted objects with status, spans and the gold they matched (index into the
    item's gold list: entities first, then relationships), and each gold object's status."""
    pred = result.output or Extraction()
    ents: list[Entity] = list(pred.entities)
    rels: list[Relationship] = list(pred.relationships)
    grounding: dict[tuple[str, int], Grounding] = {(g.kind, g.index): g for g in scored.groundings}
    ent_gold = {p.pred: p.gold for p in scored.entity_pairs}
    rel_gold = {p.pred: p.gold + n_gold_entities for p in scored.relationship_pairs}
    category: dict[tuple[str, int], str] = {
        (t.kind, t.index): t.category for t in scored.taxonomy if t.side == "pred"
    }
    objects: list[dict[str, Any]] = []
    for kind, objs, gold_of in (("entity", ents, ent_gold), ("relationship", rels, rel_gold)):
        for i, o in enumerate(objs):
            g = grounding.get((kind, i))
            quote = None if g is None else g.spans
            if isinstance(o, Entity):
                sp, via = _locate_entity(o, index, quote)
                obj = _obj("e", o.name, o.type, o.evidence, sp, via)
            else:
                assert isinstance(o, Relationship)
                obj = _obj("r", relationship_label(o), o.type, o.evidence, _spans(quote), None)
                obj["via"] = _via(quote)
            if g is not None and not g.grounded:
                obj["st"] = "ungrounded"
            else:
                obj["st"] = "matched" if i in gold_of else "spurious"
            obj["g"] = gold_of.get(i)
            obj["cat"] = category.get((kind, i))
            objects.append(obj)
    n_gold = n_gold_entities + scored.n_gold_relationships
    matched = set(ent_gold.values()) | set(rel_gold.values())
    statuses = ["matched" if j in matched else "missed" for j in range(n_gold)]
    return objects, statuses


def _score_value(result: ItemResult, name: str) -> float | None:
    for s in result.scores:
        if s.name == name and isinstance(s.value, (int, float)) and not isinstance(s.value, bool):
            return float(s.value)
    return None


def run_entry(
    item: DatasetItem, result: ItemResult, scoring: ScoringConfig
) -> tuple[dict[str, Any], ItemScore]:
    """One run's side of an item row (compact keys: the report embeds 10,000 of them)."""
    scored = score_item(
        item_id=item.id,
        text=item.text,
        gold=item.expected,
        pred=result.output,
        config=scoring,
        schema=item.schema_,
    )
    index = TextIndex(item.text, scoring.evidence)
    objects, gold_status = _run_objects(result, scored, index, len(item.expected.entities))
    categories = result.categories if result.taxonomy is not None else scored.taxonomy_counts()
    categories = {k: v for k, v in categories.items() if v}
    entry: dict[str, Any] = {
        "err": result.error,
        "ek": result.error_kind,
        "ef1": _score_value(result, "entity_f1"),
        "rf1": _score_value(result, "relationship_f1"),
        "cats": categories,
        "fail": result.error is not None or bool(categories),
        "lat": result.latency_ms,
        "cost": result.usage.cost_usd,
        "url": result.trace_url,
        "pred": objects,
        "gst": gold_status,
    }
    return entry, scored


def _run_header(run: RunRecord) -> dict[str, Any]:
    return {
        "name": run.name,
        "dataset": run.dataset,
        "dataset_version": run.dataset_version,
        "backend": run.backend,
        "status": run.status,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "experiment_id": run.experiment_id,
        "config": run.config,
        "summary": run.summary or {},
    }


def _types(item: DatasetItem, entries: Iterable[dict[str, Any] | None]) -> list[str]:
    types = {e.type.strip() for e in item.expected.entities}
    types |= {r.type.strip() for r in item.expected.relationships}
    for entry in entries:
        for obj in entry["pred"] if entry else ():
            types.add(str(obj["type"]).strip())
    return sorted(t for t in types if t)


def _changed(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Did the item's outcome differ between the two runs (either side missing counts)."""
    if a is None or b is None:
        return True
    keys = ("err", "ef1", "rf1", "cats", "gst")
    if any(a[k] != b[k] for k in keys):
        return True
    return [(o["label"], o["type"], o["st"]) for o in a["pred"]] != [
        (o["label"], o["type"], o["st"]) for o in b["pred"]
    ]


def build_report_data(
    store: LocalStore,
    runs: Sequence[RunRecord],
    *,
    items_for: ItemsFor | None = None,
) -> ReportData:
    """The report of one or more stored runs on the same dataset.

    Items are in the first run's dataset order (then items only later runs have). An item a
    run has no result for is ``null`` on that run's side; an errored item is a row with its
    error, scored as an empty prediction like everywhere else."""
    if not runs:
        raise InvalidValue("runs", "name at least one run")
    datasets = sorted({r.dataset for r in runs})
    if len(datasets) > 1:
        raise InvalidValue(
            "runs", f"a report compares runs on one dataset; these are on {', '.join(datasets)}"
        )
    get_items = items_for or local_items(store)
    loaded: dict[tuple[str, Any], dict[str, DatasetItem]] = {}
    by_run: list[dict[str, DatasetItem]] = []
    for run in runs:
        key = (run.dataset, run.dataset_version)
        if key not in loaded:
            loaded[key] = {item.id: item for item in get_items(run)}
        by_run.append(loaded[key])
    scorings = [scoring_from_record((run.config or {}).get("scoring")) for run in runs]
    order = list(by_run[0])
    seen = set(order)
    for items in by_run[1:]:
        for item_id in items:
            if item_id not in seen:
                order.append(item_id)
                seen.add(item_id)
    first_mode = scorings[0].evidence
    rows: dict[str, dict[str, Any]] = {}
    row_items: dict[str, DatasetItem] = {}
    for items in reversed(by_run):  # the first run that has an item gives its text
        row_items.update(items)
    for item_id in order:
        item = row_items[item_id]
        rows[item_id] = {
            "id": item_id,
            "text": item.text,
            "gold": _gold_objects(item.expected, TextIndex(item.text, first_mode)),
            "runs": [None] * len(runs),
        }
    latencies: list[list[float]] = []
    for pos, run in enumerate(runs):
        scoring = scorings[pos]
        own = by_run[pos]
        lat: list[float] = []
        for result in store.iter_item_results(run.id, list(own)):
            item = own[result.item_id]
            entry, _ = run_entry(item, result, scoring)
            row = rows[item.id]
            if item is not row_items[item.id] and item.text != row["text"]:  # another dataset version changed the text
                entry["text"] = item.text
            shown = row_items[item.id]
            if (
                scoring.evidence != first_mode
                or "text" in entry
                or (item is not shown and item.expected != shown.expected)
            ):
                # this run's gold differs when its evidence mode, text or gold does
                entry["gold"] = _gold_objects(item.expected, TextIndex(item.text, scoring.evidence))
            row["runs"][pos] = entry
            if result.latency_ms is not None and not result.cache_hit:
                lat.append(result.latency_ms)
        latencies.append(lat)
    all_types: set[str] = set()
    for row in rows.values():
        row["types"] = _types(row_items[row["id"]], row["runs"])
        all_types.update(row["types"])
        if len(runs) == 2:
            row["chg"] = _changed(row["runs"][0], row["runs"][1])
    return ReportData(
        runs=[_run_header(r) for r in runs],
        items=list(rows.values()),
        types=sorted(all_types),
        latencies=latencies,
    )
