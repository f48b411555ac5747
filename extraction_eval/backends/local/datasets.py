"""Datasets, their versions and items (the ``DatasetBackend`` protocol of the local store)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

from extraction_eval.backends.base import (
    DatasetInfo,
    DatasetVersion,
    DatasetVersions,
    UploadReport,
    item_content_hash,
    item_expected_output,
    item_from_payload,
    item_input,
    payload_text,
    schema_of,
)
from extraction_eval.backends.local.connection import StoreConnection, _dumps, _now
from extraction_eval.errors import InvalidValue, NotFoundError, UsageError
from extraction_eval.types import DatasetItem, Schema


class DatasetTables(StoreConnection):
    """Datasets are versioned as in LangFuse: each upload that changes an item adds a version."""

    def upload_items(
        self,
        dataset: str,
        items: Iterable[DatasetItem],
        *,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        schema: Schema | None = None,
    ) -> UploadReport:
        """Create the dataset if needed and upsert items by id.

        Any created or changed item makes one new dataset version; re-uploading identical
        content is a no-op. Items absent from this upload are left as they are. ``items`` is
        read once, one item at a time (a stream from a file is never all in memory); a repeated
        id rolls the whole upload back. ``schema`` sets the dataset's own schema (given to
        items without one when they are run); None leaves it as it is.
        """
        name = dataset.strip()
        if not name:
            raise UsageError("dataset name must not be empty")
        seen: set[str] = set()
        now = _now()
        with self._tx(write=True) as conn:
            row = _dataset_row(conn, name)
            dataset_created = row is None
            if row is None:
                cur = conn.execute(
                    "INSERT INTO datasets (name, description, metadata, version, created_at,"
                    " updated_at) VALUES (?, ?, ?, 0, ?, ?)",
                    (name, description, _dumps(metadata or {}), now, now),
                )
                row = _dataset_row(conn, name)
                assert row is not None
                dataset_id, current = int(cur.lastrowid or 0), 0
            else:
                dataset_id, current = int(row["id"]), int(row["version"])
                self._update_header(conn, row, description, metadata, now)
            schema_changed = False
            if schema is not None:
                text = _dumps(schema.model_dump(mode="json"))
                schema_changed = text != row["schema"]
                if schema_changed:
                    conn.execute(
                        "UPDATE datasets SET schema = ?, updated_at = ? WHERE id = ?",
                        (text, now, row["id"]),
                    )
            latest = {
                r["item_id"]: r["content_hash"]
                for r in conn.execute(
                    "SELECT item_id, content_hash, MAX(version) FROM item_versions"
                    " WHERE dataset_id = ? GROUP BY item_id",
                    (dataset_id,),
                )
            }
            position = conn.execute(
                "SELECT COALESCE(MAX(position), -1) + 1 FROM items WHERE dataset_id = ?",
                (dataset_id,),
            ).fetchone()[0]
            version = current + 1
            created = updated = unchanged = 0
            for item in items:
                if item.id in seen:
                    raise UsageError(f"item id {item.id!r} appears twice in one upload")
                seen.add(item.id)
                digest = item_content_hash(item)
                if item.id not in latest:
                    conn.execute(
                        "INSERT INTO items (dataset_id, id, position, created_at)"
                        " VALUES (?, ?, ?, ?)",
                        (dataset_id, item.id, position, now),
                    )
                    position += 1
                    created += 1
                elif latest[item.id] != digest:
                    updated += 1
                else:
                    unchanged += 1
                    continue
                conn.execute(
                    "INSERT INTO item_versions (dataset_id, item_id, version, input,"
                    " expected_output, metadata, source_trace_id, source_observation_id,"
                    " status, content_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        dataset_id,
                        item.id,
                        version,
                        _dumps(item_input(item)),
                        _dumps(item_expected_output(item)),
                        _dumps(item.metadata),
                        item.source_trace_id,
                        item.source_observation_id,
                        item.status,
                        digest,
                        now,
                    ),
                )
            new_version = bool(created or updated)
            if new_version:
                conn.execute(
                    "INSERT INTO dataset_versions (dataset_id, version, created_at, created,"
                    " updated) VALUES (?, ?, ?, ?, ?)",
                    (dataset_id, version, now, created, updated),
                )
                conn.execute(
                    "UPDATE datasets SET version = ?, updated_at = ? WHERE id = ?",
                    (version, now, dataset_id),
                )
        return UploadReport(
            dataset=name,
            version=version if new_version else current,
            created=created,
            updated=updated,
            unchanged=unchanged,
            new_version=new_version,
            dataset_created=dataset_created,
            schema_changed=schema_changed,
        )

    @staticmethod
    def _update_header(
        conn: sqlite3.Connection,
        row: sqlite3.Row,
        description: str | None,
        metadata: dict[str, Any] | None,
        now: str,
    ) -> None:
        desc = row["description"] if description is None else description
        meta = row["metadata"] if metadata is None else _dumps(metadata)
        if desc != row["description"] or meta != row["metadata"]:
            conn.execute(
                "UPDATE datasets SET description = ?, metadata = ?, updated_at = ? WHERE id = ?",
                (desc, meta, now, row["id"]),
            )

    def list_datasets(self) -> list[DatasetInfo]:
        with self._tx(write=False) as conn:
            rows = conn.execute("SELECT * FROM datasets ORDER BY name").fetchall()
            return [_dataset_info(conn, row) for row in rows]

    def get_dataset(self, name: str) -> DatasetInfo:
        with self._tx(write=False) as conn:
            return _dataset_info(conn, _require_dataset(conn, name))

    def dataset_versions(self, name: str) -> DatasetVersions:
        """Every version of ``name``, oldest first: when it was made, its active items then
        and what the upload changed (new and changed items; an archived item is a change)."""
        with self._tx(write=False) as conn:
            dataset_id = int(_require_dataset(conn, name)["id"])
            rows = conn.execute(
                "SELECT version, created_at, created, updated FROM dataset_versions"
                " WHERE dataset_id = ? ORDER BY version",
                (dataset_id,),
            ).fetchall()
            count = f"SELECT COUNT(*) FROM ({_ITEMS_AT_VERSION})"
            versions = [
                DatasetVersion(
                    version=int(r["version"]),
                    created_at=r["created_at"],
                    items=int(conn.execute(count, (dataset_id, r["version"])).fetchone()[0]),
                    note=_change_note(int(r["created"]), int(r["updated"])),
                )
                for r in rows
            ]
        return DatasetVersions(dataset=name, versions=versions)

    def get_items(self, name: str, *, version: int | str | None = None) -> list[DatasetItem]:
        """Active items as of ``version`` (default: the latest), in insertion order."""
        with self._tx(write=False) as conn:
            dataset_id, version = _resolve_version(conn, name, version)
            rows = conn.execute(_ITEMS_AT_VERSION, (dataset_id, version)).fetchall()
        return [_item(r) for r in rows]

    def item_ids(self, name: str, *, version: int | str | None = None) -> list[str]:
        """The ids of ``get_items`` (same checks), without building the items: cheap."""
        with self._tx(write=False) as conn:
            dataset_id, version = _resolve_version(conn, name, version)
            rows = conn.execute(
                f"SELECT item_id FROM ({_ITEMS_AT_VERSION})", (dataset_id, version)
            ).fetchall()
        return [r[0] for r in rows]

    def get_items_by_ids(
        self,
        name: str,
        ids: Sequence[str],
        *,
        version: int | str | None = None,
        batch_size: int = 500,
    ) -> dict[str, DatasetItem]:
        """The active items of ``ids`` as of ``version`` (an id the version lacks is left
        out), read ``batch_size`` ids per query: a few items of a big dataset without
        building all of them."""
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}")
        out: dict[str, DatasetItem] = {}
        with self._tx(write=False) as conn:
            dataset_id, version = _resolve_version(conn, name, version)
            for start in range(0, len(ids), batch_size):
                batch = list(ids[start : start + batch_size])
                marks = ", ".join(f"?{i + 3}" for i in range(len(batch)))
                # ``+i.position``: SQLite then finds the ids by primary key and sorts them,
                # instead of walking every item of the dataset in position order per batch
                # (5x faster for 500 ids of a 100,000-item dataset)
                query = _ITEMS_AT_VERSION.replace(
                    "ORDER BY i.position", f"AND i.id IN ({marks}) ORDER BY +i.position"
                )
                for r in conn.execute(query, (dataset_id, version, *batch)):
                    out[r["item_id"]] = _item(r)
        return out

    def iter_items(
        self,
        name: str,
        *,
        version: int | str | None = None,
        batch_size: int = 500,
        after: int = -1,
        limit: int | None = None,
    ) -> Iterator[DatasetItem]:
        """``get_items`` as a stream, ``batch_size`` items read at a time, so a 100,000-item
        dataset is never in memory at once. The version is fixed (and checked) when this is
        called; each batch is its own short read transaction (a run writes in between).
        ``after`` (an item position, see :meth:`item_positions`) and ``limit`` stream one
        range of them: the report builds ranges in two processes."""
        dataset_id, version = self._version_of(name, version)
        rows = self._rows_in_batches(_ITEMS_PAGE, dataset_id, version, batch_size, after)
        return (_item(r) for r in (rows if limit is None else islice(rows, limit)))

    def item_positions(self, name: str, *, version: int | str | None = None) -> list[int]:
        """The stored positions of ``iter_items``' items, in its order (cheap: integers)."""
        with self._tx(write=False) as conn:
            dataset_id, version = _resolve_version(conn, name, version)
            query = f"SELECT position FROM ({_ITEMS_AT_VERSION.replace('iv.*', 'i.position')})"
            return [int(r[0]) for r in conn.execute(query, (dataset_id, version))]

    def iter_item_texts(
        self, name: str, *, version: int | str | None = None, batch_size: int = 2000
    ) -> Iterator[tuple[str, str]]:
        """(id, text) of ``iter_items``'s items, in the same order, without building them."""
        dataset_id, version = self._version_of(name, version)
        rows = self._rows_in_batches(_TEXTS_PAGE, dataset_id, version, batch_size)
        return ((r["item_id"], payload_text(json.loads(r["input"]))) for r in rows)

    def _version_of(self, name: str, version: int | str | None) -> tuple[int, int]:
        """(dataset row id, version number) of ``name`` at ``version`` (default: the latest)."""
        with self._tx(write=False) as conn:
            return _resolve_version(conn, name, version)

    def _rows_in_batches(
        self, page: str, dataset_id: int, version: int, batch_size: int, after: int = -1
    ) -> Iterator[sqlite3.Row]:
        """Keyset paging by item position: each page its own short read transaction."""
        if batch_size < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}")
        while True:
            with self._tx(write=False) as conn:
                rows = conn.execute(page, (dataset_id, version, after, batch_size)).fetchall()
            if not rows:
                return
            yield from rows
            if len(rows) < batch_size:
                return
            after = int(rows[-1]["position"])


