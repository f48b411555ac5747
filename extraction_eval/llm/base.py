"""The provider protocol every model backend implements, and the cache protocol it may use.

Providers only turn a request into text. Retrying, caching, parsing and scoring live elsewhere,
so a new provider is one small class that says what it can and what is retryable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from extraction_eval.limits import MAX_REPORTED_TOKENS
from extraction_eval.types import Usage


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class CompletionRequest:
    messages: tuple[ChatMessage, ...]
    model: str
    temperature: float = 0.0
    json_schema: dict[str, Any] | None = None  # structured-output contract, when supported
    timeout_s: float = 60.0
    max_tokens: int | None = None  # None: the server's default (a format probe keeps it short)


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    batch: bool = False  # answered through a batch API (priced at its discount)
    finish_reason: str | None = None  # "length": cut at max_tokens (so may not parse)


def _token_count(name: str, value: Any) -> tuple[int | None, str | None]:
    """A reported token count, or the reason it cannot be true."""
    if value is None:
        return None, f"{name} missing"
    if isinstance(value, bool) or not isinstance(value, int):
        return None, f"{name} {str(value)[:40]!r} is not a whole number"
    if value < 0:
        return None, f"{name} {value} is negative"
    if value > MAX_REPORTED_TOKENS:
        return None, f"{name} {value} is over {MAX_REPORTED_TOKENS:,} (limits.MAX_REPORTED_TOKENS)"
    return value, None


def reported_usage(
    tokens_in: Any,
    tokens_out: Any,
    tokens_cached: Any = None,
    *,
    names: tuple[str, str] = ("prompt_tokens", "completion_tokens"),
) -> Usage:
    """The token counts a server reported, kept only when they can be true: whole numbers
    from 0 to ``MAX_REPORTED_TOKENS``. Otherwise (negative, fractional, absurd, missing) the
    counts are dropped and ``problem`` says why, so the call is priced by the estimate rather
    than at a cost a hostile server chose (a negative one un-spends ``--max-cost``). A cached
    count that cannot be true is dropped alone: the input is then priced at the full rate."""
    count_in, why_in = _token_count(names[0], tokens_in)
    count_out, why_out = _token_count(names[1], tokens_out)
    cached, why_cached = _token_count("cached_tokens", tokens_cached)
    if why_cached is not None or (count_in or 0) < (cached or 0):
        cached = None
    problems = [why for why in (why_in, why_out) if why is not None]
    if tokens_in is None and tokens_out is None:
        problems = ["no usage reported"]
    if problems:
        return Usage(problem=f"usage: {'; '.join(problems)}")
    return Usage(tokens_in=count_in, tokens_out=count_out, tokens_cached=cached)


@runtime_checkable
class Provider(Protocol):
    """A model backend. ``complete`` raises ``ProviderError`` (with ``retryable``) on failure.

    A provider that talks to a server may also have ``endpoint``: the URL its answers come
    from (part of the response-cache key, so server B is never given server A's answers)."""

    name: str

    async def complete(self, request: CompletionRequest) -> Completion: ...


class ResponseCache(Protocol):
    """Where completions are kept so an unchanged config makes no model call."""

    def get(self, key: str) -> Completion | None: ...

    def put(self, key: str, completion: Completion) -> None: ...
