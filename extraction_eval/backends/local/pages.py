"""A run's results a page at a time, most severe first (``evaluators.severity``).

``runs show`` and ``--worst`` read only what they print: the ORDER BY and LIMIT run in SQLite
on the stored ``severity`` / ``wrong_objects`` columns and their index, and only the page's
rows (with their scores and taxonomy) are read back, so the cost of a page does not grow with
the run (a deep ``OFFSET`` still walks the index up to the page).
"""

from __future__ import annotations

from typing import Any

from extraction_eval.backends.local.connection import StoreConnection
from extraction_eval.backends.local.runs import (
    _RESULT_ORDER,
    RunTables,
    _category_filter,
    _require_run,
)
from extraction_eval.errors import UsageError
from extraction_eval.types import ItemResult

# the severity order (see evaluators.severity), the columns of the ``results_severity`` index
SEVERITY_ORDER = _RESULT_ORDER["severity"]
FAILING = " AND (r.severity < 1.0 OR r.wrong_objects > 0)"
ERRORED = " AND r.error IS NOT NULL"  # an errored item: no output to score


class ResultPages(RunTables, StoreConnection):
    """Pages of a run's results in severity order, and the worst item of each category."""

    def page_results(
        self,
        run_id: int,
        *,
        limit: int,
        offset: int = 0,
        category: str | None = None,
        failing_only: bool = False,
    ) -> list[ItemResult]:
        """Up to ``limit`` results after the first ``offset``, most severe first; with
        ``category`` only items with an object in it, with ``failing_only`` only failing
        items."""
        if limit < 1 or offset < 0:
            raise UsageError(f"a page needs limit >= 1 and offset >= 0, got {limit}, {offset}")
        where, params = self._where(run_id, category, failing_only)
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            ids = [
                r[0]
                for r in conn.execute(
                    f"SELECT r.item_id FROM results r WHERE r.run_id = :run{where}"
                    f" ORDER BY {SEVERITY_ORDER} LIMIT :limit OFFSET :offset",
                    {**params, "limit": limit, "offset": offset},
                )
            ]
        return list(self._results_in_batches(run_id, ids, max(1, len(ids))))

    def count_page_results(
        self,
        run_id: int,
        *,
        category: str | None = None,
        failing_only: bool = False,
        errored_only: bool = False,
    ) -> int:
        """How many results ``page_results`` pages through for the same filters;
        ``errored_only``: how many of them errored."""
        where, params = self._where(run_id, category, failing_only)
        where += ERRORED if errored_only else ""
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            row = conn.execute(
                f"SELECT COUNT(*) FROM results r WHERE r.run_id = :run{where}", params
            ).fetchone()
        return int(row[0])

    def worst_of_categories(self, run_id: int, categories: tuple[str, ...]) -> dict[str, str]:
        """The most severe failing item id of each of ``categories`` the run has (one indexed
        query per category)."""
        out: dict[str, str] = {}
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            for category in categories:
                where, params = _category_filter(run_id, category)
                row = conn.execute(
                    f"SELECT r.item_id FROM results r WHERE r.run_id = :run{where}{FAILING}"
                    f" ORDER BY {SEVERITY_ORDER} LIMIT 1",
                    params,
                ).fetchone()
                if row is not None:
                    out[category] = row[0]
        return out

    def similar_item_ids(self, run_id: int, item_id: str, *, limit: int) -> list[str]:
        """Up to ``limit`` item ids of the run that contain ``item_id`` (case-insensitive),
        else its first ids: what a "no such item" message suggests."""
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            rows = conn.execute(
                "SELECT item_id FROM results WHERE run_id = ? AND instr(lower(item_id), ?) > 0"
                " ORDER BY item_id LIMIT ?",
                (run_id, item_id.lower(), limit),
            ).fetchall()
            if not rows:
                rows = conn.execute(
                    "SELECT item_id FROM results WHERE run_id = ? ORDER BY item_id LIMIT ?",
                    (run_id, limit),
                ).fetchall()
        return [str(r[0]) for r in rows]

    @staticmethod
    def _where(run_id: int, category: str | None, failing_only: bool) -> tuple[str, dict[str, Any]]:
        where, params = _category_filter(run_id, category)
        return where + (FAILING if failing_only else ""), params
