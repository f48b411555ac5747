"""The embedded local store: one SQLite file that holds datasets, runs, results, scores, cache.

Why SQLite: no server, one file to copy or delete, transactional. Every write is its own
committed transaction, so a crash (even SIGKILL) loses at most the items still in flight.
WAL lets a second process (``runs show`` during a run) read while the runner writes.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extraction_eval.backends.base import (
    DatasetInfo,
    RunRecord,
    UploadReport,
    canonical_json,
    extraction_payload,
    item_content_hash,
    item_expected_output,
    item_from_payload,
    item_input,
)
from extraction_eval.backends.migrations import migrate
from extraction_eval.errors import BackendError, NotFoundError, UsageError
from extraction_eval.llm.base import Completion
from extraction_eval.prompts.template import PromptTemplate, messages_hash
from extraction_eval.prompts.versions import (
    DEFAULT_LABEL,
    LATEST,
    PromptInfo,
    PromptPush,
    PromptVersion,
    check_label,
    check_messages,
    check_prompt_name,
)
from extraction_eval.types import (
    DatasetItem,
    Extraction,
    ItemResult,
    Score,
    ScoreType,
    TaxonomyTag,
    Usage,
)

__all__ = [
    "SAMPLE_DATASET",
    "DatasetInfo",
    "LocalStore",
    "RunRecord",
    "SQLiteResponseCache",
    "UploadReport",
    "default_home",
    "default_store_path",
]

log = logging.getLogger(__name__)

HOME_ENV = "EXTRACTION_EVAL_HOME"
SAMPLE_DATASET = "extraction-eval"
_SAMPLE_RESOURCE = ("data", "sample_dataset.jsonl")
RUN_BACKENDS = ("local", "langfuse")


def default_home() -> Path:
    """``$EXTRACTION_EVAL_HOME``, else ``~/.extraction-eval`` (tests point the variable at tmp)."""
    env = os.environ.get(HOME_ENV, "").strip()
    return Path(env).expanduser() if env else Path.home() / ".extraction-eval"


def default_store_path() -> Path:
    return default_home() / "store.db"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dumps(obj: Any) -> str:
    return canonical_json(obj)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _set_wal(conn: sqlite3.Connection, attempts: int = 50) -> None:
    """Switch to WAL, waiting out other processes doing the same on a brand-new file.

    The switch needs an exclusive lock and SQLite may answer "database is locked" at once
    instead of waiting for ``timeout`` (seen with several CLI commands started together on a
    fresh machine), so retry briefly.
    """
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.02 * (attempt + 1))


class LocalStore:
    """Datasets (versioned), runs, item results, scores and the response cache in SQLite.

    One connection shared behind a lock: the runner records results from worker threads, and
    SQLite serialises writers anyway. Opening migrates the schema and, unless ``seed=False``,
    adds the bundled sample dataset ``extraction-eval`` if it is absent.
    """

    def __init__(self, path: Path | None = None, *, seed: bool = True) -> None:
        self._path = Path(path) if path is not None else default_store_path()
        self._lock = threading.RLock()
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendError(f"cannot create store directory {self._path.parent}: {exc}") from exc
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                self._path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._conn = conn
            conn.row_factory = sqlite3.Row
            _set_wal(conn)
            # NORMAL in WAL mode: durable across process crashes; only an OS crash or power
            # loss can drop the last commits, and the file stays consistent either way.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            migrate(conn)
        except sqlite3.Error as exc:
            self.close()
            raise BackendError(f"cannot open local store {self._path}: {exc}") from exc
        if seed:
            self._seed_sample()

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> LocalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalStore({str(self._path)!r})"

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock; writes take the write lock up front (IMMEDIATE)."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise BackendError(f"local store {self._path} is closed")
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise BackendError(f"local store {self._path}: {exc}") from exc
            try:
                yield conn
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise BackendError(f"local store {self._path}: {exc}") from exc
                raise
            else:
                try:
                    conn.execute("COMMIT")
                except sqlite3.Error as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise BackendError(f"local store {self._path}: {exc}") from exc

    def _seed_sample(self) -> None:
        """Make the README's first command work on a fresh machine; never overwrite a user's."""
        with self._tx(write=False) as conn:
            if _dataset_row(conn, SAMPLE_DATASET) is not None:
                return
        from extraction_eval.seeds.jsonl import sample_items  # imported only when seeding

        items = sample_items()
        self.upload_items(
            SAMPLE_DATASET,
            items,
            description="Bundled sample (our own writing): people, organisations, places, dates",
            metadata={"source": "bundled", "file": "/".join(_SAMPLE_RESOURCE)},
        )

    # --- datasets (the DatasetBackend protocol) --------------------------------------------

    def upload_items(
        self,
        dataset: str,
        items: Sequence[DatasetItem],
        *,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> UploadReport:
        """Create the dataset if needed and upsert items by id.

        Any created or changed item makes one new dataset version; re-uploading identical
        content is a no-op. Items absent from this upload are left as they are.
        """
        name = dataset.strip()
        if not name:
            raise UsageError("dataset name must not be empty")
        seen: set[str] = set()
        for item in items:
            if item.id in seen:
                raise UsageError(f"item id {item.id!r} appears twice in one upload")
            seen.add(item.id)
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
                dataset_id, current = int(cur.lastrowid or 0), 0
            else:
                dataset_id, current = int(row["id"]), int(row["version"])
                self._update_header(conn, row, description, metadata, now)
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

    def get_items(self, name: str, *, version: int | str | None = None) -> list[DatasetItem]:
        """Active items as of ``version`` (default: the latest), in insertion order."""
        if isinstance(version, str):
            if not version.isdigit():
                raise UsageError(f"--version: local dataset versions are numbers, got {version!r}")
            version = int(version)
        with self._tx(write=False) as conn:
            row = _require_dataset(conn, name)
            current = int(row["version"])
            if version is None:
                version = current
            elif not 1 <= version <= current:
                known = f"versions 1..{current}" if current else "no versions yet"
                raise NotFoundError(f"dataset {name!r} has no version {version} ({known})")
            rows = conn.execute(_ITEMS_AT_VERSION, (int(row["id"]), version)).fetchall()
        return [
            item_from_payload(
                id=r["item_id"],
                input=json.loads(r["input"]),
                expected_output=json.loads(r["expected_output"]),
                metadata=json.loads(r["metadata"]),
                source_trace_id=r["source_trace_id"],
                source_observation_id=r["source_observation_id"],
                status=r["status"],
            )
            for r in rows
        ]

    # --- runs -------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        name: str,
        dataset: str,
        dataset_version: int | str | None,
        config: dict[str, Any],
        backend: str = "local",
        experiment_id: str | None = None,
    ) -> RunRecord:
        """A new run in status ``running``; an existing name is an error (resume uses get_run)."""
        if not name.strip():
            raise UsageError("run name must not be empty")
        if backend not in RUN_BACKENDS:
            raise UsageError(f"run backend must be one of {', '.join(RUN_BACKENDS)}: {backend!r}")
        with self._tx(write=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM runs WHERE dataset = ? AND name = ?", (dataset, name)
            ).fetchone()
            if exists:
                raise UsageError(
                    f"run {name!r} already exists on dataset {dataset!r}; "
                    "resume it or choose another name"
                )
            cur = conn.execute(
                "INSERT INTO runs (name, dataset, dataset_version, backend, experiment_id,"
                " config, status, started_at) VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
                (
                    name,
                    dataset,
                    _dumps(dataset_version),
                    backend,
                    experiment_id,
                    _dumps(config),
                    _now(),
                ),
            )
            run_id = int(cur.lastrowid or 0)
            return _run_record(_require_run(conn, run_id))

    def get_run(self, name: str, dataset: str | None = None) -> RunRecord | None:
        """The run called ``name``; without ``dataset`` the name must be unambiguous."""
        with self._tx(write=False) as conn:
            if dataset is not None:
                rows = conn.execute(
                    "SELECT * FROM runs WHERE name = ? AND dataset = ?", (name, dataset)
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM runs WHERE name = ? ORDER BY id", (name,)
                ).fetchall()
        if len(rows) > 1:
            datasets = ", ".join(repr(r["dataset"]) for r in rows)
            raise UsageError(
                f"run name {name!r} exists on several datasets ({datasets}); name the dataset"
            )
        return _run_record(rows[0]) if rows else None

    def get_run_by_id(self, run_id: int) -> RunRecord:
        with self._tx(write=False) as conn:
            return _run_record(_require_run(conn, run_id))

    def list_runs(self, dataset: str | None = None) -> list[RunRecord]:
        """Runs in the order they were started."""
        with self._tx(write=False) as conn:
            if dataset is None:
                rows = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM runs WHERE dataset = ? ORDER BY id", (dataset,)
                ).fetchall()
        return [_run_record(r) for r in rows]

    def update_run(
        self,
        run_id: int,
        *,
        config: dict[str, Any] | None = None,
        experiment_id: str | None = None,
        status: str | None = None,
    ) -> None:
        """Change what is given. Setting status ``running`` clears ``ended_at`` (a resume)."""
        sets: list[str] = []
        params: list[Any] = []
        if config is not None:
            sets.append("config = ?")
            params.append(_dumps(config))
        if experiment_id is not None:
            sets.append("experiment_id = ?")
            params.append(experiment_id)
        if status is not None:
            sets.append("status = ?")
            params.append(status)
            if status == "running":
                sets.append("ended_at = NULL")
        with self._tx(write=True) as conn:
            _require_run(conn, run_id)
            if sets:
                conn.execute(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", (*params, run_id))

    def delete_empty_run(self, run_id: int) -> bool:
        """Delete the run if it has no result row (a setup that died before its first item);
        a run with results is never deleted. True when it was deleted."""
        with self._tx(write=True) as conn:
            if conn.execute("SELECT 1 FROM results WHERE run_id = ?", (run_id,)).fetchone():
                return False
            cur = conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))  # scores cascade
            return cur.rowcount > 0

    def record_result(self, run_id: int, result: ItemResult) -> None:
        """Upsert the item's row and replace its item-level scores and failure taxonomy, all
        in one transaction, then commit at once."""
        usage = result.usage
        row = (
            run_id,
            result.item_id,
            None if result.output is None else _dumps(extraction_payload(result.output)),
            result.error,
            result.error_kind,
            result.raw_output,
            result.attempts,
            result.latency_ms,
            usage.tokens_in,
            usage.tokens_out,
            usage.cost_usd,
            int(result.cache_hit),
            result.trace_id,
            result.trace_url,
            int(result.taxonomy is not None),
            _now(),
        )
        with self._tx(write=True) as conn:
            _require_run(conn, run_id)
            conn.execute(_UPSERT_RESULT, row)
            conn.execute(
                "DELETE FROM scores WHERE run_id = ? AND item_id = ?", (run_id, result.item_id)
            )
            _insert_scores(conn, run_id, result.item_id, result.scores)
            conn.execute(
                "DELETE FROM result_taxonomy WHERE run_id = ? AND item_id = ?",
                (run_id, result.item_id),
            )
            conn.executemany(
                "INSERT INTO result_taxonomy (run_id, item_id, position, category, kind, side,"
                " idx, label, related, source_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        run_id,
                        result.item_id,
                        position,
                        t.category,
                        t.kind,
                        t.side,
                        t.index,
                        t.label,
                        _dumps(t.related),
                        t.source_id,
                    )
                    for position, t in enumerate(result.taxonomy or ())
                ],
            )

    def results(self, run_id: int, *, category: str | None = None) -> list[ItemResult]:
        """Every recorded item result with its scores and taxonomy, in the order first recorded;
        with ``category``, only the items that have at least one object in that category."""
        only = (
            " AND item_id IN (SELECT item_id FROM result_taxonomy"
            " WHERE run_id = :run AND category = :category)"
            if category is not None
            else ""
        )
        params = {"run": run_id, "category": category}
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            rows = conn.execute(
                f"SELECT * FROM results WHERE run_id = :run{only} ORDER BY rowid", params
            ).fetchall()
            score_rows = conn.execute(
                "SELECT * FROM scores WHERE run_id = ? AND item_id IS NOT NULL ORDER BY id",
                (run_id,),
            ).fetchall()
            tag_rows = conn.execute(
                "SELECT * FROM result_taxonomy WHERE run_id = ? ORDER BY item_id, position",
                (run_id,),
            ).fetchall()
        scores: dict[str, list[Score]] = {}
        for s in score_rows:
            scores.setdefault(s["item_id"], []).append(_score(s))
        tags: dict[str, list[TaxonomyTag]] = {}
        for t in tag_rows:
            tags.setdefault(t["item_id"], []).append(_tag(t))
        return [_item_result(r, scores.get(r["item_id"], []), tags) for r in rows]

    def finish_run(
        self, run_id: int, *, status: str, run_scores: Sequence[Score], summary: dict[str, Any]
    ) -> None:
        """Close the run: status, end time, summary, and its run-level scores (replaced)."""
        with self._tx(write=True) as conn:
            _require_run(conn, run_id)
            conn.execute(
                "UPDATE runs SET status = ?, ended_at = ?, summary = ? WHERE id = ?",
                (status, _now(), _dumps(summary), run_id),
            )
            conn.execute("DELETE FROM scores WHERE run_id = ? AND item_id IS NULL", (run_id,))
            _insert_scores(conn, run_id, None, run_scores)

    def run_scores(self, run_id: int) -> list[Score]:
        with self._tx(write=False) as conn:
            _require_run(conn, run_id)
            rows = conn.execute(
                "SELECT * FROM scores WHERE run_id = ? AND item_id IS NULL ORDER BY id", (run_id,)
            ).fetchall()
        return [_score(r) for r in rows]

    # --- prompts (versions and labels, as in LangFuse prompt management) -------------------

    def push_prompt(
        self,
        name: str,
        messages: Sequence[dict[str, str]],
        *,
        labels: Sequence[str] = (),
        config: dict[str, Any] | None = None,
        commit_message: str | None = None,
        force: bool = False,
    ) -> PromptPush:
        """Store ``messages`` as the next version of ``name`` and point ``labels`` at it.

        When the newest version already has exactly these messages and config, no version is
        added and the labels move to it (``force=True`` adds one anyway).
        """
        name = check_prompt_name(name)
        wanted = tuple(dict.fromkeys(check_label(label) for label in labels))
        chat = check_messages(messages)
        digest, config_json, now = messages_hash(chat), _dumps(config or {}), _now()
        with self._tx(write=True) as conn:
            newest = conn.execute(
                "SELECT version, content_hash, config FROM prompt_versions WHERE name = ?"
                " ORDER BY version DESC LIMIT 1",
                (name,),
            ).fetchone()
            unchanged = newest is not None and (newest["content_hash"], newest["config"]) == (
                digest,
                config_json,
            )
            if unchanged and not force:
                version = int(newest["version"])
            else:
                version = int(newest["version"]) + 1 if newest is not None else 1
                conn.execute(
                    "INSERT INTO prompt_versions (name, version, messages, content_hash, config,"
                    " commit_message, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, version, _dumps(chat), digest, config_json, commit_message, now),
                )
            for label in wanted:
                conn.execute(
                    "INSERT INTO prompt_labels (name, label, version, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (name, label) DO UPDATE"
                    " SET version = excluded.version, updated_at = excluded.updated_at",
                    (name, label, version, now),
                )
        return PromptPush(
            name=name, version=version, created=not (unchanged and not force), labels=wanted
        )

    def get_prompt(
        self, name: str, *, label: str | None = None, version: int | None = None
    ) -> PromptTemplate:
        """A stored version by ``version`` or ``label`` (``latest``: the newest; neither:
        ``production``), as the same ``PromptTemplate`` a LangFuse fetch gives."""
        if label is not None and version is not None:
            raise UsageError("pass a prompt label or a prompt version, not both")
        with self._tx(write=False) as conn:
            latest = _require_prompt(conn, name)
            if version is None:
                wanted = label if label is not None else DEFAULT_LABEL
                if wanted == LATEST:
                    version = latest
                else:
                    found = conn.execute(
                        "SELECT version FROM prompt_labels WHERE name = ? AND label = ?",
                        (name, wanted),
                    ).fetchone()
                    if found is None:
                        known = [LATEST, *_prompt_labels(conn, name)]
                        raise NotFoundError(
                            f"prompt {name!r} has no label {wanted!r} in the local store"
                            f" (labels: {', '.join(known)})"
                        )
                    version = int(found["version"])
            row = conn.execute(
                "SELECT messages FROM prompt_versions WHERE name = ? AND version = ?",
                (name, version),
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    f"prompt {name!r} has no version {version} in the local store"
                    f" (versions 1..{latest})"
                )
        return PromptTemplate(
            name=name,
            messages=json.loads(row["messages"]),
            version=int(version),
            label=label,
            source="local-store",
        )

    def prompt_versions(self, name: str) -> list[PromptVersion]:
        """Every version of ``name``, oldest first, each with the labels pointing at it."""
        with self._tx(write=False) as conn:
            latest = _require_prompt(conn, name)
            labels: dict[int, list[str]] = {latest: [LATEST]}
            for row in conn.execute(
                "SELECT label, version FROM prompt_labels WHERE name = ? ORDER BY label", (name,)
            ):
                labels.setdefault(int(row["version"]), []).append(row["label"])
            rows = conn.execute(
                "SELECT * FROM prompt_versions WHERE name = ? ORDER BY version", (name,)
            ).fetchall()
        return [
            PromptVersion(
                name=name,
                version=int(r["version"]),
                messages=json.loads(r["messages"]),
                content_hash=r["content_hash"],
                labels=tuple(labels.get(int(r["version"]), [])),
                config=json.loads(r["config"]),
                commit_message=r["commit_message"],
                created_at=r["created_at"],
            )
            for r in rows
        ]

    def list_prompts(self) -> list[PromptInfo]:
        with self._tx(write=False) as conn:
            heads = conn.execute(
                "SELECT name, COUNT(*) AS n, MAX(version) AS latest, MAX(created_at) AS at"
                " FROM prompt_versions GROUP BY name ORDER BY name"
            ).fetchall()
            label_rows = conn.execute(
                "SELECT name, label, version, updated_at FROM prompt_labels ORDER BY label"
            ).fetchall()
        out: list[PromptInfo] = []
        for head in heads:
            mine = [r for r in label_rows if r["name"] == head["name"]]
            out.append(
                PromptInfo(
                    name=head["name"],
                    versions=int(head["n"]),
                    latest=int(head["latest"]),
                    labels={
                        LATEST: int(head["latest"]),
                        **{r["label"]: int(r["version"]) for r in mine},
                    },
                    updated_at=max([head["at"], *(r["updated_at"] for r in mine)]),
                )
            )
        return out

    # --- response cache ---------------------------------------------------------------------

    def cache(self) -> SQLiteResponseCache:
        return SQLiteResponseCache(self)

    def _cache_get(self, key: str) -> Completion | None:
        with self._tx(write=False) as conn:
            row = conn.execute(
                "SELECT text, model, usage FROM response_cache WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        return Completion(
            text=row["text"], model=row["model"], usage=Usage.model_validate_json(row["usage"])
        )

    def _cache_put(self, key: str, completion: Completion) -> None:
        with self._tx(write=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO response_cache (key, text, model, usage, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    key,
                    completion.text,
                    completion.model,
                    _dumps(completion.usage.model_dump(mode="json")),
                    _now(),
                ),
            )


class SQLiteResponseCache:
    """The ``ResponseCache`` protocol over the store's ``response_cache`` table."""

    def __init__(self, store: LocalStore) -> None:
        self._store = store

    def get(self, key: str) -> Completion | None:
        return self._store._cache_get(key)

    def put(self, key: str, completion: Completion) -> None:
        self._store._cache_put(key, completion)


