"""The Batch API ledger (migration m007_batches): which batch covers which request."""

from __future__ import annotations

from collections.abc import Sequence

from extraction_eval.backends.local.connection import StoreConnection, _now
from extraction_eval.llm.batch import BatchRecord

_CHUNK = 500  # custom ids per IN (...) query, below SQLite's variable limit


class BatchTables(StoreConnection):
    def add_batch(self, record: BatchRecord) -> None:
        now = _now()
        with self._tx(write=True) as conn:
            conn.execute(
                "INSERT INTO batches (batch_id, owner, status, input_file_id, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (record.batch_id, record.owner, record.status, record.input_file_id, now, now),
            )
            conn.executemany(
                "INSERT OR IGNORE INTO batch_requests (batch_id, custom_id) VALUES (?, ?)",
                [(record.batch_id, cid) for cid in record.custom_ids],
            )

    def set_batch_status(self, batch_id: str, status: str) -> None:
        with self._tx(write=True) as conn:
            conn.execute(
                "UPDATE batches SET status = ?, updated_at = ? WHERE batch_id = ?",
                (status, _now(), batch_id),
            )

    def batches_covering(self, custom_ids: Sequence[str]) -> list[BatchRecord]:
        """Every batch that covers one of ``custom_ids``, oldest first, with all its ids."""
        found: set[str] = set()
        with self._tx(write=False) as conn:
            for start in range(0, len(custom_ids), _CHUNK):
                part = list(custom_ids[start : start + _CHUNK])
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    f"SELECT DISTINCT batch_id FROM batch_requests WHERE custom_id IN ({marks})",
                    part,
                ).fetchall()
                found.update(str(r["batch_id"]) for r in rows)
            out = []
            for batch_id in sorted(found):
                row = conn.execute(
                    "SELECT * FROM batches WHERE batch_id = ?", (batch_id,)
                ).fetchone()
                ids = conn.execute(
                    "SELECT custom_id FROM batch_requests WHERE batch_id = ? ORDER BY custom_id",
                    (batch_id,),
                ).fetchall()
                out.append(
                    BatchRecord(
                        batch_id=batch_id,
                        owner=row["owner"],
                        custom_ids=tuple(str(r["custom_id"]) for r in ids),
                        status=row["status"],
                        input_file_id=row["input_file_id"],
                    )
                )
        out.sort(key=lambda r: r.batch_id)
        return out

    def list_batches(self) -> list[tuple[str, str, str, int]]:
        """(batch id, owner, status, requests) of every batch, newest first."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT b.batch_id, b.owner, b.status, COUNT(r.custom_id) AS n FROM batches b"
                " LEFT JOIN batch_requests r USING (batch_id) GROUP BY b.batch_id"
                " ORDER BY b.created_at DESC"
            ).fetchall()
        return [(r["batch_id"], r["owner"], r["status"], int(r["n"])) for r in rows]
