"""``LangfuseDatasetBackend``: the ``DatasetBackend`` protocol on LangFuse datasets.

Item ids. LangFuse item ids are unique across the whole project and at most 255 characters,
so an item is stored under ``langfuse_item_id(dataset, item.id)`` (``"{dataset}:{id}"``, hashed
when too long); its own id and upload position are kept in ``metadata["extraction_eval"]``
and restored on the way back, so a round trip gives the same items in the same order.
"""

from __future__ import annotations

import hashlib
import json
import logging
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from extraction_eval.backends.base import (
    DATASET_SCHEMA_KEY,
    DatasetInfo,
    DatasetVersion,
    DatasetVersions,
    UploadReport,
    item_content_hash,
    item_expected_output,
    item_from_payload,
    item_input,
    schema_of,
)
from extraction_eval.backends.langfuse.client import close_client, connect
from extraction_eval.backends.langfuse.errors import api_errors
from extraction_eval.errors import InvalidValue, NotFoundError, UsageError
from extraction_eval.textsafe import clean_json_value
from extraction_eval.types import DatasetItem, Schema

if TYPE_CHECKING:
    from langfuse import Langfuse


log = logging.getLogger(__name__)

META_KEY = "extraction_eval"  # item metadata we own: {"item_id": ..., "position": ...}
MAX_ITEM_ID_LEN = 255
ITEMS_PAGE_SIZE = 100


def langfuse_item_id(dataset: str, item_id: str) -> str:
    """The project-wide LangFuse id of ``item_id`` in ``dataset`` (deterministic, <= 255)."""
    key = f"{dataset}:{item_id}"
    if len(key) <= MAX_ITEM_ID_LEN:
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    return f"{dataset[:100]}:{item_id[:100]}~{digest}"


