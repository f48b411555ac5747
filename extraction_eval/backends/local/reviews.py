"""Review-queue ledger (migration m013): the candidates triage sent to a queue and the verdict
applied from each, so neither triage nor apply-reviews does anything twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extraction_eval.backends.local.connection import StoreConnection, _dumps, _loads, _now


@dataclass(frozen=True)
class LedgerRow:
    """One candidate sent to a queue, and what was applied from it (None: nothing yet)."""

    queue: str
    key: str
    dataset: str
    item_id: str
    run: str
    candidate: dict[str, Any]
    queue_item_id: str | None
    applied_verdict: str | None
    applied_by: str | None
    applied_version: str | None


class ReviewTables(StoreConnection):
    def add_review_candidate(
        self,
        queue: str,
        candidate: dict[str, Any],
        *,
        run: str,
        queue_item_id: str | None = None,
    ) -> bool:
        """Record a candidate sent to ``queue``; False when it was already there."""
        with self._tx(write=True) as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO review_candidates (queue, key, dataset, item_id, run,"
                " candidate, queue_item_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    queue,
                    candidate["key"],
                    candidate["dataset"],
                    candidate["item_id"],
                    run,
                    _dumps(candidate),
                    queue_item_id,
                    _now(),
                ),
            )
            return cur.rowcount > 0

    def review_candidates(self, queue: str) -> list[LedgerRow]:
        """Every candidate of the queue, in the order it was sent."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT * FROM review_candidates WHERE queue = ? ORDER BY rowid", (queue,)
            ).fetchall()
        return [
            LedgerRow(
                queue=r["queue"],
                key=r["key"],
                dataset=r["dataset"],
                item_id=r["item_id"],
                run=r["run"],
                candidate=_loads(r["candidate"]),
                queue_item_id=r["queue_item_id"],
                applied_verdict=r["applied_verdict"],
                applied_by=r["applied_by"],
                applied_version=r["applied_version"],
            )
            for r in rows
        ]

    def mark_review_applied(
        self, queue: str, key: str, verdict: str, by: str | None, version: str | None
    ) -> None:
        with self._tx(write=True) as conn:
            conn.execute(
                "UPDATE review_candidates SET applied_verdict = ?, applied_by = ?,"
                " applied_version = ?, applied_at = ? WHERE queue = ? AND key = ?",
                (verdict, by, version, _now(), queue, key),
            )
