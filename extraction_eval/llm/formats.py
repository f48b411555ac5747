"""Which response format an OpenAI-compatible server takes, found once per run before the items.

Servers differ: OpenAI, vLLM and Ollama take strict ``json_schema``; llama-cpp-python's server
refuses it (500, "Input should be 'text' or 'json_object'") but constrains decoding by grammar
when the schema rides in ``{"type": "json_object", "schema": ...}``; some servers take JSON
mode only, some nothing at all. ``auto`` sends one short probe per format, strongest first
(``RESPONSE_FORMATS``), and keeps the first the server accepts. A request the server refuses
as invalid moves on to the next format at once; any other failure (server down, wrong model,
timeouts after the retry policy) stops the detection and keeps the format being probed (the
strongest the server has not refused), with a warning: the items then run, and fail as rows if
the server really is unusable.

An ``anthropic:`` model is probed the same way over its own formats (a forced tool call, then
text): Anthropic's API takes the tool call, a gateway may not.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from extraction_eval.errors import ConfigError, ProviderError, one_line
from extraction_eval.llm.base import Completion, CompletionRequest
from extraction_eval.llm.openai_provider import AUTO, RESPONSE_FORMATS
from extraction_eval.llm.retry import RetryPolicy, call_with_retry

# Short, so a probe is quick even on a slow CPU server (acceptance is what decides); a longer
# answer is cut, and the probe then only records that (no verdict on the schema).
PROBE_MAX_TOKENS = 64


@dataclass(frozen=True)
class FormatAttempt:
    """One probe: the format sent and what came of it."""

    format: str
    outcome: str  # "accepted" | "rejected" (invalid request) | "failed" (anything else)
    detail: str | None = None  # the server's refusal, or whether the answer followed the schema

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "outcome": self.outcome, "detail": self.detail}


@dataclass(frozen=True)
class FormatChoice:
    """The format a run sends, how it was chosen, and what the probes found (run record)."""

    asked: str  # auto | one of RESPONSE_FORMATS
    used: str  # one of RESPONSE_FORMATS
    how: str  # "pinned" | "detected" | "known" (OpenAI's API) | "not detected" | "not probed"
    family: str | None = None  # how json_object_schema carries the schema (llamacpp, vllm, ...)
    tried: tuple[FormatAttempt, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "used": self.used,
            "how": self.how,
            "family": self.family,
            "tried": [t.to_json() for t in self.tried],
        }

    @classmethod
    def from_json(cls, data: Any) -> FormatChoice | None:
        """The record back (None when the run has none: made before detection existed, or
        not a model run)."""
        if not isinstance(data, dict) or data.get("used") not in RESPONSE_FORMATS:
            return None
        tried = tuple(
            FormatAttempt(str(t.get("format")), str(t.get("outcome")), t.get("detail"))
            for t in data.get("tried") or []
            if isinstance(t, dict)
        )
        return cls(
            asked=str(data.get("asked")),
            used=str(data["used"]),
            how=str(data.get("how")),
            family=data.get("family"),
            tried=tried,
        )

    def summary(self) -> str:
        """One line for the run summary: the format, and why that one."""
        text = self.used
        if self.used == "json_object_schema" and self.family:
            text += f" ({self.family} form)"
        if self.how == "pinned":
            return text + " (pinned)"
        if self.how == "known":
            vendor = VENDORS.get(self.family or "", "OpenAI's API")
            return text + f" (auto: {vendor})"
        if self.how == "not probed":
            return text + " (auto: not probed)"
        refused = [t.format for t in self.tried if t.outcome == "rejected"]
        if self.how == "not detected":
            failed = next((t for t in self.tried if t.outcome == "failed"), None)
            reason = f": {failed.detail}" if failed is not None and failed.detail else ""
            return text + f" (auto: not detected{reason})"
        if refused:
            return text + f" (auto: the server refused {', '.join(refused)})"
        return text + " (auto)"

    def warning(self) -> str | None:
        """What the user should know before reading the results, if anything."""
        last = self.tried[-1] if self.tried else None
        if self.how == "not detected" and last is not None:
            return (
                f"response format not detected ({last.format} probe failed: {last.detail});"
                f" sending {self.used}"
            )
        if self.how == "detected" and last is not None and last.detail == SCHEMA_IGNORED:
            return (
                f"the server accepted {self.used} but its probe answer did not follow the"
                " schema: it may ignore the format (pin another response_format)"
            )
        return None


class Probed(Protocol):
    """What the probes need of a provider (``OpenAIProvider``, ``AnthropicProvider``): its
    format, the formats it can be asked in (``formats``, strongest first; OpenAI's when it
    has none), whether it is a vendor's own API (nothing to detect) and a twin to probe with."""

    response_format: Any
    format_choice: Any
    server_family: str

    @property
    def official_api(self) -> bool: ...

    def clone(self, *, response_format: Any) -> Any: ...

    async def complete(self, request: CompletionRequest) -> Completion: ...

    async def aclose(self) -> None: ...