# --- row helpers ------------------------------------------------------------------------------

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

_UPSERT_RESULT = """
INSERT INTO results (run_id, item_id, output, error, error_kind, raw_output, attempts,
                     latency_ms, tokens_in, tokens_out, cost_usd, cache_hit, trace_id,
                     trace_url, taxonomy_recorded, finished_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, item_id) DO UPDATE SET
    output = excluded.output, error = excluded.error, error_kind = excluded.error_kind,
    raw_output = excluded.raw_output, attempts = excluded.attempts,
    latency_ms = excluded.latency_ms, tokens_in = excluded.tokens_in,
    tokens_out = excluded.tokens_out, cost_usd = excluded.cost_usd,
    cache_hit = excluded.cache_hit, trace_id = excluded.trace_id,
    trace_url = excluded.trace_url, taxonomy_recorded = excluded.taxonomy_recorded,
    finished_at = excluded.finished_at
"""


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
    )


def _require_prompt(conn: sqlite3.Connection, name: str) -> int:
    """The newest version of prompt ``name``; a one-line error naming the known prompts."""
    row = conn.execute(
        "SELECT MAX(version) FROM prompt_versions WHERE name = ?", (name,)
    ).fetchone()
    if row is None or row[0] is None:
        names = [r[0] for r in conn.execute("SELECT DISTINCT name FROM prompt_versions")]
        known = f"known: {', '.join(sorted(names))}" if names else "none pushed yet"
        raise NotFoundError(
            f"prompt {name!r} not found in the local store ({known}; add it with prompts push)"
        )
    return int(row[0])


