"""What the HTML report shows, read from the store in one streaming pass: run configs and
summaries, a compact item table, and per item its text, gold and predicted objects with where
their evidence is in the text and how each fared.

Plain JSON-able data (no HTML here); ``extraction_eval.reports`` renders it. Built to scale
(two runs of 100,000 items): the dataset's items and the runs' results are read a batch at a
time; the item table is kept as columns (a few values per item); each item's details are
serialized as they are made, ``CHUNK`` items to a compressed chunk, so the page parses only the
chunk of an item someone expands. Per item, nothing is scored again where the runner stored its
alignment (``report_items``); charts are drawn from aggregates (the summaries, a latency
histogram).
"""

from __future__ import annotations

import gc
import json
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from extraction_eval.analysis.report_compare import (
    CompareAlong,
    ItemPairing,
    comparison_view,
    diff_lists,
    diff_view,
)
from extraction_eval.analysis.report_items import (
    RunSide,
    StoredViews,
    gold_objects,
    reused_side,
    run_side,
    same_answer,
)
from extraction_eval.analysis.stored import run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.backends.local.report_rows import ReportRow
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import GoldView, ScoringConfig
from extraction_eval.evaluators.counts import counts_key
from extraction_eval.evaluators.evidence import TextIndex
from extraction_eval.evaluators.taxonomy import CATEGORIES
from extraction_eval.types import DatasetItem

__all__ = [
    "CHUNK",
    "ReportData",
    "build_report_data",
    "comparison_view",
    "diff_lists",
    "diff_view",
    "latency_histogram",
    "local_items",
    "merge_rows",
    "run_items",
]

ItemsFor = Callable[[RunRecord], Sequence[DatasetItem]]
CHUNK = 500  # items per details chunk: what the page decompresses to show one item
_BATCH = 500  # items read from the store at a time
_LEVEL = 6  # zlib level of the chunks (1 is faster to build, 20 % larger)
_ERR_CHARS = 300  # an error message in the table (whole in the item's details)
LATENCY_BINS = 40


@dataclass
class ReportData:
    """Everything the report renders.

    ``table``: the item table as columns, one value per item each: ``id``, ``text``,
    ``types`` (indices into ``types``), ``runs`` (per run: ``st`` 0 no result / 1 ok /
    2 errored, ``ek`` error kind, ``err`` the error shortened, ``ef1`` / ``rf1``, ``cats``
    flat [category index, count, ...] into ``categories``) and, for two runs, ``chg``
    (changed between A and B, 0/1).

    ``chunks``: zlib-compressed JSON arrays of ``CHUNK`` items' details each, in table
    order: ``gold`` (objects), ``runs`` (per run null, or ``pred``, ``gst``, ``err``,
    ``ek``, ``lat``, ``cost``, ``url`` and ``text`` / ``gold`` where the run's differ) and,
    for two runs, ``diff`` (labelled lists) when the item changed. An object is ``k``
    (``e`` / ``r``), ``label``, ``type``, ``ev`` (its evidence quote), ``sp`` (``[start,
    end]`` spans in the text, or null), ``mn`` (its names inside those spans) and ``via``
    (how they were found: ``evidence``, ``offsets`` of the gold, the entity's ``name``); a
    predicted one adds ``st`` (``matched`` / ``spurious`` / ``ungrounded`` / ``ignored``:
    aligned with gold below the run's confidence floor), ``g`` (the gold it matched, entities
    first) and ``cat`` (its failure category); ``gst`` is each gold object's ``matched`` /
    ``missed`` / ``ignored``. ``items`` puts both back
    together as one dict per item."""

    runs: list[dict[str, Any]]
    table: dict[str, Any]
    chunks: list[bytes]
    types: list[str]
    categories: list[str] = field(default_factory=lambda: list(CATEGORIES))
    # two runs: the paired comparison and the per-item diff's counts
    comparison: dict[str, Any] | None = None
    # per run: latency histogram over shared bins (ms; cache hits left out)
    latency: dict[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.table["id"])

    def details(self) -> Iterator[dict[str, Any]]:
        """Each item's details, in table order (decompressing one chunk at a time)."""
        for chunk in self.chunks:
            yield from json.loads(zlib.decompress(chunk))

    @property
    def items(self) -> list[dict[str, Any]]:
        """Every item as one dict (table and details together): for tests and notebooks,
        it holds the whole report in memory."""
        return merge_rows(self.table, self.details(), self.types, self.categories)

    def meta(self) -> dict[str, Any]:
        """What the page's script reads besides the table and chunks."""
        return {
            "runs": self.runs,
            "types": self.types,
            "categories": self.categories,
            "chunk": CHUNK,
            "n": self.n_items,
        }


