"""What the HTML report shows, read from the store: run configs and summaries, and per item its
text, gold and predicted objects with where their evidence is in the text and how each fared.

Plain JSON-able data (no HTML here); ``extraction_eval.reports`` renders it. Evidence is
located with the scorer's own :class:`~extraction_eval.evaluators.evidence.TextIndex` (the
spans of predicted evidence are the scorer's groundings), so what the report highlights is
exactly what was scored as grounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from extraction_eval.analysis.paired import (
    RUNS_DIFFER,
    CompareOptions,
    RunComparison,
    compare_stored_runs,
)
from extraction_eval.analysis.stored import run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import GoldView, ItemScore, ScoringConfig, score_dataset_item
from extraction_eval.evaluators.diff import (
    COUNTER_NAMES,
    DiffCounts,
    ItemDiff,
    SideObject,
    diff_item,
)
from extraction_eval.evaluators.evidence import Span, TextIndex
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.evaluators.item import Grounding
from extraction_eval.evaluators.taxonomy import CATEGORIES, relationship_label
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult, Relationship
from extraction_eval.validation import web_url

ItemsFor = Callable[[RunRecord], Sequence[DatasetItem]]


@dataclass
class ReportData:
    """Everything the report renders. Item rows are compact dicts, since a 10,000-item report
    embeds them all as JSON: ``id``, ``text``, ``types``, ``gold`` (objects), ``runs`` (one
    entry per run, ``null`` when the run has no result for the item) and, for two runs,
    ``chg`` (changed) and ``diff`` (labelled lists). An object is ``k`` (``e`` / ``r``),
    ``label``, ``type``, ``ev`` (its evidence quote), ``sp`` (``[start, end]`` spans in the
    text, or null) and ``via`` (how they were found: ``evidence``, ``offsets`` of the gold, the
    entity's ``name``); a predicted one adds ``st`` (``matched`` / ``spurious`` /
    ``ungrounded``), ``g`` (the gold it matched, entities first) and ``cat`` (its failure
    category). A run entry: ``err``, ``ek``, ``ef1``, ``rf1``, ``cats``, ``fail``, ``lat``,
    ``cost``, ``url``, ``pred`` and ``gst`` (each gold object ``matched`` / ``missed``)."""

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


def _mentions(text: str, spans: list[list[int]] | None, names: tuple[str, ...]) -> list[list[int]]:
    """Where the object's names occur inside its evidence spans (case-insensitive), so a
    sentence-long quote marks the mention in it rather than the whole sentence."""
    out: list[list[int]] = []
    for start, end in spans or ():
        piece = text[start:end]
        for name in names:
            name = name.strip()
            if not name or len(name) >= len(piece):
                continue
            m = re.search(re.escape(name), piece, re.IGNORECASE)
            if m is not None:
                out.append([start + m.start(), start + m.end()])
    return out


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
        mn = _mentions(index.text, sp, _names(e)) if via == "evidence" else None
        out.append(_obj("e", e.name, e.type, e.evidence, sp, via, mn))
    for r in gold.relationships:
        quote = index.find(r.evidence) if r.evidence and r.evidence.strip() else None
        sp = _spans(quote)
        mn = _mentions(index.text, sp, _names(r))
        out.append(_obj("r", relationship_label(r), r.type, r.evidence, sp, _via(quote), mn))
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
    mentions: list[list[int]] | None = None,
) -> dict[str, Any]:
    obj = {"k": kind, "label": label, "type": type_, "ev": evidence, "sp": spans, "via": via}
    if mentions:
        obj["mn"] = mentions
    return obj


def _names(o: Entity | Relationship) -> tuple[str, ...]:
    return (o.name,) if isinstance(o, Entity) else (o.source, o.target)


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
    ignored = set(scored.ignored)
    objects: list[dict[str, Any]] = []
    for kind, objs, gold_of in (("entity", ents, ent_gold), ("relationship", rels, rel_gold)):
        for i, o in enumerate(objs):
            g = grounding.get((kind, i))
            quote = None if g is None else g.spans
            if isinstance(o, Entity):
                sp, via = _locate_entity(o, index, quote)
                mn = _mentions(index.text, sp, _names(o)) if via == "evidence" else None
                obj = _obj("e", o.name, o.type, o.evidence, sp, via, mn)
            else:
                assert isinstance(o, Relationship)
                sp = _spans(quote)
                mn = _mentions(index.text, sp, _names(o))
                obj = _obj("r", relationship_label(o), o.type, o.evidence, sp, _via(quote), mn)
            if (kind, "pred", i) in ignored:
                obj["st"] = "ignored"  # aligned with gold below the run's confidence floor
            elif g is not None and not g.grounded:
                obj["st"] = "ungrounded"
            else:
                obj["st"] = "matched" if i in gold_of else "spurious"
            obj["g"] = gold_of.get(i)
            obj["cat"] = category.get((kind, i))
            objects.append(obj)
    n_gold = n_gold_entities + scored.listed("relationship", "gold")
    matched = set(ent_gold.values()) | set(rel_gold.values())
    low = {j for k, side, j in scored.ignored if side == "gold" and k == "entity"} | {
        j + n_gold_entities for k, side, j in scored.ignored if side == "gold" and k != "entity"
    }
    statuses = [
        "matched" if j in matched else "ignored" if j in low else "missed" for j in range(n_gold)
    ]
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
    scored = score_dataset_item(item, result.output, scoring)
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
        "url": web_url(result.trace_url),  # only http(s) becomes a link
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
            "runs",
            f"names runs on different datasets ({', '.join(datasets)});"
            " a report compares runs on one dataset",
        )
    get_items = items_for or local_items(store)
    loaded: dict[tuple[str, Any, str], dict[str, DatasetItem]] = {}
    by_run: list[dict[str, DatasetItem]] = []
    for run in runs:
        view = GoldView.of_run(run.config)  # the run's schema, labels and gold floor
        key = (run.dataset, run.dataset_version, repr(view))
        if key not in loaded:
            loaded[key] = {item.id: view.item(item) for item in get_items(run)}
        by_run.append(loaded[key])
    scorings = [run_scoring(run) for run in runs]
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
    pairing = _Pairing(scorings[0]) if len(runs) == 2 else None
    for pos, run in enumerate(runs):
        scoring = scorings[pos]
        own = by_run[pos]
        lat: list[float] = []
        for result in store.iter_item_results(run.id, list(own)):
            item = own[result.item_id]
            entry, scored = run_entry(item, result, scoring)
            if pairing is not None:
                pairing.add(pos, item, result, scored)
            row = rows[item.id]
            if (
                item is not row_items[item.id] and item.text != row["text"]
            ):  # another dataset version changed the text
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
        if pairing is not None:
            diff = pairing.diffs.get(row["id"])
            if diff is not None:
                row["chg"] = diff.changed
                if diff.changed:
                    row["diff"] = diff_lists(diff)
            elif row["id"] in pairing.unchanged:
                row["chg"] = False
            else:  # in one run only
                row["chg"] = _changed(row["runs"][0], row["runs"][1])
    comparison = None
    if pairing is not None:
        a, b = runs
        # compare's defaults (10,000 resamples, seed 42): the figures `compare A B` prints
        paired = compare_stored_runs(
            store, a, b, gold=lambda run: by_run[0], options=CompareOptions(force=True)
        )
        comparison = comparison_view(paired)
        comparison["diff"] = pairing.diff_counts()
    return ReportData(
        runs=[_run_header(r) for r in runs],
        items=list(rows.values()),
        types=sorted(all_types),
        latencies=latencies,
        comparison=comparison,
    )


def diff_lists(diff: ItemDiff) -> dict[str, list[str]]:
    """The item's A → B changes as labelled lists (only the non-empty ones, fixed order)."""
    out: dict[str, list[str]] = {
        "fixed": [o.label for o in diff.objects if o.change == "fixed"],
        "broken": [o.label for o in diff.objects if o.change == "broken"],
        "retyped": [
            f"{o.label}: {_type_of(o.a_pred)} → {_type_of(o.b_pred)}"
            for o in diff.objects
            if o.retyped
        ],
        "direction flipped": [o.label for o in diff.objects if o.flipped],
        "evidence now ungrounded": [
            *(o.label for o in diff.objects if o.evidence == "ungrounded"),
            *(x.label for x in diff.extras if x.evidence == "ungrounded"),
        ],
        "evidence now grounded": [
            *(o.label for o in diff.objects if o.evidence == "grounded"),
            *(x.label for x in diff.extras if x.evidence == "grounded"),
        ],
        "new false positives": [x.label for x in diff.extras if x.status == "new"],
        "gone false positives": [x.label for x in diff.extras if x.status == "gone"],
    }
    if diff.a_failed != diff.b_failed:
        out["error"] = ["B failed" if diff.b_failed else "A failed"]
    return {k: v for k, v in out.items() if v}


