"""The provider protocol every model backend implements, and the cache protocol it may use.

Providers only turn a request into text. Retrying, caching, parsing and scoring live elsewhere,
so a new provider is one small class that says what it can and what is retryable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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
