"""``datasets versions`` in LangFuse mode lists the moments a dataset's items changed; items
added one by one over days (e.g. from traces) make a row each, so counting each row's active
items must not walk every item again (quadratic: minutes for ten thousand items)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from extraction_eval.backends.langfuse.datasets import UPLOAD_GAP_S, change_moments
from extraction_eval.types import DatasetItem, Extraction

START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Counted:
    """A stored LangFuse item that counts how often its item is read."""

    own: DatasetItem
    created_at: datetime | None
    updated_at: datetime | None
    reads: list[int]

    @property
    def item(self) -> DatasetItem:
        self.reads.append(1)
        return self.own


def test_items_added_one_by_one_are_counted_without_walking_all_items_per_row() -> None:
    n = 300
    reads: list[int] = []
    stored = [
        Counted(
            DatasetItem(id=f"i{k}", text="t", expected=Extraction()),
            START + timedelta(seconds=2 * UPLOAD_GAP_S * k),
            None,
            reads,
        )
        for k in range(n)
    ]
    versions = change_moments(stored)  # type: ignore[arg-type]  # created/updated and item
    assert [v.items for v in versions] == list(range(1, n + 1))
    assert [v.note for v in versions] == ["1 new"] * n
    assert len(reads) <= 2 * n  # each item read a bounded number of times, not once a row