def _prompt_labels(conn: sqlite3.Connection, name: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT label FROM prompt_labels WHERE name = ? ORDER BY label", (name,)
        )
    ]


def _require_run(conn: sqlite3.Connection, run_id: int) -> sqlite3.Row:
    row: sqlite3.Row | None = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"run id {run_id} not found in the local store")
    return row


def _run_record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=int(row["id"]),
        name=row["name"],
        dataset=row["dataset"],
        dataset_version=_loads(row["dataset_version"]),
        backend=row["backend"],
        experiment_id=row["experiment_id"],
        config=json.loads(row["config"]),
        status=row["status"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        summary=_loads(row["summary"]),
    )


def _insert_scores(
    conn: sqlite3.Connection, run_id: int, item_id: str | None, scores: Sequence[Score]
) -> None:
    now = _now()
    conn.executemany(
        "INSERT INTO scores (run_id, item_id, name, value_num, value_str, data_type, comment,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, item_id, s.name, *_score_columns(s.value), s.data_type, s.comment, now)
            for s in scores
        ],
    )


def _score_columns(value: float | bool | str) -> tuple[float | None, str | None]:
    if isinstance(value, str):
        return None, value
    return float(value), None


def _score(row: sqlite3.Row) -> Score:
    data_type: ScoreType = row["data_type"]
    num, text = row["value_num"], row["value_str"]
    value: float | bool | str
    if text is not None:
        value = text
    elif num is None:
        value = math.nan  # SQLite stores NaN as NULL; NaN is what went in
    elif data_type == "BOOLEAN":
        value = bool(num)
    else:
        value = float(num)
    return Score(name=row["name"], value=value, data_type=data_type, comment=row["comment"])


def _tag(row: sqlite3.Row) -> TaxonomyTag:
    return TaxonomyTag(
        category=row["category"],
        kind=row["kind"],
        side=row["side"],
        index=int(row["idx"]),
        label=row["label"],
        related=json.loads(row["related"]),
        source_id=row["source_id"],
    )


def _item_result(
    row: sqlite3.Row, scores: list[Score], tags: dict[str, list[TaxonomyTag]]
) -> ItemResult:
    output = row["output"]
    return ItemResult(
        item_id=row["item_id"],
        output=None if output is None else Extraction.model_validate_json(output),
        raw_output=row["raw_output"],
        error=row["error"],
        error_kind=row["error_kind"],
        attempts=int(row["attempts"]),
        latency_ms=row["latency_ms"],
        usage=Usage(
            tokens_in=row["tokens_in"], tokens_out=row["tokens_out"], cost_usd=row["cost_usd"]
        ),
        cache_hit=bool(row["cache_hit"]),
        scores=scores,
        trace_id=row["trace_id"],
        trace_url=row["trace_url"],
        taxonomy=tags.get(row["item_id"], []) if row["taxonomy_recorded"] else None,
    )
