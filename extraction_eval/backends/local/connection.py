"""The one SQLite connection every table family shares: WAL, migrations, one transaction
at a time under a lock.

Why SQLite: no server, one file to copy or delete, transactional. Every write is committed
before the writer waits for anything, so a crash (even SIGKILL) loses at most the items still
in flight: a run's results are written into one open *group* (``group_write``) that is
committed at the end of the event-loop turn that wrote them, or before the connection is used
for anything else, whichever comes first (``commit_group``). WAL lets a second process
(``runs show`` during a run) read while the runner writes.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extraction_eval.backends.base import canonical_json
from extraction_eval.backends.local.compat import check_store_schema, open_read_only
from extraction_eval.backends.local.files import private_store_files
from extraction_eval.backends.local.migrations import migrate
from extraction_eval.errors import BackendError


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


class StoreConnection:
    """One connection shared behind a lock: the runner records results from worker threads,
    and SQLite serialises writers anyway. Opening migrates the schema."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self._path = path
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._group = False  # a group of writes is open (``group_write``), not yet committed
        self._scratch: Path | None = None  # a read-only store's migrated copy, deleted on close
        if read_only:  # another machine's store (``runs merge --from``): never written
            self._conn, self._scratch = open_read_only(path)
            return
        try:
            private_store_files(self._path)
        except OSError as exc:
            raise BackendError(f"cannot create local store {self._path}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                self._path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            self._conn = conn
            conn.row_factory = sqlite3.Row
            check_store_schema(conn, self._path)  # a newer version's store: refused, untouched
            _set_wal(conn)
            # NORMAL in WAL mode: durable across process crashes; only an OS crash or power
            # loss can drop the last commits, and the file stays consistent either way.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            migrate(conn)
        except sqlite3.Error as exc:
            self.close()
            raise BackendError(f"cannot open local store {self._path}: {exc}") from exc
        except BaseException:
            self.close()
            raise
        private_store_files(self._path)  # the -wal and -shm files SQLite has just made

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    def close(self) -> None:
        with self._lock:
            try:
                self._end_group()
            finally:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                if self._scratch is not None:
                    shutil.rmtree(self._scratch, ignore_errors=True)
                    self._scratch = None

    def commit_group(self) -> None:
        """Commit the open group of writes (nothing when none is open)."""
        with self._lock:
            self._end_group()

    def _end_group(self) -> None:
        """Under the lock: commit the open group; a failed commit rolls the group back and
        raises (its writes are lost: the caller reports them)."""
        if not self._group:
            return
        self._group = False
        conn = self._conn
        if conn is None or not conn.in_transaction:
            return
        self._commit(conn)

    def _commit(self, conn: sqlite3.Connection) -> None:
        """COMMIT; when it fails, the transaction is rolled back and the error raised."""
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise self._error(exc) from exc

    @contextmanager
    def group_write(self) -> Iterator[sqlite3.Connection]:
        """Writes that join the open group (opening one when none is), under a savepoint:
        on an exception only this block's writes are undone, the group's others stay. The
        caller commits with ``commit_group`` (any other use of the store commits it too)."""
        with self._lock:
            conn = self._open()
            try:
                if not self._group:
                    conn.execute("BEGIN IMMEDIATE")
                    self._group = True
                conn.execute("SAVEPOINT group_write")
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            with self._undone_on_error(conn, "ROLLBACK TO group_write", "RELEASE group_write"):
                yield conn
            conn.execute("RELEASE group_write")

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            raise BackendError(f"local store {self._path} is closed")
        return self._conn

    def _error(self, exc: sqlite3.Error) -> BackendError:
        return BackendError(f"local store {self._path}: {exc}")

    @contextmanager
    def _undone_on_error(self, conn: sqlite3.Connection, *undo: str) -> Iterator[None]:
        """Whatever the block raises: ``undo`` first (when a transaction is open), and an
        SQLite error as the store's one-line ``BackendError``."""
        try:
            yield
        except BaseException as exc:
            if conn.in_transaction:
                for statement in undo:
                    conn.execute(statement)
            if isinstance(exc, sqlite3.Error):
                raise self._error(exc) from exc
            raise

    @contextmanager
    def _statement(self) -> Iterator[sqlite3.Connection]:
        """One statement in SQLite's autocommit mode, under the lock: it is its own
        transaction, committed when it completes. For the hot single-statement paths (the
        response cache): an explicit BEGIN/COMMIT around one statement adds two round trips
        into SQLite (and two releases of the GIL) per model call."""
        with self._lock:
            self._end_group()
            conn = self._open()
            try:
                yield conn
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock; writes take the write lock up front (IMMEDIATE)."""
        with self._lock:
            self._end_group()
            conn = self._open()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            with self._undone_on_error(conn, "ROLLBACK"):
                yield conn
            self._commit(conn)
