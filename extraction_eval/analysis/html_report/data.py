"""What the HTML report shows, read from the store in one streaming pass: run configs and
summaries, a compact item table, and per item its text, gold and predicted objects with where
their evidence is in the text and how each fared.

Plain JSON-able data (no HTML here); ``extraction_eval.reports`` renders it. Built to scale
(two runs of 100,000 items): the dataset's items and the runs' results are read a batch at a
time; the item table is kept as columns (a few values per item); each item's details are
serialized as they are made, ``CHUNK`` items to a compressed chunk, so the page parses only the
chunk of an item someone expands. Per item, nothing is scored again where the runner stored its
alignment (``items``); charts are drawn from aggregates (the summaries, a latency
histogram).
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from extraction_eval.analysis.compare.runs import CompareOptions, GoldLoader, compare_runs
from extraction_eval.analysis.html_report.build import (
    CHUNK,
    ItemStream,
    ReportPart,
    collector_paused,
    range_stream,
)
from extraction_eval.analysis.html_report.pairing import comparison_view, diff_lists, diff_view
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import GoldView
from extraction_eval.evaluators.taxonomy import CATEGORIES
from extraction_eval.types import DatasetItem
from extraction_eval.workers.report_worker import Worker

__all__ = [
    "CHUNK",
    "SPLIT_AT",
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
SPLIT_AT = 5_000  # items from which a worker process builds half (starting one costs ~0.5 s)
# How long a worker may take past this process's own half: its half is about as long, so a
# worker still silent after three times as long (at least a minute) is hung, not slow
WORKER_WAIT_MIN_S = 60.0
WORKER_WAIT_FACTOR = 3.0
LATENCY_BINS = 40
_log = logging.getLogger(__name__)


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
    # per run: the judged blocks kept beside it (``--judge``; newest first), shown as a
    # section of their own beside the string figures
    judged: list[list[dict[str, Any]]] = field(default_factory=list)
    # ``--protocol``: ``names``, per run its blocks (``runs``, in run order) and, for two
    # runs, B against A on each protocol metric (``paired``); a section of its own
    protocols: dict[str, Any] | None = None
    # ``--aliases FILE`` / ``--no-aliases``: ``with`` (what was changed) and per run its
    # report re-scored so (``runs``); beside the stored figures, which stay as they ran
    rescored: dict[str, Any] | None = None
    # the items of the runs' dataset version (None: as many as the table lists); the table
    # lists only the items some run ran (a ``--limit 6`` run's report lists 6 of 48)
    dataset_items: int | None = None

    @property
    def n_items(self) -> int:
        return len(self.table["id"])

    def coverage(self) -> str | None:
        """``6 of 48 dataset items were run ...`` when the runs did not run every item."""
        total = self.dataset_items
        if total is None or total <= self.n_items:
            return None
        return (
            f"{self.n_items} of {total} dataset items were run; the report lists only those"
            f" ({total - self.n_items} items no run has a result for are left out)"
        )

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
        out = {
            "runs": self.runs,
            "types": self.types,
            "categories": self.categories,
            "chunk": CHUNK,
            "n": self.n_items,
            "judged": [_judged_items(blocks) for blocks in self.judged],
            "dataset_items": self.n_items if self.dataset_items is None else self.dataset_items,
        }
        if self.protocols is not None:
            out["protocols"] = self.protocols
        if self.rescored is not None:
            out["rescored"] = self.rescored
        return out


def _judged_items(blocks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A run's newest judged block, as the item details show it: the judge and, per item
    with judged matches, each match's kind, names, source and reason (None: never judged).
    Only items with a match are listed, so its size is the matches', not the run's."""
    if not blocks:
        return None
    keep = ("kind", "pred_name", "gold_name", "source", "reason")
    items = blocks[0].get("items") or {}
    return {
        "judge": str(blocks[0].get("judge", "")),
        "items": {
            str(item_id): [{k: m.get(k) for k in keep} for m in found if isinstance(m, dict)]
            for item_id, found in items.items()
            if found
        },
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


def _item_stream(
    store: LocalStore, runs: Sequence[RunRecord], items_for: ItemsFor | None
) -> tuple[ItemStream, dict[str, DatasetItem] | None]:
    """(item id, each run's item or None) in the first run's dataset order (then items only
    later runs have), and, when the items were loaded whole, the first run's."""
    if _streamable(runs):
        return range_stream(store, runs), None
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


def build_report_data(
    store: LocalStore,
    runs: Sequence[RunRecord],
    *,
    items_for: ItemsFor | None = None,
    split: int | None = None,
    as_recorded: bool = False,
) -> ReportData:
    """The report of one or more stored runs on the same dataset.

    Items are in the first run's dataset order (then items only later runs have). An item a
    run has no result for is ``null`` on that run's side; an errored item is a row with its
    error, scored as an empty prediction like everywhere else. Local runs on one dataset
    version (and gold floor) stream their items from the store; otherwise ``items_for``
    (default: the local store) reads each run's items whole, e.g. from LangFuse.

    Streamed runs of at least ``SPLIT_AT`` items are built in two processes: a worker builds
    the items after the first ``split`` (default: a chunk past half, on a chunk boundary) while this
    process builds those; the parts are joined in dataset order, the same report byte for
    byte. ``split=0`` builds in this process only.

    ``as_recorded``: the paired section scores each run with its own recorded settings
    (``compare --as-recorded``, to compare scoring choices) rather than both with A's; those
    figures are counted by ``compare`` itself, in a second pass over both runs."""
    if not runs:
        raise InvalidValue("runs", "name at least one run")
    # only the items some run ran are listed (and the report says how many of the dataset's)
    with collector_paused(), ThreadPoolExecutor(1, thread_name_prefix="report-zlib") as pool:
        data = _build(store, runs, items_for, pool, split)
    if as_recorded and data.comparison is not None:
        recorded = compare_runs(
            runs[0], runs[1], store=store, options=CompareOptions(force=True, as_recorded=True)
        )
        data.comparison = {**comparison_view(recorded), "diff": data.comparison["diff"]}
    return data


def _build(
    store: LocalStore,
    runs: Sequence[RunRecord],
    items_for: ItemsFor | None,
    pool: ThreadPoolExecutor,
    split: int | None,
) -> ReportData:
    datasets = sorted({r.dataset for r in runs})
    if len(datasets) > 1:
        raise InvalidValue(
            "runs",
            f"names runs on different datasets ({', '.join(datasets)});"
            " a report compares runs on one dataset",
        )
    total, ran = _ran_items(store, runs)
    first = None if ran is not None else _split_point(store, runs, split)
    if first is None:
        stream, loaded = _item_stream(store, runs, items_for)
        if loaded is not None:
            total = len(loaded)
            ran = _ran_ids(store, runs, total)
        part = ReportPart(store, runs, pool, streamed=loaded is None)
        part.fill(stream if ran is None else ((i, x) for i, x in stream if i in ran))
        # a local run's stored counts are used, others re-scored against A's gold
        comparison = _comparison(part, None if loaded is None else (lambda run: loaded))
    else:
        part, comparison = _two_processes(store, runs, pool, *first)
    done = part.chunk_list()
    columns, types = part.table.finish()
    return ReportData(
        runs=[_run_header(r) for r in runs],
        table=columns,
        chunks=done,
        types=types,
        categories=part.table.categories,
        comparison=comparison,
        latency=latency_histogram(part.latencies),
        judged=[store.run_judged(r.id) for r in runs],
        dataset_items=total,
    )


def _ran_items(store: LocalStore, runs: Sequence[RunRecord]) -> tuple[int | None, set[str] | None]:
    """Streamed runs: (the dataset version's item count, the ids of the items some run has a
    result for, or None when a run has them all). Other runs: (None, None), worked out once
    their items are loaded."""
    if not _streamable(runs):
        return None, None
    run = runs[0]
    total = len(store.item_positions(run.dataset, version=run.dataset_version))
    return total, _ran_ids(store, runs, total)


def _ran_ids(store: LocalStore, runs: Sequence[RunRecord], total: int) -> set[str] | None:
    """The ids of the items some run has a result for; None when one run has a result for
    each of the ``total`` items (nothing to leave out, no set held)."""
    if any(store.count_results(run.id) >= total for run in runs):
        return None
    ids: set[str] = set()
    for run in runs:
        ids.update(store.result_ids(run.id))
    return ids


def _comparison(part: ReportPart, gold: GoldLoader | None) -> dict[str, Any] | None:
    pairing, along = part.pairing, part.along
    if pairing is None or along is None:
        return None
    comparison = comparison_view(along.result(gold))
    comparison["diff"] = diff_view(pairing.counts)
    return comparison


def _two_processes(
    store: LocalStore, runs: Sequence[RunRecord], pool: ThreadPoolExecutor, count: int, after: int
) -> tuple[ReportPart, dict[str, Any] | None]:
    """This process builds the first ``count`` items while a worker builds those after
    position ``after``. The worker's counts come first, so the comparison is made before the
    worker's half of the table is read (the comparison's arrays and both halves never meet in
    memory)."""
    part = ReportPart(store, runs, pool, streamed=True)
    try:
        worker = Worker(store.path, runs, after)
    except OSError as exc:  # no process to be had: all of it here
        _log.warning("report: cannot start a worker process (%s); building in one", exc)
        part.fill(range_stream(store, runs))
        return part, _comparison(part, None)
    rows = None
    try:
        started = time.perf_counter()
        part.fill(range_stream(store, runs, limit=count))
        own = time.perf_counter() - started
        worker.watch(max(WORKER_WAIT_MIN_S, WORKER_WAIT_FACTOR * own))
        counts = worker.counts()
        waited = time.perf_counter() - started - own
        if counts is not None:
            part.absorb_counts(counts)
            comparison = _comparison(part, None)
            part.along = None  # its count rows (two 40 MB arrays at 100,000 items) let go
            rows = worker.rows()
    finally:
        worker.stop()
    why = worker.why() if counts is None or rows is None else ""
    worker.close()
    if counts is None:  # the worker failed: its range here
        _log.warning("report: the worker process failed (%s); building its items here", why)
        part.fill(range_stream(store, runs, after))
        return part, _comparison(part, None)
    if rows is None:  # it failed after sending its counts: its rows made here
        _log.warning("report: the worker process failed (%s); building its items' rows here", why)
        again = ReportPart(store, runs, pool, streamed=True)
        again.fill(range_stream(store, runs, after))
        rows = again.rows()
    else:
        _log.info(
            "report: items after the first %d built in a worker: %.2f s CPU, peak RSS %.1f MB;"
            " waited %.2f s for its counts",
            count,
            worker.cpu,
            worker.peak_mb,
            waited,
        )
    part.absorb_rows(rows)
    return part, comparison


def _split_point(
    store: LocalStore, runs: Sequence[RunRecord], split: int | None
) -> tuple[int, int] | None:
    """(items built here, the position of the last of them) when a worker builds the rest:
    streamed runs of ``SPLIT_AT`` items or more, or ``split`` asked for (a multiple of
    ``CHUNK``, so this process's chunks end where the worker's begin)."""
    if split == 0 or not _streamable(runs):
        return None
    run = runs[0]
    positions = store.item_positions(run.dataset, version=run.dataset_version)
    if split is None:
        if len(positions) < SPLIT_AT:
            return None
        # a chunk more here: the worker starts ~0.4 s later (measured: this process then
        # waited 0.2-0.5 s for it at 100,000 items)
        split = len(positions) // 2 + CHUNK
    count = split - split % CHUNK
    if count < CHUNK or count >= len(positions):
        return None
    return count, positions[count - 1]


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
