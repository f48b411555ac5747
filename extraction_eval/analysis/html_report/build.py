"""The item-by-item part of the HTML report's build (``data``), for one contiguous
range of the dataset's items: the item table's columns, the compressed details chunks, the
latencies and, for two runs, the per-item diff's counts and compare's counting pass.

A large report is built as two ranges at once, the second in a worker process
(:mod:`extraction_eval.workers.report_worker`: a fresh interpreter, fed and answering by
pickles on its standard streams, nothing forked from a process holding SQLite connections or
threads). The worker's part is appended to the first in
dataset order (:meth:`ReportPart.absorb`), so the report is the one a single process builds,
byte for byte.
"""

from __future__ import annotations

import gc
import json
import zlib
from array import array
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from extraction_eval.analysis.compare.along import CompareAlong
from extraction_eval.analysis.compare.counting import PairedCounts
from extraction_eval.analysis.html_report.items import (
    RunSide,
    StoredViews,
    gold_objects,
    reused_side,
    run_side,
    same_answer,
)
from extraction_eval.analysis.html_report.pairing import ItemPairing
from extraction_eval.analysis.stored import run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.backends.local.report_rows import ReportRow
from extraction_eval.evaluators import GoldView, ScoringConfig
from extraction_eval.evaluators.counts import counts_key
from extraction_eval.evaluators.diff_counts import DiffCounts
from extraction_eval.evaluators.evidence import TextIndex
from extraction_eval.evaluators.taxonomy import CATEGORIES
from extraction_eval.types import DatasetItem

__all__ = [
    "CHUNK",
    "DetailChunks",
    "ItemStream",
    "ItemTable",
    "PartCounts",
    "PartRows",
    "ReportPart",
    "collector_paused",
    "range_stream",
]

CHUNK = 500  # items per details chunk: what the page decompresses to show one item
_BATCH = 500  # items read from the store at a time
_LEVEL = 6  # zlib level of the chunks (1 is faster to build, 20 % larger)
_ERR_CHARS = 300  # an error message in the table (whole in the item's details)

ItemStream = Iterator[tuple[str, list[DatasetItem | None]]]


def range_stream(
    store: LocalStore, runs: Sequence[RunRecord], after: int = -1, limit: int | None = None
) -> ItemStream:
    """(item id, each run's item) of local runs on one dataset version (and gold view), from
    the item after position ``after``, ``limit`` items (default: to the end)."""
    run = runs[0]
    view = GoldView.of_run(run.config)  # the run's schema, labels and gold floor
    stream = store.iter_items(run.dataset, version=run.dataset_version, after=after, limit=limit)
    n = len(runs)
    for item in stream:
        seen: list[DatasetItem | None] = [view.item(item)] * n
        yield item.id, seen


class ItemTable:
    """The item table's columns, appended to item by item."""

    def __init__(self, n_runs: int, paired: bool) -> None:
        self.cols: dict[str, Any] = {"id": [], "text": [], "types": []}
        self.cols["runs"] = [
            {"st": [], "ek": [], "err": [], "ef1": [], "rf1": [], "cats": []} for _ in range(n_runs)
        ]
        if paired:
            self.cols["chg"] = []
        self.type_index: dict[str, int] = {}
        self.category_index: dict[str, int] = {c: i for i, c in enumerate(CATEGORIES)}
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

    def extend(self, other: ItemTable) -> None:
        """Append ``other``'s rows (the items after this table's): its type and category
        indices mapped to this table's, new names added in the order the items bring them,
        as if its items had been added here one by one."""
        names = {i: t for t, i in other.type_index.items()}
        types = []
        for idx in other.cols["types"]:
            types.append([self.type_index.setdefault(names[t], len(self.type_index)) for t in idx])
        cats = []
        for name in other.categories:
            if name not in self.category_index:
                self.category_index[name] = len(self.categories)
                self.categories.append(name)
            cats.append(self.category_index[name])
        cols, more = self.cols, other.cols
        for key in ("id", "text", "chg"):
            if key in cols:
                cols[key] += more[key]
        cols["types"] += types
        for col, add in zip(cols["runs"], more["runs"], strict=True):
            for key in ("st", "ek", "err", "ef1", "rf1"):
                col[key] += add[key]
            col["cats"] += [
                [cats[v] if j % 2 == 0 else v for j, v in enumerate(flat)] for flat in add["cats"]
            ]

    def finish(self) -> tuple[dict[str, Any], list[str]]:
        """The columns with type indices into the sorted type names."""
        names = sorted(self.type_index)
        new = {self.type_index[t]: i for i, t in enumerate(names)}
        self.cols["types"] = [sorted(new[t] for t in ts) for ts in self.cols["types"]]
        return self.cols, names


class DetailChunks:
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


@contextmanager
def collector_paused() -> Iterator[None]:
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


