"""What the Batch API tests (OpenAI's and Anthropic's) share: a command interrupted while it
polls its batches, as Ctrl-C after the batch was submitted and written to the ledger."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest


@contextmanager
def polling_interrupted(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> Iterator[None]:
    """Inside: ``module``'s batch polling (``_collect``) raises KeyboardInterrupt; after:
    polling works again, for the command that resumes."""
    collect = module._collect

    async def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "_collect", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        monkeypatch.setattr(module, "_collect", collect)