def _resolve_version(
    conn: sqlite3.Connection, name: str, version: int | str | None
) -> tuple[int, int]:
    """(dataset id, version number) of ``name`` at ``version`` (default: the latest)."""
    if isinstance(version, str):
        if not version.isdigit():
            raise InvalidValue("version", f"must be a number for a local dataset, got {version!r}")
        version = int(version)
    row = _require_dataset(conn, name)
    current = int(row["version"])
    if version is None:
        version = current
    elif not 1 <= version <= current:
        known = f"versions 1..{current}" if current else "no versions yet"
        raise NotFoundError(f"dataset {name!r} has no version {version} ({known})")
    return int(row["id"]), version


def _change_note(created: int, updated: int) -> str:
    """What an upload changed: ``48 new``, ``2 new, 3 changed``."""
    parts = [f"{created} new"] if created else []
    parts += [f"{updated} changed"] if updated else []
    return ", ".join(parts) or "no change"


def _item(r: sqlite3.Row) -> DatasetItem:
    return item_from_payload(
        id=r["item_id"],
        input=json.loads(r["input"]),
        expected_output=json.loads(r["expected_output"]),
        metadata=json.loads(r["metadata"]),
        source_trace_id=r["source_trace_id"],
        source_observation_id=r["source_observation_id"],
        status=r["status"],
    )