def merge_rows(
    table: dict[str, Any],
    details: Iterator[dict[str, Any]],
    types: Sequence[str],
    categories: Sequence[str],
) -> list[dict[str, Any]]:
    """The table's columns and the items' details as one dict per item (``id``, ``text``,
    ``types``, ``gold``, ``runs``, and ``chg`` / ``diff`` for two runs)."""
    rows = []
    for i, det in enumerate(details):
        row: dict[str, Any] = {
            "id": table["id"][i],
            "text": table["text"][i],
            "types": [types[t] for t in table["types"][i]],
            "gold": det["gold"],
            "runs": [],
        }
        for col, entry in zip(table["runs"], det["runs"], strict=True):
            if entry is None:
                row["runs"].append(None)
                continue
            flat = col["cats"][i]
            cats = {categories[flat[j]]: flat[j + 1] for j in range(0, len(flat), 2)}
            entry = {
                **entry,
                "ef1": col["ef1"][i],
                "rf1": col["rf1"][i],
                "cats": cats,
                "fail": col["st"][i] == 2 or bool(cats),
            }
            row["runs"].append(entry)
        if "chg" in table:
            row["chg"] = bool(table["chg"][i])
            if "diff" in det:
                row["diff"] = det["diff"]
        rows.append(row)
    return rows


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


def _streamable(runs: Sequence[RunRecord]) -> bool:
    """Every run local, on one numbered dataset version with one gold view (floor and
    schemas): the items can be streamed once for all of them."""
    keys = {(r.backend, r.dataset_version, repr(GoldView.of_run(r.config))) for r in runs}
    (backend, version, _), *rest = keys
    return not rest and backend == "local" and isinstance(version, int)


ItemStream = Iterator[tuple[str, list[DatasetItem | None]]]


def _item_stream(
    store: LocalStore, runs: Sequence[RunRecord], items_for: ItemsFor | None
) -> tuple[ItemStream, dict[str, DatasetItem] | None]:
    """(item id, each run's item or None) in the first run's dataset order (then items only
    later runs have), and, when the items were loaded whole, the first run's."""
    if _streamable(runs):
        run = runs[0]
        view = GoldView.of_run(run.config)  # the run's schema, labels and gold floor
        stream = store.iter_items(run.dataset, version=run.dataset_version)
        n = len(runs)

        def each() -> ItemStream:
            for item in stream:
                seen: list[DatasetItem | None] = [view.item(item)] * n
                yield item.id, seen

        return each(), None
    get_items = items_for or local_items(store)
    loaded: dict[tuple[str, Any, str], dict[str, DatasetItem]] = {}
    by_run: list[dict[str, DatasetItem]] = []
    for run in runs:
        view = GoldView.of_run(run.config)  # the run's schema, labels and gold floor
        key = (run.backend, run.dataset_version, repr(view))
        if key not in loaded:
            loaded[key] = {item.id: view.item(item) for item in get_items(run)}
        by_run.append(loaded[key])
    order = list(by_run[0])
    seen = set(order)
    for items in by_run[1:]:
        order += [i for i in items if i not in seen]
        seen.update(items)

    def in_order() -> ItemStream:
        for i in order:
            yield i, [items.get(i) for items in by_run]

    return in_order(), by_run[0]


class _Table:
    """The item table's columns, appended to item by item."""

    def __init__(self, n_runs: int, paired: bool) -> None:
        self.cols: dict[str, Any] = {"id": [], "text": [], "types": []}
        self.cols["runs"] = [
            {"st": [], "ek": [], "err": [], "ef1": [], "rf1": [], "cats": []} for _ in range(n_runs)
        ]
        if paired:
            self.cols["chg"] = []
        self.type_index: dict[str, int] = {}
        self.category_index = {c: i for i, c in enumerate(CATEGORIES)}
        self.categories: list[str] = list(CATEGORIES)

    def add(self, item: DatasetItem, sides: list[RunSide | None], chg: bool | None) -> None:
        cols = self.cols
        cols["id"].append(item.id)
        cols["text"].append(item.text)
        types = {e.type.strip() for e in item.expected.entities}
        types |= {r.type.strip() for r in item.expected.relationships}
        for side, col in zip(sides, cols["runs"], strict=True):
            if side is None:
                for key, empty in (("st", 0), ("ek", None), ("err", None), ("cats", [])):
                    col[key].append(empty)
                col["ef1"].append(None)
                col["rf1"].append(None)
                continue
            e = side.entry
            types.update(str(o["type"]).strip() for o in e["pred"])
            err = e["err"]
            col["st"].append(1 if err is None else 2)
            col["ek"].append(e["ek"] if err is not None else None)
            col["err"].append(None if err is None else err[:_ERR_CHARS])
            col["ef1"].append(e["ef1"])
            col["rf1"].append(e["rf1"])
            flat: list[int] = []
            for name, n in e["cats"].items():
                if name not in self.category_index:  # a category this version does not know
                    self.category_index[name] = len(self.categories)
                    self.categories.append(name)
                flat += [self.category_index[name], n]
            col["cats"].append(flat)
        idx = []
        for t in sorted(t for t in types if t):
            if t not in self.type_index:
                self.type_index[t] = len(self.type_index)
            idx.append(self.type_index[t])
        cols["types"].append(idx)
        if chg is not None:
            cols["chg"].append(int(chg))

    def finish(self) -> tuple[dict[str, Any], list[str]]:
        """The columns with type indices into the sorted type names."""
        names = sorted(self.type_index)
        new = {self.type_index[t]: i for i, t in enumerate(names)}
        self.cols["types"] = [sorted(new[t] for t in ts) for ts in self.cols["types"]]
        return self.cols, names


