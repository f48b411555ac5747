"""Runs, their item results, item- and run-level scores and the failure taxonomy."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

from extraction_eval.backends.base import RunRecord
from extraction_eval.backends.local.cache import CacheRow, write_cache_rows
from extraction_eval.backends.local.connection import StoreConnection, _dumps, _now
from extraction_eval.backends.local.rows import item_result, run_record
from extraction_eval.backends.local.rows import score as score_of
from extraction_eval.backends.local.rows import tag as tag_of
from extraction_eval.datasets.jsonl import extraction_payload
from extraction_eval.errors import NotFoundError, UsageError
from extraction_eval.evaluators.severity import item_severity
from extraction_eval.types import (
    ItemResult,
    Score,
    TaxonomyTag,
)

RUN_BACKENDS = ("local", "langfuse")


class RunTables(StoreConnection):
    """One row per run; one result row per item (upserted, so a retry replaces it)."""

    def create_run(
        self,
        *,
        name: str,
        dataset: str,
        dataset_version: int | str | None,
        config: dict[str, Any],
        backend: str = "local",
        experiment_id: str | None = None,
        then: Callable[[sqlite3.Connection, int], None] | None = None,
    ) -> RunRecord:
        """A new run in status ``running``; an existing name is an error (resume uses get_run).
        ``then`` runs in the same transaction with the new run's id (e.g. to lock it)."""
        if not name.strip():
            raise UsageError("run name must not be empty")
        if backend not in RUN_BACKENDS:
            raise UsageError(f"run backend must be one of {', '.join(RUN_BACKENDS)}: {backend!r}")
        with self._tx(write=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM runs WHERE dataset = ? AND name = ?", (dataset, name)
            ).fetchone()
            if exists:
                raise UsageError(
                    f"run {name!r} already exists on dataset {dataset!r}; "
                    "resume it or choose another name"
                )
            cur = conn.execute(
                "INSERT INTO runs (name, dataset, dataset_version, backend, experiment_id,"
                " config, status, started_at) VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
                (
                    name,
                    dataset,
                    _dumps(dataset_version),
                    backend,
                    experiment_id,
                    _dumps(config),
                    _now(),
                ),
            )
            run_id = int(cur.lastrowid or 0)
            if then is not None:
                then(conn, run_id)
            return run_record(_require_run(conn, run_id))

    def get_run(self, name: str, dataset: str | None = None) -> RunRecord | None:
        """The run called ``name``; without ``dataset`` the name must be unambiguous."""
        with self._tx(write=False) as conn:
            if dataset is not None:
                rows = conn.execute(
                    "SELECT * FROM runs WHERE name = ? AND dataset = ?", (name, dataset)
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM runs WHERE name = ? ORDER BY id", (name,)
                ).fetchall()
        if len(rows) > 1:
            datasets = ", ".join(repr(r["dataset"]) for r in rows)
            raise UsageError(
                f"run name {name!r} exists on several datasets ({datasets}); name the dataset"
            )
        return run_record(rows[0]) if rows else None

    def get_run_by_id(self, run_id: int) -> RunRecord:
        with self._tx(write=False) as conn:
            return run_record(_require_run(conn, run_id))

    def list_runs(self, dataset: str | None = None) -> list[RunRecord]:
        """Runs in the order they were started."""
        with self._tx(write=False) as conn:
            if dataset is None:
                rows = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM runs WHERE dataset = ? ORDER BY id", (dataset,)
                ).fetchall()
        return [run_record(r) for r in rows]

    def update_run(
        self,
        run_id: int,
        *,
        config: dict[str, Any] | None = None,
        experiment_id: str | None = None,
        status: str | None = None,
    ) -> None:
        """Change what is given. Setting status ``running`` clears ``ended_at`` (a resume)."""
        sets: list[str] = []
        params: list[Any] = []
        if config is not None:
            sets.append("config = ?")
            params.append(_dumps(config))
        if experiment_id is not None:
            sets.append("experiment_id = ?")
            params.append(experiment_id)
        if status is not None:
            sets.append("status = ?")
            params.append(status)
            if status == "running":
                sets.append("ended_at = NULL")
        with self._tx(write=True) as conn:
            _require_run(conn, run_id)
            if sets:
                conn.execute(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", (*params, run_id))

    def delete_empty_run(self, run_id: int) -> bool:
        """Delete the run if it has no result row (a setup that died before its first item);
        a run with results is never deleted. True when it was deleted."""
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM results WHERE run_id = ?", (run_id,)).fetchone():
                return False
            cur = conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))  # scores cascade
            return cur.rowcount > 0

    def record_result(
        self,
        run_id: int,
        result: ItemResult,
        *,
        cache_rows: Sequence[CacheRow] = (),
        group: bool = False,
    ) -> None:
        """Upsert the item's row and replace its item-level scores and failure taxonomy, all
        in one transaction, then commit at once; ``cache_rows`` (the item's response-cache
        writes, ``SQLiteResponseCache.take``) go in the same transaction.

        ``group``: the writes join the open group instead (all of them or none, under a
        savepoint), committed by ``commit_group`` (or by the store's next other use)."""
        with self.group_write() if group else self._tx(write=True) as conn:
            try:
                _write_result(conn, run_id, result)
            except sqlite3.IntegrityError as exc:  # results.run_id references runs(id)
                if "FOREIGN KEY" in str(exc):
                    raise NotFoundError(f"run id {run_id} not found in the local store") from exc
                raise
            if cache_rows:
                write_cache_rows(conn, cache_rows)

    def result_ids(self, run_id: int) -> list[str]:
        """The ids of the items the run has a result for, in the order first recorded."""
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            rows = conn.execute(
                "SELECT item_id FROM results WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def merge_results(
        self,
        *,
        name: str,
        dataset: str,
        dataset_version: int | str | None,
        config: dict[str, Any],
        backend: str,
        experiment_id: str | None,
        results: Iterable[ItemResult],
    ) -> RunRecord:
        """Fold ``results`` into run ``name`` on ``dataset`` (created when absent), in ONE
        transaction: an item the run already has, or a failure while reading ``results``,
        rolls everything back. The run gets ``config``, status ``merged`` and no summary or
        run-level scores (they described part of the items; ``runs finalize`` recomputes
        them)."""
        if backend not in RUN_BACKENDS:
            raise UsageError(f"run backend must be one of {', '.join(RUN_BACKENDS)}: {backend!r}")
        with self._tx(write=True) as conn:
            row = conn.execute(
                "SELECT id FROM runs WHERE dataset = ? AND name = ?", (dataset, name)
            ).fetchone()
            if row is None:
                cur = conn.execute(
                    "INSERT INTO runs (name, dataset, dataset_version, backend, experiment_id,"
                    " config, status, started_at) VALUES (?, ?, ?, ?, ?, ?, 'merged', ?)",
                    (name, dataset, _dumps(dataset_version), backend, experiment_id, "{}", _now()),
                )
                run_id = int(cur.lastrowid or 0)
            else:
                run_id = int(row["id"])
            conn.execute(
                "UPDATE runs SET config = ?, status = 'merged', summary = NULL, ended_at = NULL,"
                " experiment_id = COALESCE(experiment_id, ?) WHERE id = ?",
                (_dumps(config), experiment_id, run_id),
            )
            conn.execute("DELETE FROM scores WHERE run_id = ? AND item_id IS NULL", (run_id,))
            for result in results:
                taken = conn.execute(
                    "SELECT 1 FROM results WHERE run_id = ? AND item_id = ?",
                    (run_id, result.item_id),
                ).fetchone()
                if taken:
                    raise UsageError(
                        f"item {result.item_id!r} of run {name!r} is in two of the merged stores"
                        " (overlapping shards); nothing merged"
                    )
                _write_result(conn, run_id, result)
            return run_record(_require_run(conn, run_id))

    def results(self, run_id: int, *, category: str | None = None) -> list[ItemResult]:
        """Every recorded item result with its scores and taxonomy, in the order first recorded;
        with ``category``, only the items that have at least one object in that category."""
        return list(self.iter_results(run_id, category=category))

    def iter_results(
        self,
        run_id: int,
        *,
        category: str | None = None,
        order_by: ResultOrder = "recorded",
        batch_size: int = 500,
    ) -> Iterator[ItemResult]:
        """``results`` as a stream, ``batch_size`` items read at a time, so a 100,000-item run
        is never in memory at once (only its item ids are).

        ``order_by``: ``recorded`` (as first recorded), ``item_id``, ``failing_first``
        (errored items, then by entity F1 ascending, then item id), or ``severity`` (most
        severe first, ``evaluators.severity``: the order ``runs show`` prints). The ids are
        fixed when this is called (the run must exist then); each batch is
        its own short read transaction, so a runner writing meanwhile is not held up, and the
        other store methods can be called between two items.
        """
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}")
        only, params = _category_filter(run_id, category)
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            ids = [
                r[0]
                for r in conn.execute(
                    f"SELECT r.item_id FROM results r WHERE r.run_id = :run{only}"
                    f" ORDER BY {_RESULT_ORDER[order_by]}",
                    params,
                )
            ]
        return self._results_in_batches(run_id, ids, batch_size)

    def iter_item_results(
        self, run_id: int, item_ids: Sequence[str], *, batch_size: int = 500
    ) -> Iterator[ItemResult]:
        """The results of ``item_ids`` in that order (an id without a result is skipped), read
        ``batch_size`` at a time like ``iter_results``: a run's results in its dataset's order
        without holding them all."""
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}")
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
        return self._results_in_batches(run_id, list(item_ids), batch_size)

    def iter_outputs(
        self, run_id: int, *, batch_size: int = 2000
    ) -> Iterator[tuple[str, str | None, str | None, str | None]]:
        """(item id, output JSON or None, error, error_kind) of every result, by item id: what
        re-scoring needs and no more (no scores, no taxonomy), ``batch_size`` rows per short
        read transaction, so comparing two 100,000-item runs holds neither."""
        for item_id, output, error, error_kind, _ in self.iter_compare_rows(
            run_id, batch_size=batch_size
        ):
            yield item_id, output, error, error_kind

    def iter_compare_rows(
        self, run_id: int, *, batch_size: int = 2000
    ) -> Iterator[tuple[str, str | None, str | None, str | None, str | None]]:
        """``iter_outputs`` plus each row's stored counts (JSON or None): (item id, output,
        error, error_kind, counts) by item id, what ``compare`` reads of a run."""
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}")
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
        after: str | None = None
        while True:
            keyset = "" if after is None else " AND item_id > :after"
            with self._tx(write=False) as conn:
                rows = conn.execute(
                    "SELECT item_id, output, error, error_kind, counts FROM results"
                    f" WHERE run_id = :run{keyset} ORDER BY item_id LIMIT :n",
                    {"run": run_id, "after": after, "n": batch_size},
                ).fetchall()
            for r in rows:
                yield r[0], r[1], r[2], r[3], r[4]
            if len(rows) < batch_size:
                return
            after = rows[-1][0]

    def _results_in_batches(
        self, run_id: int, ids: list[str], batch_size: int
    ) -> Iterator[ItemResult]:
        for start in range(0, len(ids), batch_size):
            batch = ids[start : start + batch_size]
            marks = ", ".join("?" * len(batch))
            with self._tx(write=False) as conn:
                rows = {
                    r["item_id"]: r
                    for r in conn.execute(
                        f"SELECT * FROM results WHERE run_id = ? AND item_id IN ({marks})",
                        (run_id, *batch),
                    )
                }
                score_rows = conn.execute(
                    f"SELECT * FROM scores WHERE run_id = ? AND item_id IN ({marks}) ORDER BY id",
                    (run_id, *batch),
                ).fetchall()
                tag_rows = conn.execute(
                    "SELECT * FROM result_taxonomy"
                    f" WHERE run_id = ? AND item_id IN ({marks}) ORDER BY item_id, position",
                    (run_id, *batch),
                ).fetchall()
            scores: dict[str, list[Score]] = {}
            for s in score_rows:
                scores.setdefault(s["item_id"], []).append(score_of(s))
            tags: dict[str, list[TaxonomyTag]] = {}
            for t in tag_rows:
                tags.setdefault(t["item_id"], []).append(tag_of(t))
            for item_id in batch:
                row = rows.get(item_id)
                if row is not None:  # results are never deleted while their run has any
                    yield item_result(row, scores.get(item_id, []), tags)

    def count_results(self, run_id: int, *, category: str | None = None) -> int:
        """How many items ``iter_results`` gives for the same run and ``category``."""
        only, params = _category_filter(run_id, category)
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            row = conn.execute(
                f"SELECT COUNT(*) FROM results r WHERE r.run_id = :run{only}", params
            ).fetchone()
        return int(row[0])

    def count_untagged(self, run_id: int) -> int:
        """Results recorded before the failure taxonomy was stored (their taxonomy is unknown)."""
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            row = conn.execute(
                "SELECT COUNT(*) FROM results WHERE run_id = ? AND taxonomy_recorded = 0",
                (run_id,),
            ).fetchone()
        return int(row[0])

    def item_score_names(self, run_id: int) -> list[str]:
        """The names of the run's item-level scores, sorted (an export's score columns)."""
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            rows = conn.execute(
                "SELECT DISTINCT name FROM scores WHERE run_id = ? AND item_id IS NOT NULL"
                " ORDER BY name",
                (run_id,),
            ).fetchall()
        return [r[0] for r in rows]

    def finish_run(
        self, run_id: int, *, status: str, run_scores: Sequence[Score], summary: dict[str, Any]
    ) -> None:
        """Close the run: status, end time, summary, and its run-level scores (replaced)."""
        with self._tx(write=True) as conn:
            _require_run(conn, run_id)
            conn.execute(
                "UPDATE runs SET status = ?, ended_at = ?, summary = ? WHERE id = ?",
                (status, _now(), _dumps(summary), run_id),
            )
            conn.execute("DELETE FROM scores WHERE run_id = ? AND item_id IS NULL", (run_id,))
            _insert_scores(conn, run_id, None, run_scores)

    def run_scores(self, run_id: int) -> list[Score]:
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            rows = conn.execute(
                "SELECT * FROM scores WHERE run_id = ? AND item_id IS NULL ORDER BY id", (run_id,)
            ).fetchall()
        return [score_of(r) for r in rows]