# the vendor whose own API a "known" choice names, by the provider's server family
VENDORS = {"anthropic": "Anthropic's API"}

SCHEMA_FOLLOWED = "the answer followed the schema"
SCHEMA_IGNORED = "the answer did not follow the schema"


def pinned(provider: Probed) -> FormatChoice:
    """The choice of a provider whose format was given (nothing to detect)."""
    return FormatChoice(
        asked=provider.response_format,
        used=provider.response_format,
        how="pinned",
        family=provider.server_family,
    )


async def detect(
    provider: Probed,
    request: CompletionRequest,
    policy: RetryPolicy,
    *,
    conforms: Callable[[str], bool] | None = None,
) -> FormatChoice:
    """Probe ``provider``'s server with ``request`` in each format, strongest first.

    ``provider`` is used for the probes only (give it a client of this event loop);
    ``conforms`` says whether an answer follows the request's schema (recorded, and a warning
    when a schema-carrying format was accepted but not followed). Raises ``ConfigError`` when
    the server refuses every format, text included: no item could run.
    """
    tried: list[FormatAttempt] = []
    probe = CompletionRequest(
        messages=request.messages,
        model=request.model,
        temperature=request.temperature,
        json_schema=request.json_schema,
        timeout_s=request.timeout_s,
        max_tokens=PROBE_MAX_TOKENS,
    )
    for fmt in getattr(provider, "formats", RESPONSE_FORMATS):
        provider.response_format = fmt
        try:
            completion, _ = await call_with_retry(lambda: provider.complete(probe), policy)
        except ProviderError as exc:
            if exc.invalid_request:
                tried.append(FormatAttempt(fmt, "rejected", one_line(exc)))
                continue
            # says nothing about the format: keep this one (the strongest not refused)
            tried.append(FormatAttempt(fmt, "failed", one_line(exc)))
            return FormatChoice(AUTO, fmt, "not detected", provider.server_family, tuple(tried))
        detail = None
        if conforms is not None and fmt != "text":
            if conforms(completion.text):
                detail = SCHEMA_FOLLOWED
            elif completion.finish_reason == "length":  # cut short: says nothing either way
                detail = f"the answer was cut at {PROBE_MAX_TOKENS} tokens"
            else:
                detail = SCHEMA_IGNORED
        tried.append(FormatAttempt(fmt, "accepted", detail))
        return FormatChoice(AUTO, fmt, "detected", provider.server_family, tuple(tried))
    refusals = "; ".join(f"{t.format}: {t.detail}" for t in tried)
    raise ConfigError(f"the server refused every response format ({refusals})")


def resolve(
    provider: Probed,
    request: CompletionRequest,
    policy: RetryPolicy,
    *,
    conforms: Callable[[str], bool] | None = None,
    meanwhile: Callable[[], None] | None = None,
) -> FormatChoice:
    """The provider's format settled for a run: pinned, known (OpenAI's own API), or detected.

    Blocking, and safe inside a running event loop (a notebook, LangFuse mode): the probes run
    on a fresh client in a thread of their own, so the run's client stays on the run's loop.
    A provider detected before (a matrix shares one between the cells of a model) is not
    probed again. Sets ``provider.response_format`` and ``provider.format_choice``.
    ``meanwhile``: work for the calling thread while a probe waits for the server (its errors
    are ignored: it may only be something the run would otherwise do later).
    """
    if isinstance(provider.format_choice, FormatChoice):
        return provider.format_choice
    if provider.response_format != AUTO:
        choice = pinned(provider)
    elif provider.official_api:
        choice = FormatChoice(AUTO, "json_schema", "known", provider.server_family)
    else:
        choice = _in_thread(provider, request, policy, conforms, meanwhile)
    provider.response_format = choice.used
    provider.format_choice = choice
    return choice


def _in_thread(
    provider: Probed,
    request: CompletionRequest,
    policy: RetryPolicy,
    conforms: Callable[[str], bool] | None,
    meanwhile: Callable[[], None] | None = None,
) -> FormatChoice:
    async def run() -> FormatChoice:
        twin = provider.clone(response_format="json_schema")
        try:
            return await detect(twin, request, policy, conforms=conforms)
        finally:
            await twin.aclose()

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="format-probe") as pool:
        probing = pool.submit(asyncio.run, run())
        if meanwhile is not None:
            with contextlib.suppress(Exception):  # only work the run would do later anyway
                meanwhile()
        return probing.result()
