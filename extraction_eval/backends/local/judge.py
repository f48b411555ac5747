"""Judge calibrations (migration m013): the latest one of a judge backs its judged figures."""

from __future__ import annotations

from typing import Any

from extraction_eval.backends.local.connection import StoreConnection, _dumps, _loads, _now


class JudgeTables(StoreConnection):
    def add_judge_calibration(self, judge: str, report: dict[str, Any]) -> int:
        """Store one calibration of ``judge`` (its identity); returns its id."""
        with self._tx(write=True) as conn:
            cur = conn.execute(
                "INSERT INTO judge_calibrations (judge, source, pairs, kappa, report,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    judge,
                    str(report.get("source", "")),
                    int(report.get("judged", 0)),
                    report.get("kappa"),
                    _dumps(report),
                    _now(),
                ),
            )
            return int(cur.lastrowid or 0)

    def latest_judge_calibration(self, judge: str) -> dict[str, Any] | None:
        """The last calibration stored for exactly this judge identity, or None."""
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT report, created_at FROM judge_calibrations WHERE judge = ?"
                " ORDER BY id DESC LIMIT 1",
                (judge,),
            ).fetchone()
        if row is None:
            return None
        report = _loads(row["report"])
        return {**report, "created_at": row["created_at"]} if isinstance(report, dict) else None

    def put_run_judged(
        self, run_id: int, judge: str, report: dict[str, Any], items: dict[str, Any]
    ) -> None:
        """Keep a run's judged figures by judge identity (a later judging replaces them)."""
        with self._tx(write=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO run_judged (run_id, judge, report, items, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (run_id, judge, _dumps(report), _dumps(items), _now()),
            )

    def run_judged(self, run_id: int) -> list[dict[str, Any]]:
        """Every judged block kept for the run (newest first), each with ``items`` (item id ->
        judged matches) and ``created_at``."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT report, items, created_at FROM run_judged WHERE run_id = ?"
                " ORDER BY created_at DESC, judge",
                (run_id,),
            ).fetchall()
        out = []
        for r in rows:
            report = _loads(r["report"])
            if isinstance(report, dict):
                out.append({**report, "items": _loads(r["items"]), "created_at": r["created_at"]})
        return out