def _iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_version(version: int | str | datetime | None) -> datetime | None:
    if version is None:
        return None
    if isinstance(version, datetime):
        return version if version.tzinfo else version.replace(tzinfo=UTC)
    if isinstance(version, int) or not str(version).strip():
        raise InvalidValue(
            "version",
            "must be a timestamp for a LangFuse dataset (as `datasets show` prints them,"
            f" e.g. 2026-01-31T12:00:00.000Z), got {version!r}",
        )
    try:
        ts = datetime.fromisoformat(str(version).strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidValue("version", f"is not an ISO timestamp: {version!r}") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _status(value: Any) -> str:
    raw = getattr(value, "value", value)
    return str(raw).upper() if raw else "ACTIVE"


@dataclass(frozen=True)
class _Stored:
    """A LangFuse item normalised: our item, plus where it sits and when it last changed."""

    item: DatasetItem
    langfuse_id: str
    position: int | None
    created_at: datetime | None
    updated_at: datetime | None


def json_value(value: Any) -> Any:
    """A value LangFuse may hand back as JSON text, decoded (text that is not JSON stays)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def normalise_item(raw: Any) -> _Stored:
    """One SDK ``DatasetItem`` -> our ``DatasetItem`` (the one place that knows the shapes)."""
    metadata = dict(raw.metadata) if isinstance(raw.metadata, dict) else {}
    ours = metadata.pop(META_KEY, None)
    ours = ours if isinstance(ours, dict) else {}
    item_id = str(ours.get("item_id") or raw.id)
    position = ours.get("position")
    data_input = raw.input
    if data_input is None:
        raise UsageError(f"LangFuse dataset item {raw.id} has no input")
    if isinstance(data_input, dict) and not isinstance(data_input.get("text"), str):
        raise UsageError(
            f"LangFuse dataset item {raw.id}: input has no 'text' string"
            f" (keys: {', '.join(sorted(map(str, data_input))) or 'none'})"
        )
    if not isinstance(data_input, (dict, str)):
        raise UsageError(
            f"LangFuse dataset item {raw.id}: input must be a string or"
            f" {{'text': ...}}, got {type(data_input).__name__}"
        )
    expected = json_value(raw.expected_output)
    # text from the server that no store or body accepts (a lone UTF-16 surrogate) -> U+FFFD
    (item_id, data_input, expected, metadata), repaired = clean_json_value(
        [item_id, data_input, expected, metadata]
    )
    if repaired:
        log.warning(
            "LangFuse dataset item %s: lone UTF-16 surrogates replaced with U+FFFD", item_id
        )
    item = item_from_payload(
        id=item_id,
        input=data_input,
        expected_output=expected,
        metadata=metadata,
        source_trace_id=raw.source_trace_id,
        source_observation_id=raw.source_observation_id,
        status=_status(raw.status),
    )
    return _Stored(
        item=item,
        langfuse_id=str(raw.id),
        position=position if isinstance(position, int) else None,
        created_at=raw.created_at,
        updated_at=raw.updated_at,
    )


def _order(stored: Sequence[_Stored]) -> list[_Stored]:
    """Upload order: our recorded position first, then creation time (items made elsewhere)."""
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(
        stored,
        key=lambda s: (
            s.position is None,
            s.position if s.position is not None else 0,
            s.created_at or far,
            s.langfuse_id,
        ),
    )


@dataclass(frozen=True)
class RunDataset:
    """A dataset as a LangFuse-mode run needs it, read once: our items, and the SDK's own
    items that ``run_experiment`` links each trace to."""

    items: list[DatasetItem]  # active items, upload order
    raw_by_id: dict[str, Any]  # our item id -> the SDK's DatasetItem (what run_experiment needs)
    langfuse_id: str | None
    version: str | None
    pinned: datetime | None
    schema: Schema | None = None  # the dataset's (its metadata's ``schema``)


def _metadata(dataset: Any) -> dict[str, Any]:
    return dict(dataset.metadata) if isinstance(dataset.metadata, dict) else {}


def _dataset_schema(dataset: Any) -> Schema | None:
    """The schema a dataset's metadata holds (``datasets upload --schema`` put it there)."""
    return schema_of(_metadata(dataset).get(DATASET_SCHEMA_KEY))


class LangfuseDatasetBackend:
    """``DatasetBackend`` on LangFuse datasets, through the SDK.

    ``upload_items`` reads the dataset once, then upserts only new or changed items (stable
    ids), so a re-upload sends nothing and never duplicates. ``version`` is the timestamp of
    the latest item change; pass it back to ``get_items`` to read the items as they were.
    """

    def __init__(self, lf: Langfuse) -> None:
        self._lf = lf

    @classmethod
    def from_env(cls) -> LangfuseDatasetBackend:
        """Connected (and key-checked) from the LANGFUSE_* environment variables."""
        return cls(connect())

    def close(self) -> None:
        close_client(self._lf)

    # reads

    def _fetch(self, name: str, version: datetime | None = None) -> Any:
        with api_errors(
            self._lf,
            f"reading dataset {name!r}",
            not_found=f"dataset {name!r} not found in LangFuse",
        ):
            return self._lf.get_dataset(
                name, fetch_items_page_size=ITEMS_PAGE_SIZE, version=version
            )

    def _stored(self, dataset: Any) -> list[_Stored]:
        return _order([normalise_item(raw) for raw in dataset.items])

    @staticmethod
    def _version(dataset: Any, stored: Sequence[_Stored]) -> str | None:
        stamps = [s.updated_at for s in stored if s.updated_at] or [dataset.updated_at]
        return _iso(max(stamps)) if stamps and stamps[0] else None

    def _info(self, dataset: Any, stored: Sequence[_Stored]) -> DatasetInfo:
        return DatasetInfo(
            name=dataset.name,
            description=dataset.description,
            metadata=dict(dataset.metadata) if isinstance(dataset.metadata, dict) else {},
            version=self._version(dataset, stored),
            item_count=sum(1 for s in stored if s.item.status == "ACTIVE"),
            created_at=_iso(dataset.created_at),
            updated_at=_iso(dataset.updated_at),
            schema=_dataset_schema(dataset),
        )

    def get_dataset(self, name: str) -> DatasetInfo:
        dataset = self._fetch(name)
        return self._info(dataset, self._stored(dataset))

    def get_items(
        self, name: str, *, version: int | str | datetime | None = None
    ) -> list[DatasetItem]:
        """Active items in upload order; ``version`` (a timestamp) reads the past."""
        dataset = self._fetch(name, _parse_version(version))
        return [s.item for s in self._stored(dataset) if s.item.status == "ACTIVE"]

    def load_for_run(self, name: str, *, version: int | str | datetime | None = None) -> RunDataset:
        """Active items in upload order with their SDK items, the dataset's LangFuse id and
        version; ``version`` (a timestamp) pins the items as they were."""
        pinned = _parse_version(version)
        dataset = self._fetch(name, pinned)
        stored = self._stored(dataset)
        raw_by_lf_id = {str(raw.id): raw for raw in dataset.items}
        active = [s for s in stored if s.item.status == "ACTIVE"]
        return RunDataset(
            items=[s.item for s in active],
            raw_by_id={s.item.id: raw_by_lf_id[s.langfuse_id] for s in active},
            langfuse_id=getattr(dataset, "id", None),
            version=self._version(dataset, stored),
            pinned=pinned,
            schema=_dataset_schema(dataset),
        )

    def items_by_id(self, name: str) -> dict[str, DatasetItem]:
        """Every item (any status) by our id; empty when the dataset does not exist yet."""
        try:
            dataset = self._fetch(name)
        except NotFoundError:
            return {}
        return {s.item.id: s.item for s in self._stored(dataset)}

    def dataset_versions(self, name: str) -> DatasetVersions:
        """What LangFuse offers for versions: it keeps no list of them (SDK 5: ``get_dataset``
        takes any timestamp as ``version`` and reads the items as they were then). Listed:
        the moments items were created or last changed, those less than ``UPLOAD_GAP_S``
        apart taken as one upload; each row's version is its last moment (the timestamp that
        reads the items after that upload)."""
        stored = self._stored(self._fetch(name))
        return DatasetVersions(dataset=name, versions=change_moments(stored), about=_ABOUT)

    def list_datasets(self) -> list[DatasetInfo]:
        """Every dataset, with its item count (all statuses; one cheap request each).

        ``version`` is left empty here: computing it needs every item (``get_dataset`` does).
        """
        out: list[DatasetInfo] = []
        page = 1
        while True:
            with api_errors(self._lf, "listing datasets"):
                batch = self._lf.api.datasets.list(page=page, limit=100)
            for ds in batch.data:
                with api_errors(self._lf, f"counting the items of dataset {ds.name!r}"):
                    count = self._lf.api.dataset_items.list(
                        dataset_name=ds.name, page=1, limit=1
                    ).meta.total_items
                out.append(
                    DatasetInfo(
                        name=ds.name,
                        description=ds.description,
                        metadata=dict(ds.metadata) if isinstance(ds.metadata, dict) else {},
                        version=None,
                        item_count=int(count),
                        created_at=_iso(ds.created_at),
                        updated_at=_iso(ds.updated_at),
                        schema=_dataset_schema(ds),
                    )
                )
            if page >= batch.meta.total_pages:
                break
            page += 1
        return sorted(out, key=lambda d: d.name)

    # writes

    def upload_items(
        self,
        dataset: str,
        items: Iterable[DatasetItem],
        *,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        schema: Schema | None = None,
    ) -> UploadReport:
        """Create the dataset if missing and upsert new or changed items by stable id.
        ``schema`` is the dataset's own, kept in its metadata (``schema``); setting it on an
        existing dataset updates that one key (LangFuse upserts a dataset by name)."""
        items = list(items)  # read more than once below
        name = dataset.strip()
        if not name:
            raise UsageError("dataset name must not be empty")
        seen: set[str] = set()
        for item in items:
            if item.id in seen:
                raise UsageError(f"item id {item.id!r} appears twice in one upload")
            seen.add(item.id)

        try:
            current = self._fetch(name)
        except NotFoundError:
            current = None
        dataset_created = current is None
        wanted = None if schema is None else schema.model_dump(mode="json")
        schema_changed = False
        if current is None:
            if wanted is not None:
                metadata = {**(metadata or {}), DATASET_SCHEMA_KEY: wanted}
                schema_changed = True
            with api_errors(self._lf, f"creating dataset {name!r}"):
                self._lf.create_dataset(name=name, description=description, metadata=metadata)
            existing: dict[str, _Stored] = {}
            version: str | None = None
        else:
            stored = self._stored(current)
            existing = {s.item.id: s for s in stored}
            version = self._version(current, stored)
            header_metadata = _metadata(current)
            if wanted is not None and header_metadata.get(DATASET_SCHEMA_KEY) != wanted:
                header_metadata = {**header_metadata, DATASET_SCHEMA_KEY: wanted}
                with api_errors(self._lf, f"setting the schema of dataset {name!r}"):
                    self._lf.create_dataset(name=name, metadata=header_metadata)
                schema_changed = True
            if metadata is not None and wanted is not None:
                metadata = {**metadata, DATASET_SCHEMA_KEY: wanted}
            if (description is not None and description != current.description) or (
                metadata is not None and metadata != header_metadata
            ):
                log.warning(
                    "dataset %r already exists in LangFuse: its description and metadata"
                    " were left unchanged",
                    name,
                )
        next_position = 1 + max(
            (s.position for s in existing.values() if s.position is not None), default=-1
        )
        created = updated = unchanged = 0
        latest: list[datetime] = []
        for item in items:
            previous = existing.get(item.id)
            if previous is not None and item_content_hash(previous.item) == item_content_hash(item):
                unchanged += 1
                continue
            if previous is not None and previous.position is not None:
                position = previous.position
            else:
                position, next_position = next_position, next_position + 1
            lf_id = previous.langfuse_id if previous else langfuse_item_id(name, item.id)
            result = self._upsert(name, item, lf_id, position)
            if result.updated_at:
                latest.append(result.updated_at)
            if previous is None:
                created += 1
            else:
                updated += 1
        if latest:
            version = _iso(max(latest))
        return UploadReport(
            dataset=name,
            version=version,
            created=created,
            updated=updated,
            unchanged=unchanged,
            new_version=bool(created or updated),
            dataset_created=dataset_created,
            schema_changed=schema_changed,
        )

    def _upsert(self, dataset: str, item: DatasetItem, lf_id: str, position: int) -> Any:
        from langfuse.api import DatasetStatus

        with api_errors(self._lf, f"uploading item {item.id!r} to dataset {dataset!r}"):
            return self._lf.create_dataset_item(
                dataset_name=dataset,
                id=lf_id,
                input=item_input(item),
                expected_output=item_expected_output(item),
                metadata={**item.metadata, META_KEY: {"item_id": item.id, "position": position}},
                source_trace_id=item.source_trace_id,
                source_observation_id=item.source_observation_id,
                status=DatasetStatus(item.status),
            )


UPLOAD_GAP_S = 60.0  # item changes closer than this are one upload (one row of versions)
_ABOUT = (
    "LangFuse keeps no list of dataset versions: any timestamp is a version (it reads the"
    " items as they were then). Listed: the moments items were created or last changed, an"
    " upload as one row; an item's earlier changes and archived items' past are not shown;"
    " items = active items created by then."
)


def change_moments(stored: Sequence[_Stored]) -> list[DatasetVersion]:
    """The uploads of a LangFuse dataset as far as its items tell (see
    ``LangfuseDatasetBackend.dataset_versions``), oldest first."""
    events: list[tuple[datetime, bool]] = []  # (when, True: created / False: changed)
    for s in stored:
        if s.created_at is not None:
            events.append((s.created_at, True))
        changed = s.updated_at is not None and (
            s.created_at is None or (s.updated_at - s.created_at).total_seconds() > 1.0
        )  # stamped within a second of its creation: the creation itself
        if changed and s.updated_at is not None:
            events.append((s.updated_at, False))
    events.sort(key=lambda e: e[0])
    groups: list[list[tuple[datetime, bool]]] = []
    for event in events:
        if groups and (event[0] - groups[-1][-1][0]).total_seconds() < UPLOAD_GAP_S:
            groups[-1].append(event)
        else:
            groups.append([event])
    # sorted once: items added one by one over days make a group each, and counting the
    # active ones per group by walking every item would be quadratic
    active_since = sorted(
        s.created_at for s in stored if s.item.status == "ACTIVE" and s.created_at is not None
    )
    out: list[DatasetVersion] = []
    for group in groups:
        last = group[-1][0]
        created = sum(1 for _, new in group if new)
        active = bisect_right(active_since, last)
        parts = [f"{created} new"] if created else []
        parts += [f"{len(group) - created} changed"] if len(group) > created else []
        out.append(
            DatasetVersion(
                version=_iso(last) or "",
                created_at=_iso(group[0][0]),
                items=active,
                note=", ".join(parts),
            )
        )
    return out
