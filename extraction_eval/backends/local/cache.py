"""The model response cache: a completion stored under its request key."""

from __future__ import annotations

from extraction_eval.backends.local.connection import StoreConnection, _dumps, _now
from extraction_eval.llm.base import Completion
from extraction_eval.textsafe import clean_text
from extraction_eval.types import Usage


class CacheTables(StoreConnection):
    """The ``response_cache`` table; ``cache()`` hands it to pipelines as a ``ResponseCache``."""

    def cache(self) -> SQLiteResponseCache:
        return SQLiteResponseCache(self)

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
            conn.execute(
                "INSERT OR REPLACE INTO response_cache (key, text, model, usage, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    key,
                    clean_text(completion.text),  # a lone surrogate would refuse the row
                    completion.model,
                    _dumps(completion.usage.model_dump(mode="json")),
                    _now(),
                ),
            )


class SQLiteResponseCache:
    """The ``ResponseCache`` protocol over the store's ``response_cache`` table."""

    def __init__(self, store: CacheTables) -> None:
        self._store = store

    def get(self, key: str) -> Completion | None:
        return self._store._cache_get(key)

    def put(self, key: str, completion: Completion) -> None:
        self._store._cache_put(key, completion)