# The latest row of each item at or before version ?2 of dataset ?1, active ones only.
_ITEMS_AT_VERSION = """
SELECT iv.* FROM items i
JOIN item_versions iv ON iv.dataset_id = i.dataset_id AND iv.item_id = i.id
WHERE i.dataset_id = ?1
  AND iv.version = (
      SELECT MAX(x.version) FROM item_versions x
      WHERE x.dataset_id = i.dataset_id AND x.item_id = i.id AND x.version <= ?2)
  AND iv.status = 'ACTIVE'
ORDER BY i.position
"""

# One page of it: ?4 items after position ?3 (keyset paging; the position is unique per dataset).
_ITEMS_PAGE = """
SELECT iv.*, i.position FROM items i
JOIN item_versions iv ON iv.dataset_id = i.dataset_id AND iv.item_id = i.id
WHERE i.dataset_id = ?1 AND i.position > ?3
  AND iv.version = (
      SELECT MAX(x.version) FROM item_versions x
      WHERE x.dataset_id = i.dataset_id AND x.item_id = i.id AND x.version <= ?2)
  AND iv.status = 'ACTIVE'
ORDER BY i.position
LIMIT ?4
"""
_TEXTS_PAGE = _ITEMS_PAGE.replace("SELECT iv.*,", "SELECT iv.item_id, iv.input,")


def _dataset_row(conn: sqlite3.Connection, name: str) -> sqlite3.Row | None:
    row: sqlite3.Row | None = conn.execute(
        "SELECT * FROM datasets WHERE name = ?", (name,)
    ).fetchone()
    return row


def _require_dataset(conn: sqlite3.Connection, name: str) -> sqlite3.Row:
    row = _dataset_row(conn, name)
    if row is None:
        names = [r[0] for r in conn.execute("SELECT name FROM datasets ORDER BY name")]
        known = f"known: {', '.join(names)}" if names else "no datasets yet"
        raise NotFoundError(f"dataset {name!r} not found ({known})")
    return row


def _dataset_info(conn: sqlite3.Connection, row: sqlite3.Row) -> DatasetInfo:
    count = conn.execute(
        f"SELECT COUNT(*) FROM ({_ITEMS_AT_VERSION})", (row["id"], row["version"])
    ).fetchone()[0]
    return DatasetInfo(
        name=row["name"],
        description=row["description"],
        metadata=json.loads(row["metadata"]),
        version=int(row["version"]),
        item_count=int(count),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        schema=schema_of(row["schema"]),
    )