def _type_of(side: SideObject | None) -> str:
    return "?" if side is None else side.type


class _Pairing:
    """Two runs' items paired by id as they are read, for the extraction-aware diff (with A's
    scoring, as ``compare``)."""

    def __init__(self, diff_scoring: ScoringConfig) -> None:
        self.scoring = diff_scoring
        self.first: dict[str, tuple[ItemScore, ItemResult]] = {}
        self.diffs: dict[str, ItemDiff] = {}
        self.unchanged: set[str] = set()
        self.counts = DiffCounts()
        self.only_in: tuple[set[str], set[str]] = (set(), set())

    def add(self, pos: int, item: DatasetItem, result: ItemResult, scored: ItemScore) -> None:
        if pos == 0:
            self.first[item.id] = (scored, result)
            return
        held = self.first.pop(item.id, None)
        if held is None:
            self.only_in[1].add(item.id)
            return
        score_a, result_a = held
        if (result_a.ok, result_a.output) == (result.ok, result.output) or not (
            result_a.ok or result.ok
        ):  # equal outputs, or both errored: nothing can differ (no second scoring needed)
            self.unchanged.add(item.id)
            self.counts.add_unchanged(gold_empty=score_a.gold_empty, failed=not result.ok)
            return
        pa = result_a.output if result_a.ok else None
        pb = result.output if result.ok else None
        self.diffs[item.id] = diff = diff_item(
            item_id=item.id,
            text=item.text,
            gold=scored_gold(item),
            pred_a=pa,
            pred_b=pb,
            config=self.scoring,
            scores=(
                score_dataset_item(item, pa, self.scoring),
                score_dataset_item(item, pb, self.scoring),
            ),
        )
        self.counts.add(diff)

    def diff_counts(self) -> dict[str, Any]:
        return diff_view(self.counts)


