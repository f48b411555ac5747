"""The one retry policy: what is retried, how long it waits, and how attempts are reported."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from extraction_eval.errors import ProviderError
from extraction_eval.llm.retry import (
    ProviderTimeout,
    RetryPolicy,
    call_with_retry,
    parse_retry_after,
    retry_after_from_headers,
)


class Script:
    """A call that raises the scripted exceptions in order, then returns "ok"."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def run(
    call: Callable[[], Awaitable[Any]], policy: RetryPolicy, sleep: Sleeps | None = None
) -> tuple[Any, int]:
    return asyncio.run(call_with_retry(call, policy, sleep=sleep or Sleeps()))


def retryable(**kw: Any) -> ProviderError:
    return ProviderError("boom", retryable=True, **kw)


NO_JITTER = RetryPolicy(max_attempts=4, initial_wait_s=1.0, max_wait_s=30.0, jitter_s=0.0)


def test_success_on_first_call_uses_one_attempt() -> None:
    call = Script()
    assert run(call, NO_JITTER) == ("ok", 1)
    assert call.calls == 1


def test_retryable_errors_back_off_exponentially_then_succeed() -> None:
    call, sleeps = Script(retryable(), retryable()), Sleeps()
    assert run(call, NO_JITTER, sleeps) == ("ok", 3)
    assert sleeps.waits == [1.0, 2.0]


def test_backoff_is_capped_and_jitter_stays_within_bounds() -> None:
    policy = RetryPolicy(max_attempts=6, initial_wait_s=1.0, max_wait_s=5.0, jitter_s=0.5)
    sleeps = Sleeps()
    run(Script(*(retryable() for _ in range(5))), policy, sleeps)
    assert len(sleeps.waits) == 5
    for n, wait in enumerate(sleeps.waits):
        assert min(2**n, 5.0) <= wait <= min(2**n + 0.5, 5.0)


def test_retry_after_replaces_backoff_and_is_capped() -> None:
    policy = RetryPolicy(max_attempts=4, initial_wait_s=1.0, jitter_s=0.0, max_retry_after_s=10)
    sleeps = Sleeps()
    run(Script(retryable(retry_after=7.0), retryable(retry_after=300.0)), policy, sleeps)
    assert sleeps.waits == [7.0, 10.0]


def test_non_retryable_error_is_raised_at_once_with_one_attempt() -> None:
    call, sleeps = Script(ProviderError("bad request", retryable=False)), Sleeps()
    with pytest.raises(ProviderError, match="bad request") as info:
        run(call, NO_JITTER, sleeps)
    assert call.calls == 1 and info.value.attempts == 1 and sleeps.waits == []


def test_other_exceptions_are_not_retried_but_carry_attempts() -> None:
    call = Script(retryable(), ValueError("bug"))
    with pytest.raises(ValueError, match="bug") as info:
        run(call, NO_JITTER)
    assert call.calls == 2
    assert info.value.attempts == 2  # type: ignore[attr-defined]


def test_attempts_are_bounded_and_reported_on_the_last_error() -> None:
    call = Script(*(retryable() for _ in range(10)))
    with pytest.raises(ProviderError) as info:
        run(call, RetryPolicy.immediate(max_attempts=3))
    assert call.calls == 3 and info.value.attempts == 3


def test_per_call_timeout_is_a_retryable_timeout_error() -> None:
    calls = 0

    async def hang() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(5)
        return "late"

    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        run(hang, RetryPolicy.immediate(max_attempts=2, timeout_s=0.05))
    assert time.monotonic() - started < 2
    assert calls == 2 and info.value.attempts == 2
    assert isinstance(info.value, TimeoutError) and info.value.retryable


def test_immediate_policy_ignores_retry_after() -> None:
    sleeps = Sleeps()
    run(Script(retryable(retry_after=30.0)), RetryPolicy.immediate(), sleeps)
    assert sleeps.waits == [0.0]


def test_on_retry_sees_each_failure_and_wait() -> None:
    seen: list[tuple[str, int, float]] = []
    asyncio.run(
        call_with_retry(
            Script(retryable(retry_after=0.0), retryable(retry_after=0.0)),
            NO_JITTER,
            sleep=Sleeps(),
            on_retry=lambda exc, attempt, wait: seen.append((str(exc), attempt, wait)),
        )
    )
    assert seen == [("boom", 1, 0.0), ("boom", 2, 0.0)]


def test_policy_from_config_reads_wait_overrides() -> None:
    policy = RetryPolicy.from_config(
        max_attempts=5, timeout_s=12.0, extra={"retry_initial_wait_s": 0, "retry_jitter_s": 0}
    )
    assert (policy.max_attempts, policy.timeout_s) == (5, 12.0)
    assert policy.initial_wait_s == 0.0 and policy.jitter_s == 0.0
    assert policy.max_retry_after_s == RetryPolicy().max_retry_after_s
    assert RetryPolicy.from_config(max_attempts=1, timeout_s=0, extra={}).timeout_s is None
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_parse_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-4") == 0.0
    now = time.time()
    date = email.utils.formatdate(now + 20, usegmt=True)
    parsed = parse_retry_after(date, now=now)
    assert parsed is not None and 18.5 <= parsed <= 20.5
    for bad in (None, "", "soon", "nan", "inf"):
        assert parse_retry_after(bad) is None


def test_retry_after_headers_prefer_milliseconds() -> None:
    assert retry_after_from_headers({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_from_headers({"Retry-After": "9"}) == 9.0
    assert retry_after_from_headers({}) is None
    assert retry_after_from_headers(None) is None


def test_a_first_call_that_succeeds_never_sets_up_tenacity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from extraction_eval.llm import retry

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("tenacity set up for a call that succeeded at once")

    monkeypatch.setattr(retry, "AsyncRetrying", refuse)
    assert run(Script(), NO_JITTER) == ("ok", 1)
