"""The response cache's modes: use it, refresh it (write, never read), or leave it alone."""

from __future__ import annotations

from typing import Literal

from extraction_eval.llm.base import Completion, ResponseCache

CacheMode = Literal["use", "refresh", "off"]
CACHE_MODES: tuple[str, ...] = ("use", "refresh", "off")


class _WriteOnly:
    """Every lookup misses, every answer is stored: a refresh replaces stale entries."""

    def __init__(self, inner: ResponseCache) -> None:
        self.inner = inner

    def get(self, key: str) -> Completion | None:
        return None

    def put(self, key: str, completion: Completion) -> None:
        self.inner.put(key, completion)


def with_cache_mode(cache: ResponseCache | None, mode: str) -> ResponseCache | None:
    """``cache`` as the run's mode wants it: ``use`` as is, ``refresh`` write-only, ``off``
    none at all (no read, no write)."""
    if cache is None or mode == "off":
        return None
    if mode == "refresh" and not isinstance(cache, _WriteOnly):
        return _WriteOnly(cache)
    return cache