def diff_view(counts: DiffCounts) -> dict[str, Any]:
    """The diff's counts over all paired items: totals and one row per kind and type."""
    data = counts.to_json()
    rows = [
        {"kind": kind, "type": type_, "counts": [row[n] for n in COUNTER_NAMES]}
        for kind, key in (("entity", "entities"), ("relationship", "relationships"))
        for type_, row in data[key].items()
    ]
    return {
        "columns": [n.replace("_", " ") for n in COUNTER_NAMES],
        "totals": [data["totals"][n] for n in COUNTER_NAMES],
        "rows": rows,
        "changed_items": data["changed_items"],
        "items": data["items"],
    }


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def comparison_view(result: RunComparison) -> dict[str, Any]:
    """The paired comparison (``compare A B``'s, the same figures) as the report's table rows
    (strings, formatted once here)."""
    paired = result.comparison
    rows = []
    for m in paired.metrics:
        if m.a is None and m.b is None:
            continue
        ci = "—" if m.ci_low is None or m.ci_high is None else f"{m.ci_low:+.4f} … {m.ci_high:+.4f}"
        rows.append(
            {
                "metric": m.name + (" (lower is better)" if m.lower_is_better else ""),
                "a": _num(m.a),
                "b": _num(m.b),
                "delta": "—" if m.delta is None else f"{m.delta:+.4f}",
                "ci": ci,
                "verdict": m.verdict,
            }
        )
    mc = paired.mcnemar
    extras = [
        f"McNemar's exact test on per-item outcomes (right = no error and entity F1 = 1; on a"
        f" gold-empty item, nothing predicted): right in B only {mc.b01}, right in A only"
        f" {mc.b10}, both right {mc.both_right}, both wrong {mc.both_wrong};"
        f" two-sided p = {mc.p_value:.4g}.",
    ]
    for warning in result.warnings:  # e.g. B scored differently, items in one run only
        extras.append(warning.replace(f"{RUNS_DIFFER} (compared anyway, forced)", RUNS_DIFFER))
    types = [
        {
            "kind": t.kind,
            "type": t.label,
            "support": t.support,
            "a": f"{t.a_f1:.3f}",
            "b": f"{t.b_f1:.3f}",
            "delta": f"{t.delta:+.3f}",
        }
        for t in (*paired.entity_types, *paired.relationship_types)
    ]
    return {
        "note": (
            f"{paired.items} items paired by id, both runs' outputs scored with A's settings"
            " (the figures of `compare A B`). Δ = B − A with a paired percentile bootstrap"
            f" {paired.confidence:.0%} CI ({paired.resamples:,} resamples of the items, seed"
            f" {paired.seed}); the verdict says improved or regressed only when the CI"
            " excludes 0."
        ),
        "rows": rows,
        "extras": extras,
        "types": types,
        "json": result.to_json(),
    }
