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
