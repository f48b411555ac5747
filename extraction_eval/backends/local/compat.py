"""Refuse a store this version does not know, before anything is written to it.

A store written by a newer extraction-eval has migrations this one lacks: writing to it
would put rows into tables whose meaning has changed (or silently lose them), and reading it
would trip over columns it does not expect. So opening checks first, in a read transaction:
every applied migration must be one this version knows, and the tables, their columns and
the indexes must be exactly what those migrations make. Anything else is one line and no
write at all.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
import tempfile
from pathlib import Path

from extraction_eval.backends.local.files import SIDE_FILES
from extraction_eval.backends.local.migrations import MIGRATIONS, migrate
from extraction_eval.errors import UsageError

# the SQLite tables and indexes a store has: (type, name, columns), sorted (not types.Schema)
TableLayout = tuple[tuple[str, str, tuple[str, ...]], ...]

_ADVICE = "upgrade extraction-eval, or set EXTRACTION_EVAL_HOME to another folder"


class UnknownStoreError(UsageError):
    """The store was written by a newer version (or is not ours): refused, nothing written."""


class NotAStoreError(UsageError):
    """A file read as another machine's store (``runs merge --from``) that is not one this
    version can read as it is: refused in one line, the file left as it was."""


def open_read_only(path: Path) -> tuple[sqlite3.Connection, Path | None]:
    """A read-only connection to another machine's store, which is never written: not
    migrated, not switched to WAL, no side file made (SQLite's ``immutable`` when the store
    has no ``-wal`` file, i.e. no process has it open; ``mode=ro`` to read through the one it
    has). Before, opening a ``--from`` file migrated it: a 0-byte file became a 176 KB store.

    An older version's store is copied (SQLite's backup) into a private temporary folder and
    the copy is migrated: the connection is then the copy's, and the folder (the second
    value, else None) is the caller's to delete. Anything else that is not a store of a
    known version is ``NotAStoreError``, one line.
    """
    if not path.is_file():
        raise NotAStoreError(f"{path}: file not found")
    if path.stat().st_size == 0:
        raise NotAStoreError(f"{path}: not an extraction-eval store (an empty file)")
    side = any(path.with_name(path.name + s).exists() for s in SIDE_FILES)
    uri = f"{path.resolve().as_uri()}?{'mode=ro' if side else 'immutable=1'}"
    conn = sqlite3.connect(
        uri, uri=True, timeout=30.0, isolation_level=None, check_same_thread=False
    )
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA query_only=ON")
        if _check_readable(conn, path):
            return conn, None
        with contextlib.closing(conn):
            return _migrated_copy(conn)
    except sqlite3.Error as exc:
        conn.close()
        raise NotAStoreError(
            f"{path}: cannot be read as an extraction-eval store ({exc})"
        ) from None
    except BaseException:
        conn.close()
        raise


def _migrated_copy(source: sqlite3.Connection) -> tuple[sqlite3.Connection, Path]:
    """An older store read as this version's: a copy in a private folder, migrated."""
    folder = Path(tempfile.mkdtemp(prefix="extraction-eval-read-"))
    copy = sqlite3.connect(
        folder / "store.db", timeout=30.0, isolation_level=None, check_same_thread=False
    )
    try:
        source.backup(copy)
        migrate(copy)
        copy.row_factory = sqlite3.Row
        copy.execute("PRAGMA query_only=ON")
    except BaseException:
        copy.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return copy, folder


def _check_readable(conn: sqlite3.Connection, path: Path) -> bool:
    """True for a store made by exactly this version's migrations, False for an older
    version's (made by a prefix of them); anything else is ``NotAStoreError``."""
    actual = _schema(conn)
    if not any(name == "_migrations" for _, name, _ in actual):
        raise NotAStoreError(
            f"{path}: not an extraction-eval store (a database without its tables)"
        )
    applied = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
    known = [m.__name__ for m in MIGRATIONS]
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise NotAStoreError(
            f"{path}: written by a newer version of extraction-eval (its migration {unknown[0]}"
            " is unknown here): read it with that version"
        )
    ours = tuple(entry for entry in actual if entry[1] != "_migrations")
    expected = expected_schema(tuple(name for name in known if name in applied))
    if ours != expected:
        raise NotAStoreError(
            f"{path}: does not have the schema its migrations make"
            f" ({_difference(expected, ours)}): written by another version or tool"
        )
    return len(applied) == len(known)


def check_store_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Raise ``UnknownStoreError`` unless the store is blank or made by known migrations."""
    conn.execute("BEGIN")
    try:
        actual = _schema(conn)
        applied: list[str] = []
        if any(name == "_migrations" for _, name, _ in actual):
            applied = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
    finally:
        conn.execute("ROLLBACK")
    known = [m.__name__ for m in MIGRATIONS]
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise UnknownStoreError(
            f"local store {path} was written by a newer version of extraction-eval (its"
            f" migration {unknown[0]} is unknown here); nothing was written: {_ADVICE}"
        )
    ours = tuple(entry for entry in actual if entry[1] != "_migrations")
    if not applied and not ours:
        return  # a blank file: migrations make it
    expected = expected_schema(tuple(name for name in known if name in applied))
    if ours != expected:
        raise UnknownStoreError(
            f"local store {path} does not have the schema its migrations make"
            f" ({_difference(expected, ours)}): written by another version or tool; nothing"
            f" was written: {_ADVICE}"
        )


@functools.cache
def expected_schema(applied: tuple[str, ...]) -> TableLayout:
    """What the migrations ``applied`` (in their order) make, built in memory once."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for fn in MIGRATIONS:
            if fn.__name__ in applied:
                fn(conn)
        return _schema(conn)
    finally:
        conn.close()


def _schema(conn: sqlite3.Connection) -> TableLayout:
    rows = conn.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'view', 'trigger')"
        " AND name NOT LIKE 'sqlite_%' ORDER BY type, name"
    ).fetchall()
    out = []
    for kind, name in rows:
        columns: tuple[str, ...] = ()
        if kind == "table":
            quoted = '"' + name.replace('"', '""') + '"'
            columns = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({quoted})"))
        out.append((kind, name, columns))
    return tuple(out)


def _difference(expected: TableLayout, actual: TableLayout) -> str:
    want = {(k, n): c for k, n, c in expected}
    have = {(k, n): c for k, n, c in actual}
    for key in sorted(have.keys() - want.keys()):
        return f"unexpected {key[0]} {key[1]}"
    for key in sorted(want.keys() - have.keys()):
        return f"missing {key[0]} {key[1]}"
    for key in sorted(want):
        extra = [c for c in have[key] if c not in want[key]]
        if extra:
            return f"unexpected column {key[1]}.{extra[0]}"
        missing = [c for c in want[key] if c not in have[key]]
        if missing:
            return f"missing column {key[1]}.{missing[0]}"
    return "columns in another order"
