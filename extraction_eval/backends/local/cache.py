"""The model response cache: a completion stored under its request key."""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterable
from typing import Any

from extraction_eval.backends.local.connection import StoreConnection, _dumps, _now
from extraction_eval.llm.base import Completion
from extraction_eval.llm.context import current_item_id
from extraction_eval.textsafe import clean_text
from extraction_eval.types import Usage

CacheRow = tuple[str, Completion]  # (key, completion)

# What ``contains`` may hold of the answers it found, for their items' ``get`` (characters of
# answer text, all the caches of the process together: a matrix prepares every cell before
# running any): a cached re-run of a few thousand items reads each answer once; past this, a
# hit is read again by its item rather than holding a whole dataset's answers in memory.
HOLD_FOUND_CHARS = 16_000_000


class _Held:
    """Characters of answer text held by ``contains`` across the process, and by each cache
    (a list of one, which the cache's finalizer gives back if it is dropped holding some)."""

    lock = threading.Lock()
    total = 0

    @classmethod
    def take(cls, mine: list[int], n: int) -> bool:
        with cls.lock:
            if cls.total + n > HOLD_FOUND_CHARS:
                return False
            cls.total += n
            mine[0] += n
            return True

    @classmethod
    def give_back(cls, mine: list[int], n: int) -> None:
        with cls.lock:
            cls.total -= n
            mine[0] -= n

    @classmethod
    def give_all_back(cls, mine: list[int]) -> None:
        cls.give_back(mine, mine[0])


class CacheTables(StoreConnection):
    """The ``response_cache`` table; ``cache()`` hands it to pipelines as a ``ResponseCache``."""

    def cache(self, *, defer_writes: bool = False) -> SQLiteResponseCache:
        """``defer_writes``: a run's cache, whose writes wait for the item's result and are
        committed with it (``record_result(..., cache_rows=cache.take(item_id))``)."""
        return SQLiteResponseCache(self, defer_writes=defer_writes)

    def _cache_get(self, key: str) -> Completion | None:
        with self._statement() as conn:
            row = conn.execute(
                "SELECT text, model, usage FROM response_cache WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        return Completion(
            text=row["text"], model=row["model"], usage=Usage.model_validate_json(row["usage"])
        )

    def _cache_put(self, key: str, completion: Completion) -> None:
        with self._statement() as conn:
            write_cache_rows(conn, [(key, completion)])

    def _cache_put_many(self, rows: list[CacheRow]) -> None:
        if rows:
            with self._tx(write=True) as conn:
                write_cache_rows(conn, rows)


def write_cache_rows(conn: sqlite3.Connection, rows: Iterable[CacheRow]) -> None:
    """Store completions under their keys (a key already there is replaced)."""
    conn.executemany(
        "INSERT OR REPLACE INTO response_cache (key, text, model, usage, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        [(key, clean_text(c.text), c.model, _dumps(_usage_json(c)), _now()) for key, c in rows],
    )


def _usage_json(completion: Completion) -> dict[str, Any]:
    """The usage as stored: ``problem`` only when there is one (entries stay as they were)."""
    usage = completion.usage
    return usage.model_dump(mode="json", exclude=None if usage.problem else {"problem"})


class SQLiteResponseCache:
    """The ``ResponseCache`` protocol over the store's ``response_cache`` table.

    Per item of a run it costs one read and no transaction of its own: ``contains`` (the cost
    estimate's question, asked before the run) remembers the keys it did not find, so the
    item's ``get`` of such a key answers "no" without reading again, and holds the answers it
    found (up to ``HOLD_FOUND_CHARS`` of text), so the item's ``get`` takes its answer from
    there instead of reading it a second time; with ``defer_writes`` a
    ``put`` made for an item (``llm.context``) waits for the item's result and is written in
    the result's transaction (``take``), the rest with ``flush``.
    """

    def __init__(self, store: CacheTables, *, defer_writes: bool = False) -> None:
        self._store = store
        self._defer = defer_writes
        self._missing: set[str] = set()  # keys ``contains`` did not find, until their ``get``
        self._found: dict[str, Completion] = {}  # answers ``contains`` read, until their ``get``
        self._held = [0]  # characters of answer text in ``_found`` (counted in ``_Held``)
        weakref.finalize(self, _Held.give_all_back, self._held)
        self._pending: dict[str, list[CacheRow]] = {}  # item id -> its deferred writes

    def get(self, key: str) -> Completion | None:
        if key in self._missing:
            self._missing.discard(key)
            return None
        found = self._found.pop(key, None)
        if found is not None:
            _Held.give_back(self._held, len(found.text))
            return found
        return self._store._cache_get(key)

    def contains(self, key: str) -> bool:
        """Whether ``key`` is cached. Its answer is read and held for the key's next ``get``
        (within ``HOLD_FOUND_CHARS``); a key that is not cached is remembered as missing (a
        writer in between only means one model call that could have been saved, or an answer
        as it was a moment before: the same request's)."""
        found = self._store._cache_get(key)
        if found is None:
            self._missing.add(key)
            return False
        if key not in self._found and _Held.take(self._held, len(found.text)):
            self._found[key] = found
        return True

    def recall(self, key: str) -> tuple[bool, Completion | None]:
        """What ``contains`` learned of ``key``, taken as its ``get`` would take it: (True,
        None) not cached, (True, answer) the answer it read, (False, None) nothing known.
        ``--workers``: the run's process hands this to the worker that runs the item
        (:meth:`prime`), so the item's cache is read once over all processes."""
        if key in self._missing:
            self._missing.discard(key)
            return True, None
        found = self._found.pop(key, None)
        if found is not None:
            _Held.give_back(self._held, len(found.text))
            return True, found
        return False, None

    def prime(self, key: str, answer: Completion | None) -> None:
        """Remember ``key`` as ``contains`` would have (``answer`` None: not cached), for the
        key's next ``get``: a worker told by the run's process (:meth:`recall`). An answer past
        ``HOLD_FOUND_CHARS`` is not held (its ``get`` reads it)."""
        if answer is None:
            self._missing.add(key)
        elif key not in self._found and _Held.take(self._held, len(answer.text)):
            self._found[key] = answer

    def put(self, key: str, completion: Completion) -> None:
        item_id = current_item_id.get() if self._defer else None
        if item_id is None:
            self._store._cache_put(key, completion)
        else:
            self._pending.setdefault(item_id, []).append((key, completion))

    def hold(self, item_id: str, rows: list[CacheRow]) -> None:
        """Defer ``rows`` for the item as if its own ``put`` had made them (a worker process
        answered it: its writes go with its result here)."""
        self._pending.setdefault(item_id, []).extend(rows)

    def take(self, item_id: str) -> list[CacheRow]:
        """The item's deferred writes, for its result's transaction (none: ``[]``)."""
        return self._pending.pop(item_id, [])

    def write(self, rows: list[CacheRow]) -> None:
        """Write ``rows`` now, in one transaction of their own."""
        self._store._cache_put_many(rows)

    def flush(self) -> None:
        """Write the deferred writes no result took (an item whose result was not stored)."""
        rows = [row for rows in self._pending.values() for row in rows]
        self._pending.clear()
        self._missing.clear()
        self._found.clear()
        _Held.give_all_back(self._held)
        self._store._cache_put_many(rows)
