"""What a judge is asked and answers, and what judging cost.

A judge answers a batch of candidate pairs at once (one model call can settle an item's
pairs); every verdict carries its reason and where it came from, so a judged match can be
shown, exported and overruled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")

Source = Literal[
    "rules", "model", "cache", "error", "string", "person"
]  # string: no judging needed


@dataclass(frozen=True, slots=True)
class JudgePair:
    """Two names and what they were seen with: the gold type (None: types not compared) and
    the item's text (the judge reads it as context)."""

    a: str
    b: str
    type: str | None = None
    context: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    """``same`` is None when the judge failed on this pair (``error`` says why, in one
    line): such a pair is never a match, and the string figures never depend on it."""

    same: bool | None
    reason: str
    source: Source
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"same": self.same, "reason": self.reason, "source": self.source}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class JudgeStats:
    """What judging cost: model calls made, verdicts read from the cache, USD, and failures
    (each a pair the judge could not settle), with the first few failure lines."""

    pairs: int = 0
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0  # calls whose cost could not be priced
    errors: int = 0
    error_examples: list[str] = field(default_factory=list)
    budget_refused: int = 0  # pairs left unjudged by the cost ceiling (counted in errors too)

    def failed(self, line: str, pairs: int) -> None:
        self.errors += pairs
        if len(self.error_examples) < 5 and line not in self.error_examples:
            self.error_examples.append(line)

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": self.pairs,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "cost_usd": self.cost_usd,
            "cost_unknown_calls": self.cost_unknown,
            "errors": self.errors,
            "error_examples": list(self.error_examples),
            "budget_refused": self.budget_refused,
        }


class Judge(Protocol):
    """Answers a batch of pairs, one verdict per pair in the same order. Never raises for a
    failed model call or a bad answer: those pairs get a verdict with ``same=None``."""

    @property
    def identity(self) -> str: ...  # model, endpoint and prompt version: what a verdict means

    @property
    def stats(self) -> JudgeStats: ...

    async def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]: ...

    async def aclose(self) -> None: ...


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` to completion from synchronous code: on a fresh event loop, or, when
    this thread already runs one (a notebook), on a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="judge") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
