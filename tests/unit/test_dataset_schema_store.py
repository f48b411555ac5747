"""The local store keeps a dataset's schema in a column added by ``m011_dataset_schema``: a
store made before it opens with its datasets intact and no schema, and takes one after."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local.migrations import migrate
from extraction_eval.types import DatasetItem, Entity, Extraction, Schema


def test_a_store_from_before_the_migration_gets_the_column_and_keeps_its_datasets(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, upto="m009_item_position_index")[-1] == "m009_item_position_index"
    assert "schema" not in {r[1] for r in conn.execute("PRAGMA table_info(datasets)")}
    conn.close()
    item = DatasetItem(
        id="a", text="Ann ran.", expected=Extraction(entities=[Entity(name="Ann", type="Peop")])
    )
    with LocalStore(path, seed=False) as store:  # applies m010
        store.upload_items("old", [item])
        assert store.get_dataset("old").schema is None
    with sqlite3.connect(path) as check:
        assert "schema" in {r[1] for r in check.execute("PRAGMA table_info(datasets)")}
        names = [r[0] for r in check.execute("SELECT name FROM _migrations")]
        assert names[-1] == "m011_dataset_schema"
    schema = Schema(entity_types=["Peop"], labels={"Peop": "person"})
    with LocalStore(path, seed=False) as store:
        report = store.upload_items("old", [item], schema=schema)
        assert report.schema_changed and not report.new_version  # the items did not change
        assert store.get_dataset("old").schema == schema
        assert [d.schema for d in store.list_datasets()] == [schema]
