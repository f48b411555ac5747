"""What every dataset backend offers, and the one mapping between items and stored payloads.

The local store and LangFuse hold the same thing — an item's ``input`` ({text, schema}),
``expected_output`` ({entities, relationships}) and metadata — so the mapping lives here once,
and both backends (and exports) agree byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from extraction_eval.datasets.jsonl import extraction_payload
from extraction_eval.types import DatasetItem, Extraction, ItemResult, Schema, Score


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset's header. ``version`` is an int locally; LangFuse may use a timestamp string."""

    name: str
    description: str | None
    metadata: dict[str, Any]
    version: str | int | None
    item_count: int
    created_at: str | None
    updated_at: str | None
    # the dataset's schema: what items without their own are run and scored with
    schema: Schema | None = None


@dataclass(frozen=True)
class DatasetVersion:
    """One version of a dataset: its number (locally) or timestamp (LangFuse), when it was
    made, its active items then (None: not known) and what changed."""

    version: str | int
    created_at: str | None
    items: int | None
    note: str


@dataclass(frozen=True)
class DatasetVersions:
    """A dataset's versions, oldest first, and what the backend can tell of them (``about``:
    e.g. that LangFuse keeps no list of versions)."""

    dataset: str
    versions: list[DatasetVersion]
    about: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "about": self.about,
            "versions": [
                {"version": v.version, "created_at": v.created_at, "items": v.items, "note": v.note}
                for v in self.versions
            ],
        }


# where a LangFuse dataset keeps its schema (the dataset's metadata; the local store: a column)
DATASET_SCHEMA_KEY = "schema"


def schema_of(value: Any) -> Schema | None:
    """A stored dataset schema (JSON text or an object) as a ``Schema``; None when absent."""
    if isinstance(value, str):
        value = json.loads(value)
    return Schema.model_validate(value) if isinstance(value, dict) else None


@dataclass(frozen=True)
class UploadReport:
    """What an upload changed, so the CLI can say it and a re-upload can be seen as a no-op."""

    dataset: str
    version: str | int | None
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    new_version: bool = False
    dataset_created: bool = False
    schema_changed: bool = False  # the dataset's own schema was set or replaced

    @property
    def total(self) -> int:
        return self.created + self.updated + self.unchanged


@dataclass(frozen=True)
class RunRecord:
    """One experiment run as stored: enough to re-score, compare and report without a model."""

    id: int
    name: str
    dataset: str
    dataset_version: int | str | None
    backend: str
    experiment_id: str | None
    config: dict[str, Any]
    status: str
    started_at: str
    ended_at: str | None
    summary: dict[str, Any] | None


class ResultStore(Protocol):
    """What a run needs of a store while it runs and closes: write each result as it
    finishes, read results back in dataset order, close the run (status, summary, run-level
    scores), and drop a run that ended before its first item. The local store is one; the
    run path depends on nothing more."""

    def record_result(self, run_id: int, result: ItemResult) -> None: ...

    def iter_item_results(
        self, run_id: int, item_ids: Sequence[str], *, batch_size: int = 500
    ) -> Iterator[ItemResult]: ...

    def finish_run(
        self, run_id: int, *, status: str, run_scores: Sequence[Score], summary: dict[str, Any]
    ) -> None: ...

    def delete_empty_run(self, run_id: int) -> bool: ...

    def get_run(self, name: str, dataset: str | None = None) -> RunRecord | None: ...

    def release_run_lock(self, holder: Any) -> None:
        """Give back the lock this process took on a run (``prepare`` took it)."""
        ...


@runtime_checkable
class DatasetBackend(Protocol):
    """Where datasets live: the local SQLite store, or LangFuse when keys are configured."""

    def upload_items(
        self,
        dataset: str,
        items: Iterable[DatasetItem],
        *,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        schema: Schema | None = None,
    ) -> UploadReport: ...

    def list_datasets(self) -> list[DatasetInfo]: ...

    def get_dataset(self, name: str) -> DatasetInfo: ...

    def get_items(self, name: str, *, version: int | str | None = None) -> list[DatasetItem]: ...

    def dataset_versions(self, name: str) -> DatasetVersions: ...

    def close(self) -> None: ...


# --- item <-> payload mapping (shared by every backend) -------------------------------------


def item_input(item: DatasetItem) -> dict[str, Any]:
    """``{"text": ..., "schema": {...}}``; ``schema`` only when the item has one."""
    out: dict[str, Any] = {"text": item.text}
    if item.schema_ is not None:
        out["schema"] = item.schema_.model_dump(mode="json")
    return out


def item_expected_output(item: DatasetItem) -> dict[str, Any]:
    """``{"entities": [...], "relationships": [...]}`` without null / empty optional fields."""
    return extraction_payload(item.expected)


def payload_text(input: Any) -> str:
    """An item input's text, as ``item_from_payload`` reads it (a bare string is the text)."""
    if isinstance(input, str):
        return input
    if isinstance(input, dict):
        return str(input.get("text", ""))
    return ""


def item_from_payload(
    *,
    id: str,
    input: Any,
    expected_output: Any,
    metadata: Any = None,
    source_trace_id: str | None = None,
    source_observation_id: str | None = None,
    status: str = "ACTIVE",
) -> DatasetItem:
    """The inverse of ``item_input`` / ``item_expected_output``; tolerant of a bare-text input."""
    text = payload_text(input)
    schema = input.get("schema") if isinstance(input, dict) else None
    expected = expected_output if isinstance(expected_output, dict) else {}
    return DatasetItem.model_validate(
        {
            "id": id,
            "text": text,
            "schema": Schema.model_validate(schema) if isinstance(schema, dict) else None,
            "expected": Extraction.model_validate(expected),
            "metadata": metadata if isinstance(metadata, dict) else {},
            "source_trace_id": source_trace_id,
            "source_observation_id": source_observation_id,
            "status": status,
        }
    )


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept: equal content gives equal text (hashes, storage)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def item_content_hash(item: DatasetItem) -> str:
    """Everything an upload can change about an item; equal hash means 'unchanged'."""
    payload = {
        "input": item_input(item),
        "expected_output": item_expected_output(item),
        "metadata": item.metadata,
        "source_trace_id": item.source_trace_id,
        "source_observation_id": item.source_observation_id,
        "status": item.status,
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
