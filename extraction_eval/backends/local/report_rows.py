"""A lean read of a run's results for the HTML report: plain values, no models.

``iter_results`` builds an ``ItemResult`` per item with every score and taxonomy tag as a
pydantic model (a 100,000-item run: about 1.5 million models); the report needs a few columns,
the two F1 scores, the stored counts (with the diff's view of the alignment) and the category
of each tagged object, so it reads just those.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from extraction_eval.backends.local.connection import StoreConnection
from extraction_eval.errors import NotFoundError, UsageError


class ReportRow(NamedTuple):
    """One result as the report reads it. ``output``: the stored extraction JSON (None when
    the item errored); ``counts``: the stored count row and alignment view (None for rows
    stored before ``m008``); ``tags``: (category, kind, side, index) per tagged object, None
    when the run recorded no taxonomy for the item; ``f1``: entity and relationship F1."""

    item_id: str
    output: str | None
    error: str | None
    error_kind: str | None
    latency_ms: float | None
    cost_usd: float | None
    cache_hit: bool
    trace_url: str | None
    counts: str | None
    tags: list[tuple[str, str, str, int]] | None
    f1: tuple[float | None, float | None]
    # the model's raw reply, only for an item that failed or whose reply was repaired (the
    # details show it; a clean reply is its output), cut to ``REPORT_RAW_CHARS``
    raw_output: str | None = None
    repairs: list[str] | None = None


REPORT_RAW_CHARS = 20_000  # of a raw reply in the report (runs show --item shows it whole)


_F1_NAMES = ("entity_f1", "relationship_f1")


class ReportRowTables(StoreConnection):
    """``iter_report_rows``: a run's results for the given items, in that order."""

    def iter_report_rows(
        self, run_id: int, item_ids: Sequence[str], *, batch_size: int = 500
    ) -> Iterator[ReportRow]:
        """The results of ``item_ids`` in that order (an id without a result is skipped),
        ``batch_size`` per short read transaction, like ``iter_item_results``."""
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}")
        with self._tx(write=False) as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
                raise NotFoundError(f"run id {run_id} not found")
        ids = list(item_ids)
        for start in range(0, len(ids), batch_size):
            yield from self._report_batch(run_id, ids[start : start + batch_size])

    def _report_batch(self, run_id: int, batch: list[str]) -> Iterator[ReportRow]:
        marks = ", ".join("?" * len(batch))
        with self._tx(write=False) as conn:
            rows = {
                r[0]: r
                for r in conn.execute(
                    "SELECT item_id, output, error, error_kind, latency_ms, cost_usd, cache_hit,"
                    " trace_url, counts, taxonomy_recorded, CASE WHEN error IS NOT NULL OR"
                    " repairs IS NOT NULL THEN substr(raw_output, 1, ?) END, repairs"
                    f" FROM results WHERE run_id = ? AND item_id IN ({marks})",
                    (REPORT_RAW_CHARS + 1, run_id, *batch),
                )
            }
            f1: dict[str, list[float | None]] = {}
            # the first score of each name, as ItemResult.scores lists them (by id)
            for item_id, name, value in conn.execute(
                "SELECT item_id, name, value_num FROM scores WHERE run_id = ?"
                f" AND item_id IN ({marks}) AND name IN (?, ?) AND value_str IS NULL"
                " ORDER BY id DESC",
                (run_id, *batch, *_F1_NAMES),
            ):
                f1.setdefault(item_id, [None, None])[_F1_NAMES.index(name)] = value
            tags: dict[str, list[tuple[str, str, str, int]]] = {}
            for tag in conn.execute(
                "SELECT item_id, category, kind, side, CAST(idx AS INTEGER) FROM result_taxonomy"
                f" WHERE run_id = ? AND item_id IN ({marks}) ORDER BY item_id, position",
                (run_id, *batch),
            ):  # 600,000 tags in a 100,000-item run: the row's own tuple, not a new one
                tags.setdefault(tag[0], []).append(tag[1:])
        for item_id in batch:
            r = rows.get(item_id)
            if r is None:
                continue
            scores = f1.get(item_id, [None, None])
            # positional (the fields' order): keywords cost more, 200,000 times a report
            yield ReportRow(
                r[0],  # item_id
                r[1],  # output
                r[2],  # error
                r[3],  # error_kind
                r[4],  # latency_ms
                r[5],  # cost_usd
                bool(r[6]),  # cache_hit
                r[7],  # trace_url
                r[8],  # counts
                tags.get(item_id, []) if r[9] else None,
                (scores[0], scores[1]),  # f1
                r[10],  # raw_output (failed or repaired only)
                json.loads(r[11]) if r[11] else None,  # repairs
            )