@dataclass
class PartCounts:
    """What a worker counted for its range (picklable): the diff's counts, compare's
    counting pass and how many rows of each run it saw."""

    diff: DiffCounts | None
    seen: list[int]
    paired: PairedCounts | None


@dataclass
class PartRows:
    """What a worker built for its range's page (picklable): the table, the compressed
    chunks and the latencies."""

    table: ItemTable
    chunks: list[bytes]
    latencies: list[array[float]]


class ReportPart:
    """The report's item-by-item state for the items fed to :meth:`fill`, in dataset order."""

    def __init__(
        self,
        store: LocalStore,
        runs: Sequence[RunRecord],
        pool: ThreadPoolExecutor,
        *,
        streamed: bool,
    ) -> None:
        self.store, self.runs = store, runs
        self.scorings = [run_scoring(run) for run in runs]
        views = [GoldView.of_run(r.config) for r in runs]
        pairs = zip(self.scorings, views, strict=True)
        self.keys = [counts_key(s, v.floor, v.schemas_key()) for s, v in pairs]
        self.pairing = (
            ItemPairing(self.scorings[0], self.keys[0] == self.keys[1] and _same_gold(*runs))
            if len(runs) == 2
            else None
        )
        self.table = ItemTable(len(runs), self.pairing is not None)
        self.along = None
        if self.pairing is not None:
            self.along = CompareAlong(store, runs[0], runs[1], streamed=streamed)
        self.chunks = DetailChunks(pool)
        self.latencies = [array("d") for _ in runs]
        self.stored = StoredViews()
        self.done: list[bytes] | None = None

    def fill(self, stream: ItemStream) -> None:
        for batch in _batched(stream, _BATCH):
            self._batch(batch)

    def _batch(self, batch: list[tuple[str, list[DatasetItem | None]]]) -> None:
        store, runs, scorings, keys = self.store, self.runs, self.scorings, self.keys
        pairing, along, stored = self.pairing, self.along, self.stored
        first_mode = scorings[0].evidence
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
                like = None
                if (
                    first is not None
                    and items[0] is not None
                    and item is not None
                    and item.text == items[0].text
                    and scorings[pos].evidence == first_mode
                ):  # the same text index: an equal output is found where A's was
                    like = (rows[0][item_id], first)
                at = (index, first_mode)
                sides.append(_side(scorings[pos], keys[pos], item, row, shown, at, like, stored))
            for pos, row in enumerate(r.get(item_id) for r in rows):
                lat = None if row is None or row.cache_hit else row.latency_ms
                if sides[pos] is not None and lat is not None:
                    self.latencies[pos].append(lat)
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
            self.table.add(shown, sides, chg)
            self.chunks.add(details)

    def chunk_list(self) -> list[bytes]:
        """The compressed chunks made so far (waits for the last ones)."""
        if self.done is None:
            self.done = self.chunks.done()
        return self.done

    def counted(self) -> PartCounts:
        seen, paired = ([0, 0], None) if self.along is None else self.along.shipped()
        diff = None if self.pairing is None else self.pairing.counts
        return PartCounts(diff=diff, seen=seen, paired=paired)

    def rows(self) -> PartRows:
        return PartRows(table=self.table, chunks=self.chunk_list(), latencies=self.latencies)

    def absorb_counts(self, other: PartCounts) -> None:
        """Add the counts of the items after this part's."""
        if self.pairing is not None and other.diff is not None:
            self.pairing.counts.merge(other.diff)
        if self.along is not None:
            self.along.merge(other.seen, other.paired)

    def absorb_rows(self, other: PartRows) -> None:
        """Append the rows of the items after this part's (which ends on a chunk boundary):
        the table, chunks and latencies one process would have made for both ranges."""
        self.chunk_list().extend(other.chunks)
        self.table.extend(other.table)
        for mine, theirs in zip(self.latencies, other.latencies, strict=True):
            mine.extend(theirs)


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
    item: DatasetItem | None,
    row: ReportRow | None,
    shown: DatasetItem,
    indexes: tuple[_Indexes, str],
    like: tuple[ReportRow, RunSide] | None,
    stored: StoredViews,
) -> RunSide | None:
    """One run's side of an item (None when the run has no result for it)."""
    if item is None or row is None:
        return None
    index, first_mode = indexes
    here = index(item.text, scoring.evidence)
    side = run_side(item, row, scoring, key, here, stored, like)
    if item is not shown and item.text != shown.text:
        side.entry["text"] = item.text  # another dataset version changed the text
    if (
        scoring.evidence != first_mode
        or "text" in side.entry
        or (item is not shown and item.expected != shown.expected)
    ):  # this run's gold differs when its evidence mode, text or gold does
        side.entry["gold"] = gold_objects(item.expected, here)
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
