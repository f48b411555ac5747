"""The one retry policy for model calls.

Providers only say *whether* a failure is retryable (``ProviderError.retryable``) and how long
the server asked us to wait (``retry_after``); this module decides *how*: bounded attempts,
exponential backoff with jitter, ``Retry-After`` honoured (capped), a per-call timeout. Keeping
it in one place means every provider behaves the same and tests can turn all waits to zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base, wait_exponential_jitter

from extraction_eval.errors import ProviderError

T = TypeVar("T")


class ProviderTimeout(ProviderError, TimeoutError):
    """A call exceeded its per-call timeout; retryable, and still a ``TimeoutError``."""


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded attempts, exponential backoff + jitter, ``Retry-After`` honoured up to a cap."""

    max_attempts: int = 4
    timeout_s: float | None = 60.0  # per call (attempt), not for the whole retry sequence
    initial_wait_s: float = 1.0
    max_wait_s: float = 30.0
    jitter_s: float = 1.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")

    @classmethod
    def immediate(cls, max_attempts: int = 3, timeout_s: float | None = 5.0) -> RetryPolicy:
        """No waiting at all, not even for ``Retry-After``: for tests."""
        return cls(
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            initial_wait_s=0.0,
            max_wait_s=0.0,
            jitter_s=0.0,
            max_retry_after_s=0.0,
        )

    @classmethod
    def from_config(
        cls, *, max_attempts: int, timeout_s: float, extra: Mapping[str, Any]
    ) -> RetryPolicy:
        """Build from a run's config; ``extra`` may tune waits (``retry_initial_wait_s``,
        ``retry_max_wait_s``, ``retry_jitter_s``, ``retry_max_retry_after_s``)."""
        defaults = cls()

        def num(key: str, default: float) -> float:
            value = extra.get(key, default)
            return float(value) if value is not None else default

        return cls(
            max_attempts=max_attempts,
            timeout_s=timeout_s if timeout_s and timeout_s > 0 else None,
            initial_wait_s=num("retry_initial_wait_s", defaults.initial_wait_s),
            max_wait_s=num("retry_max_wait_s", defaults.max_wait_s),
            jitter_s=num("retry_jitter_s", defaults.jitter_s),
            max_retry_after_s=num("retry_max_retry_after_s", defaults.max_retry_after_s),
        )


class _wait_retry_after_or_backoff(wait_base):
    """The server's ``Retry-After`` when it gave one (capped), else exponential backoff."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._cap = policy.max_retry_after_s
        self._backoff = wait_exponential_jitter(
            initial=policy.initial_wait_s, max=policy.max_wait_s, jitter=policy.jitter_s
        )

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, (int, float)) and math.isfinite(retry_after):
            return max(0.0, min(float(retry_after), self._cap))
        return float(self._backoff(retry_state))


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


def _set_attempts(exc: BaseException, attempts: int) -> None:
    with contextlib.suppress(AttributeError):  # __slots__ exceptions: the runner assumes 1
        exc.attempts = attempts  # type: ignore[attr-defined]


async def _one_call(call: Callable[[], Awaitable[T]], timeout_s: float | None) -> T:
    if timeout_s is None:
        return await call()
    try:
        # ``asyncio.timeout`` runs the call in this task; ``wait_for`` (3.11) wraps it in a
        # new task per call, CPU a run at high concurrency feels
        async with asyncio.timeout(timeout_s):
            return await call()
    except TimeoutError:
        raise ProviderTimeout(
            f"model call timed out after {timeout_s:g}s", retryable=True
        ) from None


async def call_with_retry(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_retry: Callable[[BaseException, int, float], None] | None = None,
) -> tuple[T, int]:
    """Run ``call`` under the policy; return its result and the number of attempts used.

    Whatever is finally raised carries ``attempts`` (the calls made), so the runner can record
    it on the item's row. ``on_retry(exc, attempt, wait_s)`` is called before each wait.

    The first attempt is made before tenacity is involved: most calls succeed at once, and
    setting up tenacity's retry loop cost as much CPU as the rest of our per-call work. A
    first attempt that fails is handed to tenacity as its attempt 1 (replayed, not called
    again), so waits, ``on_retry``, the stop and ``attempts`` are exactly the policy's.
    """
    try:
        return await _one_call(call, policy.timeout_s), 1
    except Exception as exc:
        first: Exception | None = exc
    attempts = 0

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            exc = state.outcome.exception()
            wait = state.next_action.sleep if state.next_action else 0.0
            if exc is not None:
                on_retry(exc, state.attempt_number, wait)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts),
        wait=_wait_retry_after_or_backoff(policy),
        retry=retry_if_exception(is_retryable),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                attempts = attempt.retry_state.attempt_number
                if first is not None:  # attempt 1, already made above: its failure
                    failed, first = first, None
                    raise failed
                result = await _one_call(call, policy.timeout_s)
    except Exception as exc:
        _set_attempts(exc, attempts)
        raise
    return result, attempts


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if parsed is None:
            return None
        seconds = parsed.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def retry_after_from_headers(headers: Mapping[str, str] | Any) -> float | None:
    """``retry-after-ms`` (OpenAI's) first, then ``Retry-After``; case-insensitive mappings."""
    if headers is None:
        return None
    getter = getattr(headers, "get", None)
    if getter is None:
        return None
    ms = getter("retry-after-ms") or getter("Retry-After-Ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value):
                return max(0.0, value)
        except (TypeError, ValueError):
            pass
    raw = getter("retry-after") or getter("Retry-After")
    return parse_retry_after(str(raw)) if raw is not None else None


def retryable_status(status: int) -> bool:
    """429 (rate limit), 408/409, 529 (Anthropic's overloaded) and every 5xx are worth
    another attempt: the same rule for every provider (and the fake, which plays them)."""
    return status in (408, 409, 429) or status >= 500


def status_error(
    label: str, status: int, headers: Any, detail: str, *, invalid: bool
) -> ProviderError:
    """An HTTP error answer as a ``ProviderError``: the server's ``x-should-retry`` (OpenAI's
    and Anthropic's SDKs both honour it) overrides the status rule; a refused request body
    (``invalid``) is never retried; ``Retry-After`` is kept only when a retry will come."""
    value = headers.get("x-should-retry") if headers is not None else None
    should = {"true": True, "false": False}.get(value) if isinstance(value, str) else None
    retryable = should if should is not None else retryable_status(status) and not invalid
    return ProviderError(
        f"{label}: {detail}".rstrip(": "),
        retryable=retryable,
        retry_after=retry_after_from_headers(headers) if retryable else None,
        invalid_request=invalid,
    )
