"""Ensemble gold tables: human overrides and each item's last vote (see migration m006_gold)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from extraction_eval.backends.local.connection import StoreConnection, _dumps, _loads, _now
from extraction_eval.types import GoldOverride


class GoldTables(StoreConnection):
    def add_gold_override(self, dataset: str, override: GoldOverride) -> int:
        with self._tx(write=True) as conn:
            cur = conn.execute(
                "INSERT INTO gold_overrides (dataset, item_id, action, kind, target, field,"
                " value, reason, author, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    dataset,
                    override.item_id,
                    override.action,
                    override.kind,
                    override.target,
                    override.field,
                    override.value,
                    override.reason,
                    override.author,
                    _now(),
                ),
            )
            return int(cur.lastrowid or 0)

    def gold_overrides(self, dataset: str) -> list[GoldOverride]:
        """Every override of the dataset, in the order they were made (later ones win)."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT * FROM gold_overrides WHERE dataset = ? ORDER BY id", (dataset,)
            ).fetchall()
        return [
            GoldOverride(
                dataset=dataset,
                item_id=r["item_id"],
                action=r["action"],
                kind=r["kind"],
                target=r["target"],
                field=r["field"],
                value=r["value"],
                reason=r["reason"],
                author=r["author"],
                id=int(r["id"]),
                created_at=r["created_at"],
            )
            for r in rows
        ]

    def gold_aggregate_hash(self, dataset: str, item_id: str) -> str | None:
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT input_hash FROM gold_aggregates WHERE dataset = ? AND item_id = ?",
                (dataset, item_id),
            ).fetchone()
        return None if row is None else str(row["input_hash"])

    def put_gold_aggregate(
        self, dataset: str, item_id: str, input_hash: str, aggregate: dict[str, Any]
    ) -> None:
        with self._tx(write=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO gold_aggregates (dataset, item_id, input_hash,"
                " aggregate, built_at) VALUES (?, ?, ?, ?, ?)",
                (dataset, item_id, input_hash, _dumps(aggregate), _now()),
            )

    def iter_gold_aggregates(self, dataset: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(item id, aggregate JSON) of the dataset's last build, by item id."""
        with self._tx(write=False) as conn:
            rows = conn.execute(
                "SELECT item_id, aggregate FROM gold_aggregates WHERE dataset = ? ORDER BY item_id",
                (dataset,),
            ).fetchall()
        for r in rows:
            yield str(r["item_id"]), _loads(r["aggregate"])