_UPSERT_RESULT = """
INSERT INTO results (run_id, item_id, output, error, error_kind, raw_output, attempts,
                     latency_ms, tokens_in, tokens_out, cost_usd, cache_hit, trace_id,
                     trace_url, taxonomy_recorded, finished_at, counts, severity,
                     wrong_objects, repairs)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, item_id) DO UPDATE SET
    output = excluded.output, error = excluded.error, error_kind = excluded.error_kind,
    raw_output = excluded.raw_output, attempts = excluded.attempts,
    latency_ms = excluded.latency_ms, tokens_in = excluded.tokens_in,
    tokens_out = excluded.tokens_out, cost_usd = excluded.cost_usd,
    cache_hit = excluded.cache_hit, trace_id = excluded.trace_id,
    trace_url = excluded.trace_url, taxonomy_recorded = excluded.taxonomy_recorded,
    finished_at = excluded.finished_at, counts = excluded.counts,
    severity = excluded.severity, wrong_objects = excluded.wrong_objects,
    repairs = excluded.repairs
"""


ResultOrder = Literal["recorded", "item_id", "failing_first", "severity"]

# ORDER BY for ``iter_results``; ``failing_first`` is (ok, entity F1 or 0, item id) ascending;
# ``severity`` is ``evaluators.severity``'s order, on the stored columns and their index.
_RESULT_ORDER: dict[str, str] = {
    "recorded": "r.rowid",
    "item_id": "r.item_id",
    "severity": "r.severity, r.wrong_objects DESC, r.item_id",
    "failing_first": (
        "r.error IS NULL, COALESCE((SELECT s.value_num FROM scores s WHERE s.run_id = r.run_id"
        " AND s.item_id = r.item_id AND s.name = 'entity_f1' AND s.value_str IS NULL"
        " ORDER BY s.id LIMIT 1), 0.0), r.item_id"
    ),
}


