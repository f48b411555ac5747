"""Bounded reads of LangFuse's public API: a server cannot hang, loop or exhaust the tool.

``runs pull`` and ``compare`` / ``report`` pulling a run they lack, and the read-back after a
LangFuse run, read pages of JSON that a server we do not control sends. Each read is bounded
(``ReadLimits``, every bound an environment variable, listed in docs/security.md):

- a **request deadline**: one answer's whole body arrives within it, however it trickles in
  (the HTTP client's own timeout is per read, so a body sent a byte a second never tripped it);
- a **read deadline** for all the reads of one command (``bounded_reads``);
- at most ``max_pages`` pages and ``max_items`` records per walk, and ``max_page_bytes`` per
  answer; a cursor the server sends a second time ends the walk (it would page forever).

A walk that a page or record cap, or a repeated cursor, ends is one ``warn`` line and what was
read is kept; a deadline, an oversized answer or an answer that is not a JSON object is one
``BackendError`` line; a record that is not a JSON object is one line and skipped.

The reads the SDK makes itself (``get_dataset`` walks a dataset's item pages up to the
``totalPages`` the server claims) get the deadlines, the byte cap and the page cap (an error
there: the SDK cannot stop a walk halfway) through an httpx response hook on its client
(``bound_sdk_reads``), active inside ``bounded_reads`` only: ``runs pull`` and a LangFuse-mode
run's dataset load use it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, cast

import httpx

from extraction_eval.backends.langfuse.errors import api_errors
from extraction_eval.errors import BackendError, ConfigError

if TYPE_CHECKING:
    from langfuse import Langfuse
    from langfuse.api.core.request_options import RequestOptions

log = logging.getLogger(__name__)

Warn = Callable[[str], None]

# field -> (variable, whole number?, minimum, maximum)
READ_LIMIT_ENVS: dict[str, tuple[str, bool, float, float]] = {
    "request_deadline_s": ("EXTRACTION_EVAL_LANGFUSE_REQUEST_DEADLINE", False, 0.1, 3600),
    "read_deadline_s": ("EXTRACTION_EVAL_LANGFUSE_READ_DEADLINE", False, 0.1, 86_400),
    "max_pages": ("EXTRACTION_EVAL_LANGFUSE_MAX_PAGES", True, 1, 1_000_000),
    "max_items": ("EXTRACTION_EVAL_LANGFUSE_MAX_ITEMS", True, 1, 100_000_000),
    "max_page_bytes": ("EXTRACTION_EVAL_LANGFUSE_MAX_PAGE_BYTES", True, 1_000, 2**31),
}
_RETRIED = (429, 502, 503, 504)  # a busy server: tried again, within the deadlines
_ATTEMPTS = 3


@dataclass(frozen=True)
class ReadLimits:
    """The bounds of LangFuse reads (defaults well above any real experiment: a 100,000-item
    run is 1,000 pages of 100 items; LangFuse's own pages are at most a few MB)."""

    request_deadline_s: float = 120.0  # one answer, whole body
    read_deadline_s: float = 3600.0  # every read of one command
    max_pages: int = 20_000  # per walk
    max_items: int = 1_000_000  # records per walk
    max_page_bytes: int = 256 * 2**20  # one answer's body

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReadLimits:
        """The defaults, overridden by each variable that is set (one ``ConfigError`` line
        naming a variable that is not a number within its bounds)."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            name, whole, low, high = READ_LIMIT_ENVS[f.name]
            raw = env.get(name, "").strip()
            if not raw:
                continue
            try:
                value: float = int(raw) if whole else float(raw)
                ok = math.isfinite(value) and low <= value <= high
            except ValueError:
                ok = False
            if not ok:
                span = f"{low:,.0f} to {high:,.0f}" if whole else f"{low:g} to {high:g}"
                kind = "a whole number" if whole else "a number"
                raise ConfigError(f"{name} must be {kind} from {span}, got {raw!r}")
            values[f.name] = value
        return cls(**values)


@dataclass
class _Reading:
    limits: ReadLimits
    ends_at: float  # time.monotonic() when the command's reads must be done
    warn: Warn
    # the SDK's own walks (``get_dataset``): requests per (path, query but its page)
    sdk_pages: dict[str, int] = field(default_factory=dict)

    def deadline(self) -> tuple[float, str]:
        """When the request starting now must be done, and which setting says so."""
        ends = time.monotonic() + self.limits.request_deadline_s
        if self.ends_at < ends:
            return self.ends_at, "read_deadline_s"
        return ends, "request_deadline_s"


_CURRENT: ContextVar[_Reading | None] = ContextVar("langfuse_reading", default=None)


def _log_warning(line: str) -> None:
    log.warning("%s", line)


@contextlib.contextmanager
def bounded_reads(warn: Warn | None = None, limits: ReadLimits | None = None) -> Iterator[None]:
    """The reads inside share one read deadline (from now) and report through ``warn``
    (default: a log warning). Outside any, each walk gets its own deadline."""
    limits = limits or ReadLimits.from_env()
    reading = _Reading(limits, time.monotonic() + limits.read_deadline_s, warn or _log_warning)
    token = _CURRENT.set(reading)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _reading() -> _Reading:
    current = _CURRENT.get()
    if current is not None:
        return current
    limits = ReadLimits.from_env()
    return _Reading(limits, time.monotonic() + limits.read_deadline_s, _log_warning)


def warn(line: str) -> None:
    """One line through the current reads' ``warn`` (a skipped record, a walk cut short)."""
    _reading().warn(line)


def get_json(lf: Langfuse, path: str, params: Mapping[str, Any], *, retry: bool = True) -> Any:
    """One GET of ``api/public/{path}`` through the SDK's HTTP client (its auth and base URL),
    its body read as it arrives: whole within the deadlines and ``max_page_bytes``, decoded
    as JSON. ``retry=False`` for a caller that polls and retries itself."""
    reading = _reading()
    limits = reading.limits
    attempts = _ATTEMPTS if retry else 1
    for attempt in range(1, attempts + 1):
        now = time.monotonic()
        if now >= reading.ends_at:
            raise _late(path, limits, "read_deadline_s", 0)
        ends, bound = reading.deadline()
        status, body, retry_after = _get(lf, path, params, ends, limits, bound)
        if status in _RETRIED and attempt < attempts:
            wait = min(retry_after if retry_after is not None else 2.0**attempt, 30.0)
            if time.monotonic() + wait < ends:
                time.sleep(wait)
                continue
        if status >= 400:
            text = body[:200].decode("utf-8", "replace").strip()
            raise BackendError(f"reading {path} failed: HTTP {status} {text}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise BackendError(
                f"reading {path} from LangFuse: the answer is not JSON ({exc})"
            ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _late(path: str, limits: ReadLimits, bound: str, size: int) -> BackendError:
    name = READ_LIMIT_ENVS[bound][0]
    what = "the answer did not arrive" if bound == "request_deadline_s" else "the reads did not end"
    came = f"; {size:,} bytes of the answer came" if size else ""
    return BackendError(
        f"reading {path} from LangFuse: {what} within {getattr(limits, bound):g} s ({name}{came})"
    )


@contextlib.contextmanager
def _named_timeout(path: str, limits: ReadLimits, bound: str, ends: float) -> Iterator[None]:
    """The HTTP client's timeout, when it is the deadline that ran out, said as that."""
    try:
        yield
    except httpx.TimeoutException:
        if time.monotonic() < ends - 0.05:
            raise  # a timeout of the server's own: api_errors says it
        raise _late(path, limits, bound, 0) from None


def _get(
    lf: Langfuse,
    path: str,
    params: Mapping[str, Any],
    ends: float,
    limits: ReadLimits,
    bound: str,
) -> tuple[int, bytes, float | None]:
    """(status, body, Retry-After seconds) of one GET whose body is all in by ``ends``."""
    http = lf.api._client_wrapper.httpx_client
    left = max(ends - time.monotonic(), 0.01)
    chunks: list[bytes] = []
    size = 0
    with (
        api_errors(lf, f"reading {path}"),
        _named_timeout(path, limits, bound, ends),
        http.stream(
            f"api/public/{path}",
            method="GET",
            params=dict(params),
            # each read's timeout (a float: httpx takes one, whatever the hint says); the
            # whole answer's deadline is checked below as its bytes arrive
            request_options=cast("RequestOptions", {"timeout_in_seconds": left}),
        ) as response,
    ):
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limits.max_page_bytes:
                name = READ_LIMIT_ENVS["max_page_bytes"][0]
                raise BackendError(
                    f"reading {path} from LangFuse: the answer is over"
                    f" {limits.max_page_bytes:,} bytes ({name}); nothing more was read"
                )
            chunks.append(chunk)
            if time.monotonic() > ends:
                raise _late(path, limits, bound, size)
        retry_after = response.headers.get("retry-after")
        try:
            wait = float(retry_after) if retry_after is not None else None
        except ValueError:
            wait = None
        return response.status_code, b"".join(chunks), wait


def api_pages(
    lf: Langfuse, path: str, *, retry: bool = True, **params: Any
) -> Iterator[list[dict[str, Any]]]:
    """Cursor pages of a public GET endpoint (``path`` below ``api/public/``) as plain JSON
    objects, within the current ``ReadLimits`` (module docstring).

    Read as JSON rather than through the SDK's generated models: parsing each score into
    those models costs about 4 ms, which made verifying a 1,000-item run take minutes."""
    limits = _reading().limits
    query = {k: v for k, v in params.items() if v is not None}
    cursor: str | None = None
    seen: set[str] = set()
    pages = items = 0
    while True:
        if pages >= limits.max_pages:
            name = READ_LIMIT_ENVS["max_pages"][0]
            warn(f"reading {path}: stopped after {pages:,} pages ({name}); the rest is not read")
            return
        body = get_json(lf, path, {**query, "cursor": cursor}, retry=retry)
        pages += 1
        if not isinstance(body, dict):
            raise BackendError(
                f"reading {path} from LangFuse: the answer is not a JSON object"
                f" (a {type(body).__name__})"
            )
        data = body.get("data")
        records = [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []
        if isinstance(data, list) and len(records) < len(data):
            warn(
                f"reading {path}: page {pages}: {len(data) - len(records)} records are not"
                " JSON objects; skipped"
            )
        elif data is not None and not isinstance(data, list):
            warn(f"reading {path}: page {pages}: 'data' is not a list; skipped")
        room = limits.max_items - items
        if len(records) > room:
            name = READ_LIMIT_ENVS["max_items"][0]
            yield records[:room]
            warn(f"reading {path}: stopped at {limits.max_items:,} records ({name})")
            return
        items += len(records)
        yield records
        meta = body.get("meta")
        cursor = meta.get("cursor") if isinstance(meta, dict) else None
        if not cursor:
            return
        if not isinstance(cursor, str) or cursor in seen:
            warn(
                f"reading {path}: LangFuse sent the same page cursor twice (after page"
                f" {pages}); stopped there"
            )
            return
        seen.add(cursor)


class _BoundedBody(httpx.SyncByteStream):
    """An answer's body as the SDK reads it, within the deadline and the byte cap."""

    def __init__(self, inner: Any, path: str, reading: _Reading) -> None:
        self._inner, self._path, self._reading = inner, path, reading
        self._ends, self._bound = reading.deadline()

    def __iter__(self) -> Iterator[bytes]:
        size = 0
        limits = self._reading.limits
        for chunk in self._inner:
            size += len(chunk)
            if size > limits.max_page_bytes:
                name = READ_LIMIT_ENVS["max_page_bytes"][0]
                raise BackendError(
                    f"reading {self._path} from LangFuse: the answer is over"
                    f" {limits.max_page_bytes:,} bytes ({name}); nothing more was read"
                )
            if time.monotonic() > self._ends:
                raise _late(self._path, limits, self._bound, size)
            yield chunk

    def close(self) -> None:
        self._inner.close()


def _bound_response(response: Any) -> None:
    """httpx response hook: inside ``bounded_reads``, the SDK's own reads (a dataset's item
    pages, which it walks until the server's ``totalPages``) get the same bounds as ours: the
    deadlines and byte cap on each answer, and at most ``max_pages`` requests per walk."""
    reading = _CURRENT.get()
    if reading is None or response.request.method != "GET":
        return
    url = response.request.url
    path = url.path.removeprefix("/api/public/")
    walk = (
        path
        + "?"
        + "&".join(
            f"{k}={v}" for k, v in sorted(url.params.multi_items()) if k not in ("page", "cursor")
        )
    )
    pages = reading.sdk_pages[walk] = reading.sdk_pages.get(walk, 0) + 1
    if pages > reading.limits.max_pages:
        response.close()
        name = READ_LIMIT_ENVS["max_pages"][0]
        raise BackendError(
            f"reading {path} from LangFuse: more than {reading.limits.max_pages:,} pages"
            f" ({name}); nothing more was read"
        )
    response.stream = _BoundedBody(response.stream, path, reading)


def bound_sdk_reads(lf: Langfuse) -> None:
    """Put the bounds of ``bounded_reads`` on the SDK client's own requests as well (a
    response hook, idle outside ``bounded_reads``; added once per client)."""
    client = lf.api._client_wrapper.httpx_client.httpx_client
    hooks = client.event_hooks
    if _bound_response not in hooks.get("response", []):
        hooks["response"] = [*hooks.get("response", []), _bound_response]
        client.event_hooks = hooks