class _Chunks:
    """Item details, serialized and compressed ``CHUNK`` at a time as they are made.

    zlib lets go of the GIL while it compresses, so a chunk is compressed on a second thread
    while the next one is made (a sixth of a large build's time, off the main thread)."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.compressed: list[Future[bytes]] = []
        self.pending: list[dict[str, Any]] = []

    def add(self, details: dict[str, Any]) -> None:
        self.pending.append(details)
        if len(self.pending) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            text = json.dumps(
                self.pending, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            )
            data = text.encode("utf-8")
            self.compressed.append(self.pool.submit(zlib.compress, data, _LEVEL))
            self.pending = []

    def done(self) -> list[bytes]:
        self.flush()
        return [f.result() for f in self.compressed]


def build_report_data(
    store: LocalStore,
    runs: Sequence[RunRecord],
    *,
    items_for: ItemsFor | None = None,
) -> ReportData:
    """The report of one or more stored runs on the same dataset.

    Items are in the first run's dataset order (then items only later runs have). An item a
    run has no result for is ``null`` on that run's side; an errored item is a row with its
    error, scored as an empty prediction like everywhere else. Local runs on one dataset
    version (and gold floor) stream their items from the store; otherwise ``items_for``
    (default: the local store) reads each run's items whole, e.g. from LangFuse."""
    if not runs:
        raise InvalidValue("runs", "name at least one run")
    with _collector_paused(), ThreadPoolExecutor(1, thread_name_prefix="report-zlib") as pool:
        return _build(store, runs, items_for, pool)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while the report is built.

    The build keeps hundreds of thousands of small objects alive (the table's columns) and
    makes millions that die young by reference counting, none of them in a cycle (a two-run
    build of 10,000 items leaves the same few hundred unreachable objects as its setup). Yet
    each full collection walked every tracked object of the process, the million that the
    imports leave included: at two runs of 100,000 items, 109 full passes cost 20 s of a 73 s
    build. Whatever cycle the build does make is collected once the collector is back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _build(
    store: LocalStore,
    runs: Sequence[RunRecord],
    items_for: ItemsFor | None,
    pool: ThreadPoolExecutor,
) -> ReportData:
    datasets = sorted({r.dataset for r in runs})
    if len(datasets) > 1:
        raise InvalidValue(
            "runs",
            f"names runs on different datasets ({', '.join(datasets)});"
            " a report compares runs on one dataset",
        )
    scorings = [run_scoring(run) for run in runs]
    views = [GoldView.of_run(r.config) for r in runs]
    keys = [counts_key(s, v.floor, v.schemas_key()) for s, v in zip(scorings, views, strict=True)]
    stream, loaded = _item_stream(store, runs, items_for)
    pairing = (
        ItemPairing(scorings[0], keys[0] == keys[1] and _same_gold(*runs))
        if len(runs) == 2
        else None
    )
    table = _Table(len(runs), pairing is not None)
    along = (
        None if pairing is None else CompareAlong(store, runs[0], runs[1], streamed=loaded is None)
    )
    chunks = _Chunks(pool)
    latencies = [array("d") for _ in runs]
    stored = StoredViews()
    first_mode = scorings[0].evidence
    for batch in _batched(stream, _BATCH):
        rows = [
            {
                r.item_id: r
                for r in store.iter_report_rows(
                    run.id, [i for i, items in batch if items[pos] is not None]
                )
            }
            for pos, run in enumerate(runs)
        ]
        for item_id, items in batch:
            shown = next(x for x in items if x is not None)
            index = _Indexes()
            sides: list[RunSide | None] = []
            for pos, item in enumerate(items):
                row = rows[pos].get(item_id)
                first = sides[0] if pos else None
                if (
                    first is not None
                    and row is not None
                    and item is items[0]
                    and same_answer(row, rows[0][item_id])
                    and keys[pos] == keys[0]
                    and scorings[pos] == scorings[0]
                ):  # both runs answered alike: laid out once
                    sides.append(reused_side(first, row))
                    continue
                sides.append(
                    _side(scorings[pos], keys[pos], first_mode, item, row, shown, index, stored)
                )
            for pos, row in enumerate(r.get(item_id) for r in rows):
                lat = None if row is None or row.cache_hit else row.latency_ms
                if sides[pos] is not None and lat is not None:
                    latencies[pos].append(lat)
            details: dict[str, Any] = {
                "gold": gold_objects(shown.expected, index(shown.text, first_mode)),
                "runs": [None if s is None else _details(s.entry) for s in sides],
            }
            chg = None
            if pairing is not None and along is not None:
                along.add(item_id, rows[0].get(item_id), rows[1].get(item_id))
                chg, lists = pairing.add(items, sides, [r.get(item_id) for r in rows])
                if lists is not None:
                    details["diff"] = lists
            table.add(shown, sides, chg)
            chunks.add(details)
    done = chunks.done()
    columns, types = table.finish()
    comparison = None
    if pairing is not None and along is not None:
        # a local run's stored counts are used, others re-scored against A's gold
        paired = along.result(None if loaded is None else (lambda run: loaded))
        comparison = comparison_view(paired)
        comparison["diff"] = diff_view(pairing.counts)
    return ReportData(
        runs=[_run_header(r) for r in runs],
        table=columns,
        chunks=done,
        types=types,
        categories=table.categories,
        comparison=comparison,
        latency=latency_histogram(latencies),
    )


class _Indexes:
    """One item's text indexes, one per (text, evidence mode)."""

    def __init__(self) -> None:
        self.made: dict[tuple[str, str], TextIndex] = {}

    def __call__(self, text: str, mode: Any) -> TextIndex:
        got = self.made.get((text, mode))
        if got is None:
            got = self.made[(text, mode)] = TextIndex(text, mode)
        return got


def _side(
    scoring: ScoringConfig,
    key: str,
    first_mode: str,
    item: DatasetItem | None,
    row: ReportRow | None,
    shown: DatasetItem,
    index: _Indexes,
    stored: StoredViews,
) -> RunSide | None:
    """One run's side of an item (None when the run has no result for it)."""
    if item is None or row is None:
        return None
    side = run_side(item, row, scoring, key, index(item.text, scoring.evidence), stored)
    if item is not shown and item.text != shown.text:
        side.entry["text"] = item.text  # another dataset version changed the text
    if (
        scoring.evidence != first_mode
        or "text" in side.entry
        or (item is not shown and item.expected != shown.expected)
    ):  # this run's gold differs when its evidence mode, text or gold does
        side.entry["gold"] = gold_objects(item.expected, index(item.text, scoring.evidence))
    return side


def _details(entry: dict[str, Any]) -> dict[str, Any]:
    """A run's side as the details keep it (the table has its scores and categories)."""
    return {k: v for k, v in entry.items() if k not in ("ef1", "rf1", "cats", "fail")}


def _same_gold(a: RunRecord, b: RunRecord) -> bool:
    return (a.backend, a.dataset, a.dataset_version) == (b.backend, b.dataset, b.dataset_version)


def _batched(stream: ItemStream, size: int) -> Iterator[list[tuple[str, list[DatasetItem | None]]]]:
    batch: list[tuple[str, list[DatasetItem | None]]] = []
    for entry in stream:
        batch.append(entry)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def latency_histogram(latencies: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Per-run item counts over ``LATENCY_BINS`` equal bins shared by all runs (ms)."""
    import numpy as np

    values = [
        np.frombuffer(v, dtype=np.float64)
        if isinstance(v, array)
        else np.asarray(v, dtype=np.float64)
        for v in latencies
    ]
    finite = [v[np.isfinite(v)] for v in values]
    if not any(v.size for v in finite):
        return {}
    low = min(float(v.min()) for v in finite if v.size)
    high = max(float(v.max()) for v in finite if v.size)
    if high <= low:
        high = low + 1.0
    edges = np.linspace(low, high, LATENCY_BINS + 1)
    counts = [np.histogram(v, bins=edges)[0].tolist() for v in finite]
    return {"edges": [float(e) for e in edges], "counts": counts}
