"""What the garbage collector's freeze looks like while items run (the run keeps the objects
alive before it out of the collector's full passes; see ``experiments/driver.gc_frozen``)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from extraction_eval.experiments.runner import ItemRunner


def watch_freeze(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The frozen-object count seen as each item starts, appended to the returned list."""
    frozen: list[int] = []
    run_scored = ItemRunner.run_scored

    async def watching(self: ItemRunner, item: Any) -> Any:
        frozen.append(gc.get_freeze_count())
        return await run_scored(self, item)

    monkeypatch.setattr(ItemRunner, "run_scored", watching)
    return frozen