def _category_filter(run_id: int, category: str | None) -> tuple[str, dict[str, Any]]:
    """The WHERE clause that keeps items with an object in ``category`` (results alias ``r``)."""
    only = (
        " AND r.item_id IN (SELECT item_id FROM result_taxonomy"
        " WHERE run_id = :run AND category = :category)"
        if category is not None
        else ""
    )
    return only, {"run": run_id, "category": category}


def _require_run(conn: sqlite3.Connection, run_id: int) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"run id {run_id} not found in the local store")
    return row


def _write_result(conn: sqlite3.Connection, run_id: int, result: ItemResult) -> None:
    """The item's row (upserted), its item-level scores and its failure taxonomy (replaced)."""
    usage = result.usage
    row = (
        run_id,
        result.item_id,
        None if result.output is None else _dumps(extraction_payload(result.output)),
        result.error,
        result.error_kind,
        result.raw_output,
        result.attempts,
        result.latency_ms,
        usage.tokens_in,
        usage.tokens_out,
        usage.cost_usd,
        int(result.cache_hit),
        result.trace_id,
        result.trace_url,
        int(result.taxonomy is not None),
        _now(),
        result.counts,
        *item_severity(result),
        _dumps(result.repairs) if result.repairs else None,
    )
    conn.execute(_UPSERT_RESULT, row)
    conn.execute("DELETE FROM scores WHERE run_id = ? AND item_id = ?", (run_id, result.item_id))
    _insert_scores(conn, run_id, result.item_id, result.scores)
    conn.execute(
        "DELETE FROM result_taxonomy WHERE run_id = ? AND item_id = ?", (run_id, result.item_id)
    )
    if not result.taxonomy:
        return
    conn.executemany(
        "INSERT INTO result_taxonomy (run_id, item_id, position, category, kind, side,"
        " idx, label, related, source_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run_id,
                result.item_id,
                position,
                t.category,
                t.kind,
                t.side,
                t.index,
                t.label,
                _int_list_json(t.related),
                t.source_id,
            )
            for position, t in enumerate(result.taxonomy)
        ],
    )


def _int_list_json(values: Sequence[int]) -> str:
    """``_dumps`` of a list of ints (a taxonomy tag's ``related``), without a JSON encoder
    per row: the same text."""
    return "[" + ",".join(map(str, values)) + "]"


def _insert_scores(
    conn: sqlite3.Connection, run_id: int, item_id: str | None, scores: Sequence[Score]
) -> None:
    now = _now()
    conn.executemany(
        "INSERT INTO scores (run_id, item_id, name, value_num, value_str, data_type, comment,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, item_id, s.name, *_score_columns(s.value), s.data_type, s.comment, now)
            for s in scores
        ],
    )


def _score_columns(value: float | bool | str) -> tuple[float | None, str | None]:
    if isinstance(value, str):
        return None, value
    return float(value), None
