"""Which dataset item a model call belongs to, without widening the provider protocol.

The pipeline sets it around each item; a context variable follows the call into tasks and
``asyncio.to_thread`` workers. The scripted fake provider reads it to answer per item.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

current_item_id: ContextVar[str | None] = ContextVar("extraction_eval_item_id", default=None)


@contextmanager
def item_context(item_id: str | None) -> Iterator[None]:
    token = current_item_id.set(item_id)
    try:
        yield
    finally:
        current_item_id.reset(token)
