"""A loopback fake LangFuse server for integration tests of the real ``langfuse`` SDK.

It implements the endpoints SDK 5.0.4 calls, with request and response shapes taken from the
SDK's generated client (``langfuse/api/*/raw_client.py`` and its pydantic types) and the
server's OpenAPI file, keeps what it receives in memory, and records every request so tests
assert on what *arrived* rather than on mocks of our own code.

Endpoints (all under ``/api/public``)::

    GET    /projects                                   auth check, project id
    GET    /health                                     {status, version} (``server_version``)
    POST   /score-configs          GET /score-configs  create / list (page, limit)
    POST   /v2/datasets            GET /v2/datasets    upsert by name / list (page, limit)
    GET    /v2/datasets/{name}                         404 when missing; name is url-decoded
    POST   /dataset-items                              upsert by id (ids are project-wide)
    GET    /dataset-items                              datasetName, sourceTraceId,
                                                       sourceObservationId, version, page, limit
    GET    /dataset-items/{id}     DELETE /dataset-items/{id}
    POST   /scores                                     JSON array -> 202 / 207
    GET    /v3/scores                                  filters, field groups, cursor
    POST   /v2/prompts             GET /v2/prompts     create a version / list
    GET    /v2/prompts/{name}                          ?label= | ?version= (default production)
    PATCH  /v2/prompts/{name}/versions/{version}       move labels
    GET    /v2/observations                            filters + ``filter`` JSON, fields, cursor
    POST   /otel/v1/traces                             OTLP protobuf (gzip), decoded to dicts
    GET    /experiments            GET /experiment-items   derived from experiment spans
    /annotation-queues (+ items, assignments), /comments   ``langfuse_queues``

Fault switches: :meth:`FakeLangfuse.fail_next` (N x 429 + Retry-After, or 5xx, per path),
:meth:`FakeLangfuse.reject_scores` (400 for whole batches, or 207 naming scores),
:meth:`FakeLangfuse.down` / :meth:`FakeLangfuse.up` (refuse connections, or accept and drop
them). :meth:`FakeLangfuse.seed_trace` stores a production trace (root observation + scores)
for seeding tests.

Only ever binds 127.0.0.1. Secrets are never recorded: the ``Authorization`` header is dropped
from the request log.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gzip
import hashlib
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.support.langfuse_queues import QueueRoutes, QueueState

JSON = Any
Query = dict[str, list[str]]

_REDACTED_HEADERS = {"authorization", "proxy-authorization", "cookie"}
_STATUS_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}


# --- small helpers ------------------------------------------------------------------------


def _now() -> datetime:
    """Now, at the millisecond precision LangFuse stores (so a timestamp read back selects
    exactly what it names)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def iso(ts: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z``, as LangFuse answers."""
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_ts(value: str) -> datetime:
    ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _ns_to_dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def _json_or_raw(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _first(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _csv(query: Query, name: str) -> list[str] | None:
    values = query.get(name)
    if not values:
        return None
    out = [v.strip() for raw in values for v in raw.split(",") if v.strip()]
    return out or None


def _bool_param(query: Query, name: str) -> bool | None:
    value = _first(query, name)
    if value is None:
        return None
    return value.lower() == "true"


def _int_param(query: Query, name: str, default: int) -> int:
    value = _first(query, name)
    if value is None or value == "":
        return default
    return int(value)


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(cursor.encode()))["offset"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise _HttpError(400, f"invalid cursor: {exc}") from None


def _page_meta(page: int, limit: int, total: int) -> dict[str, int]:
    pages = (total + limit - 1) // limit if limit else 0
    return {"page": page, "limit": limit, "totalItems": total, "totalPages": pages}


def _paginate(
    rows: Sequence[Any], query: Query, default_limit: int = 50
) -> tuple[list[Any], dict[str, int]]:
    page = max(_int_param(query, "page", 1), 1)
    limit = max(_int_param(query, "limit", default_limit), 1)
    start = (page - 1) * limit
    return list(rows[start : start + limit]), _page_meta(page, limit, len(rows))


def _cursor_page(
    rows: Sequence[Any], query: Query, *, default_limit: int, max_limit: int
) -> tuple[list[Any], str | None, int]:
    limit = _int_param(query, "limit", default_limit)
    if limit < 1 or limit > max_limit:
        raise _HttpError(400, f"limit must be between 1 and {max_limit}")
    offset = _decode_cursor(_first(query, "cursor"))
    chunk = list(rows[offset : offset + limit])
    more = offset + limit < len(rows)
    return chunk, (_encode_cursor(offset + limit) if more else None), limit


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- OTLP decoding ------------------------------------------------------------------------


def _any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def _attributes(attrs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in attrs}


def decode_otlp(payload: bytes) -> list[dict[str, Any]]:
    """An OTLP ``ExportTraceServiceRequest`` as a list of plain span dicts."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(payload)
    spans: list[dict[str, Any]] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = {
                "name": scope_spans.scope.name,
                "version": scope_spans.scope.version,
                "attributes": _attributes(scope_spans.scope.attributes),
            }
            for span in scope_spans.spans:
                spans.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex() or None,
                        "name": span.name,
                        "kind": int(span.kind),
                        "start_time_unix_nano": span.start_time_unix_nano,
                        "end_time_unix_nano": span.end_time_unix_nano,
                        "attributes": _attributes(span.attributes),
                        "status": {
                            "code": _STATUS_NAMES.get(int(span.status.code), "UNSET"),
                            "message": span.status.message,
                        },
                        "events": [
                            {
                                "name": event.name,
                                "time_unix_nano": event.time_unix_nano,
                                "attributes": _attributes(event.attributes),
                            }
                            for event in span.events
                        ],
                        "scope": scope,
                        "resource": resource,
                    }
                )
    return spans


_OBS_META_PREFIX = "langfuse.observation.metadata"
_TRACE_META_PREFIX = "langfuse.trace.metadata"


def _prefixed(attrs: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if key.startswith(prefix + "."):
            out[key[len(prefix) + 1 :]] = _json_or_raw(value)
        elif key == prefix:
            decoded = _json_or_raw(value)
            if isinstance(decoded, dict):
                out.update(decoded)
            else:
                out["metadata"] = decoded
    return out


def span_to_observation(span: Mapping[str, Any], project_id: str) -> dict[str, Any]:
    """What LangFuse's ingestion would make of one span: an observation record.

    The record carries every v2 field (grouped by :data:`FIELD_GROUPS` when served) plus
    private ``_``-prefixed keys the fake uses for trace-level views and experiments.
    """
    attrs: Mapping[str, Any] = span["attributes"]
    resource: Mapping[str, Any] = span.get("resource", {})
    usage = _json_or_raw(attrs.get("langfuse.observation.usage_details"))
    cost = _json_or_raw(attrs.get("langfuse.observation.cost_details"))
    status = span.get("status", {})
    level = attrs.get("langfuse.observation.level") or (
        "ERROR" if status.get("code") == "ERROR" else "DEFAULT"
    )
    prompt_version = attrs.get("langfuse.observation.prompt.version")
    completion_start = _json_or_raw(attrs.get("langfuse.observation.completion_start_time"))
    tags = attrs.get("langfuse.trace.tags")
    parent = span.get("parent_span_id")
    end_ns = int(span.get("end_time_unix_nano") or 0)
    return {
        "id": span["span_id"],
        "traceId": span["trace_id"],
        "startTime": iso(_ns_to_dt(int(span["start_time_unix_nano"]))),
        "endTime": iso(_ns_to_dt(end_ns)) if end_ns else None,
        "projectId": project_id,
        "parentObservationId": parent,
        "type": str(attrs.get("langfuse.observation.type") or "span").upper(),
        "name": span.get("name"),
        "level": level,
        "statusMessage": attrs.get("langfuse.observation.status_message")
        or status.get("message")
        or None,
        "version": attrs.get("langfuse.version"),
        "environment": attrs.get("langfuse.environment")
        or resource.get("langfuse.environment")
        or "default",
        "bookmarked": False,
        "public": False,
        "userId": attrs.get("user.id"),
        "sessionId": attrs.get("session.id"),
        "isRootObservation": parent is None or bool(attrs.get("langfuse.internal.is_app_root")),
        "completionStartTime": completion_start if isinstance(completion_start, str) else None,
        "createdAt": iso(_now()),
        "updatedAt": iso(_now()),
        "input": attrs.get("langfuse.observation.input"),
        "output": attrs.get("langfuse.observation.output"),
        "metadata": _prefixed(attrs, _OBS_META_PREFIX),
        "model": attrs.get("langfuse.observation.model.name"),
        "internalModelId": None,
        "modelParameters": _json_or_raw(attrs.get("langfuse.observation.model.parameters")),
        "usageDetails": usage if isinstance(usage, dict) else None,
        "costDetails": cost if isinstance(cost, dict) else None,
        "totalCost": sum(cost.values()) if isinstance(cost, dict) and cost else None,
        "usagePricingTierName": None,
        "promptId": None,
        "promptName": attrs.get("langfuse.observation.prompt.name"),
        "promptVersion": int(prompt_version) if prompt_version is not None else None,
        "latency": (end_ns - int(span["start_time_unix_nano"])) / 1e9 if end_ns else None,
        "timeToFirstToken": None,
        "traceName": attrs.get("langfuse.trace.name"),
        "tags": list(tags) if isinstance(tags, list) else None,
        "release": attrs.get("langfuse.release") or resource.get("langfuse.release"),
        "_trace_metadata": _prefixed(attrs, _TRACE_META_PREFIX),
        "_attributes": dict(attrs),
    }


FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "core": ("id", "traceId", "startTime", "endTime", "projectId", "parentObservationId", "type"),
    "basic": (
        "name",
        "level",
        "statusMessage",
        "version",
        "environment",
        "bookmarked",
        "public",
        "userId",
        "sessionId",
        "isRootObservation",
    ),
    "time": ("completionStartTime", "createdAt", "updatedAt"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("model", "internalModelId", "modelParameters"),
    "usage": ("usageDetails", "costDetails", "totalCost", "usagePricingTierName"),
    "prompt": ("promptId", "promptName", "promptVersion"),
    "metrics": ("latency", "timeToFirstToken"),
    "trace_context": ("tags", "release", "traceName"),
}


# --- recorded requests and faults ---------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    """One request as it arrived (``Authorization`` removed) and the status it got."""

    method: str
    path: str  # url-decoded, without the query string
    raw_path: str  # as sent, still percent-encoded
    query: Query
    headers: dict[str, str]  # lower-case names
    body: Any  # JSON value; list of span dicts for OTLP; text otherwise; None when empty
    public_key: str | None
    status: int = 0

    def param(self, name: str) -> str | None:
        return _first(self.query, name)


@dataclass
class _Fault:
    path: str  # exact path, or a prefix when it ends with "*"
    method: str | None
    remaining: int
    status: int
    retry_after: str | None

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method:
            return False
        if self.path.endswith("*"):
            return path.startswith(self.path[:-1])
        return path == self.path


@dataclass(frozen=True)
class RawAnswer:
    """What a hostile server sends instead of a JSON answer: these bytes as the body (with a
    Content-Length), each after ``drip_s`` when set (a slow-drip body)."""

    payload: bytes
    drip_s: float = 0.0


# A hostile server (``FakeLangfuse.rewrite``): (query, the honest answer) -> the answer sent,
# a JSON value or a RawAnswer
Rewrite = Callable[[Query, Any], Any]


@dataclass(frozen=True)
class SeededTrace:
    trace_id: str
    observation_id: str


@dataclass
class _State:
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)  # by name
    # item id -> list of (valid_from, snapshot or None when deleted)
    items: dict[str, list[tuple[datetime, dict[str, Any] | None]]] = field(default_factory=dict)
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)  # by id
    prompts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # name -> versions
    observations: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    spans: list[dict[str, Any]] = field(default_factory=list)
    score_configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # by id


Handler = Callable[["_Request"], tuple[int, Any]]


@dataclass
class _Request:
    method: str
    path: str
    query: Query
    body: Any
    params: tuple[str, ...]


# --- the server ---------------------------------------------------------------------------


class FakeLangfuse(QueueRoutes):
    """In-memory LangFuse on 127.0.0.1 that records requests; use as a context manager.

    Keys: every pair passed to the constructor or added with :meth:`new_keys` is accepted;
    anything else gets 401. Tests should use a fresh pair per Langfuse client, because the SDK
    keeps one client per public key for the whole process.
    """

    def __init__(
        self,
        *,
        keys: Mapping[str, str] | None = None,
        project_id: str = "proj-fake",
        project_name: str = "extraction-eval-fake",
        server_version: str = "4.59.0",
    ) -> None:
        self.project_id = project_id
        self.server_version = server_version  # what GET /health reports
        self.project_name = project_name
        self._keys: dict[str, str] = dict(keys or {})
        self._lock = threading.RLock()
        self._state = _State()
        # item listings by query, sorted, until an item changes: a page is then a slice, not
        # a walk of every item's history (a 100k-item dataset is read in 1,000 pages)
        self._listings: dict[tuple[str | None, ...], list[dict[str, Any]]] = {}
        self._queues = QueueState()
        self.requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        self._reject_scores_status: int | None = None
        self._reject_score_names: set[str] = set()
        self._lose_score_names: set[str] = set()
        self._lost: set[str] = set()
        self._score_delay_s = 0.0
        self._drop_connections = False
        self._rewrites: dict[str, Rewrite] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self._key_counter = 0
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = self._build_routes()

    # lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeLangfuse:
        if self._httpd is not None:
            return self
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        httpd.daemon_threads = True
        self._port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._close_listener()

    def _close_listener(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLangfuse:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # keys -----------------------------------------------------------------------------------

    def add_keys(self, public_key: str, secret_key: str) -> None:
        with self._lock:
            self._keys[public_key] = secret_key

    def new_keys(self, label: str = "test") -> tuple[str, str]:
        """A fresh accepted (public, secret) pair, unique in this process."""
        with self._lock:
            self._key_counter += 1
            suffix = f"{label}-{self._key_counter}-{uuid.uuid4().hex[:8]}"
        public, secret = f"pk-lf-{suffix}", f"sk-lf-{suffix}"
        self.add_keys(public, secret)
        return public, secret

    # fault switches -------------------------------------------------------------------------

    def fail_next(
        self,
        path: str,
        times: int = 1,
        *,
        status: int = 429,
        retry_after: str | None = "1",
        method: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests to ``path`` (prefix when it ends with ``*``) with
        ``status``; a 429 carries ``Retry-After`` (whole seconds: the SDK's REST client
        ignores fractions)."""
        with self._lock:
            self._faults.append(
                _Fault(path, method, times, status, retry_after if status == 429 else None)
            )

    def reject_scores(self, status: int | None = 400, *, names: Iterable[str] = ()) -> None:
        """``status`` (e.g. 400) rejects every score batch; ``names`` rejects only scores
        with those names in a 207 answer. ``reject_scores(None)`` switches both off."""
        with self._lock:
            self._reject_scores_status = status
            self._reject_score_names = set(names)

    def lose_scores(self, names: Iterable[str]) -> None:
        """Answer 202 but store nothing of the scores with these names, once per score id
        (a server that lost them): a second post of the same id is stored."""
        with self._lock:
            self._lose_score_names = set(names)

    def slow_scores(self, seconds: float) -> None:
        """Store each score batch, then wait ``seconds`` before answering (a slow server:
        past the client's timeout the batch has arrived all the same)."""
        self._score_delay_s = seconds

    def rewrite(self, path: str, fn: Rewrite | None) -> None:
        """A hostile server: every answer to ``GET path`` goes through ``fn(query, answer)``
        and what it returns is sent with a 200 (a JSON value, or a :class:`RawAnswer`); the
        honest answer (an error's body included) is computed first. None: honest again."""
        with self._lock:
            if fn is None:
                self._rewrites.pop(path, None)
            else:
                self._rewrites[path] = fn

    def down(self, mode: Literal["refuse", "drop"] = "refuse") -> None:
        """``refuse``: stop listening (connection refused); ``drop``: accept connections and
        close them without an answer."""
        if mode == "drop":
            self._drop_connections = True
            return
        self._close_listener()

    def up(self) -> None:
        """Serve again on the same port after :meth:`down`."""
        self._drop_connections = False
        self.start()

    # seeding --------------------------------------------------------------------------------

    def seed_trace(
        self,
        *,
        input: Any,
        output: Any,
        trace_id: str | None = None,
        observation_id: str | None = None,
        name: str = "extract",
        trace_name: str | None = None,
        tags: Sequence[str] = (),
        start_time: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        scores: Sequence[Mapping[str, Any]] = (),
        environment: str = "production",
        level: str = "DEFAULT",
        user_id: str | None = None,
    ) -> SeededTrace:
        """Store a production trace's root observation directly, as ingestion would.

        ``input`` / ``output`` are stored like the SDK sends them: strings as they are, other
        values JSON-encoded (v2 observations return them as raw strings). Each score is a
        mapping with ``name``, ``value`` and optionally ``dataType``, ``comment``,
        ``source``, ``observationId``, ``timestamp``.
        """
        seed = uuid.uuid4().hex
        trace_id = trace_id or hashlib.sha256(seed.encode()).hexdigest()[:32]
        observation_id = observation_id or hashlib.sha256((seed + "o").encode()).hexdigest()[:16]
        start = start_time or _now()
        record = {
            "id": observation_id,
            "traceId": trace_id,
            "startTime": iso(start),
            "endTime": iso(start + timedelta(milliseconds=250)),
            "projectId": self.project_id,
            "parentObservationId": None,
            "type": "SPAN",
            "name": name,
            "level": level,
            "statusMessage": None,
            "version": None,
            "environment": environment,
            "bookmarked": False,
            "public": False,
            "userId": user_id,
            "sessionId": None,
            "isRootObservation": True,
            "completionStartTime": None,
            "createdAt": iso(start),
            "updatedAt": iso(start),
            "input": None
            if input is None
            else input
            if isinstance(input, str)
            else json.dumps(input),
            "output": None
            if output is None
            else output
            if isinstance(output, str)
            else json.dumps(output),
            "metadata": dict(metadata or {}),
            "model": None,
            "internalModelId": None,
            "modelParameters": None,
            "usageDetails": None,
            "costDetails": None,
            "totalCost": None,
            "usagePricingTierName": None,
            "promptId": None,
            "promptName": None,
            "promptVersion": None,
            "latency": 0.25,
            "timeToFirstToken": None,
            "traceName": trace_name or name,
            "tags": list(tags),
            "release": None,
            "_trace_metadata": {},
            "_attributes": {},
        }
        with self._lock:
            self._state.observations[(trace_id, observation_id)] = record
            for i, score in enumerate(scores):
                body = {
                    "id": score.get("id") or f"seed-{trace_id}-{i}",
                    "traceId": trace_id,
                    "name": score["name"],
                    "value": score["value"],
                    "environment": environment,
                    **{
                        k: score[k]
                        for k in ("dataType", "comment", "source", "observationId", "timestamp")
                        if k in score
                    },
                }
                error = self._validate_score(body)
                if error:
                    raise ValueError(f"seed score {score!r}: {error}")
                self._store_score(body)
        return SeededTrace(trace_id, observation_id)

    # views for assertions -------------------------------------------------------------------

    def requests_to(self, path: str, method: str | None = None) -> list[RecordedRequest]:
        """Recorded requests whose path equals ``path`` (a prefix when it ends with ``*``)."""
        with self._lock:
            out = list(self.requests)
        return [
            r
            for r in out
            if (r.path.startswith(path[:-1]) if path.endswith("*") else r.path == path)
            and (method is None or r.method == method.upper())
        ]

    @property
    def spans(self) -> list[dict[str, Any]]:
        """Every OTLP span received, decoded, in arrival order."""
        with self._lock:
            return list(self._state.spans)

    def spans_named(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"] == name]

    @property
    def scores(self) -> list[dict[str, Any]]:
        """Stored scores (accepted ones only), as posted plus server fields."""
        with self._lock:
            return [dict(s) for s in self._state.scores.values()]

    @property
    def posted_scores(self) -> list[dict[str, Any]]:
        """Every score body that reached ``POST /scores``, accepted or not."""
        out: list[dict[str, Any]] = []
        for r in self.requests_to("/api/public/scores", "POST"):
            if isinstance(r.body, list):
                out.extend(s for s in r.body if isinstance(s, dict))
        return out

    def dataset_items(self, dataset: str | None = None) -> list[dict[str, Any]]:
        """Current (non-deleted) items, optionally of one dataset, as the API returns them."""
        with self._lock:
            items = [self._item_at(i, None) for i in self._state.items]
        return [
            i for i in items if i is not None and (dataset is None or i["datasetName"] == dataset)
        ]

    @property
    def datasets(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: dict(v) for k, v in self._state.datasets.items()}

    def prompt_versions(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(p) for p in self._state.prompts.get(name, [])]

    def observations(self, trace_id: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            rows = list(self._state.observations.values())
        return [dict(o) for o in rows if trace_id is None or o["traceId"] == trace_id]

    def reset_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    # request entry point (called from handler threads) ---------------------------------------

    def _check_auth(self, header: str | None) -> tuple[str | None, bool]:
        if not header or not header.lower().startswith("basic "):
            return None, False
        try:
            decoded = base64.b64decode(header.split(" ", 1)[1]).decode()
        except (ValueError, binascii.Error):
            return None, False
        public, _, secret = decoded.partition(":")
        with self._lock:
            return public, self._keys.get(public) == secret

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.matches(method, path):
                    fault.remaining -= 1
                    return fault
        return None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _dispatch(
        self, method: str, path: str, raw_path: str, query: Query, body: Any
    ) -> tuple[int, Any]:
        for route_method, pattern, handler in self._routes:
            if route_method != method:
                continue
            match = pattern.fullmatch(raw_path)
            if match:
                params = tuple(unquote(g) for g in match.groups())
                with self._lock:
                    return handler(_Request(method, path, query, body, params))
        return 404, {"message": f"fake LangFuse has no route {method} {path}"}

    # routes ---------------------------------------------------------------------------------

    def _build_routes(self) -> list[tuple[str, re.Pattern[str], Handler]]:
        seg = r"([^/]+)"
        table: list[tuple[str, str, Handler]] = [
            ("GET", "/api/public/projects", self._projects),
            ("GET", "/api/public/health", self._health),
            ("POST", "/api/public/score-configs", self._create_score_config),
            ("GET", "/api/public/score-configs", self._list_score_configs),
            ("POST", "/api/public/v2/datasets", self._create_dataset),
            ("GET", "/api/public/v2/datasets", self._list_datasets),
            ("GET", f"/api/public/v2/datasets/{seg}", self._get_dataset),
            ("POST", "/api/public/dataset-items", self._upsert_item),
            ("GET", "/api/public/dataset-items", self._list_items),
            ("GET", f"/api/public/dataset-items/{seg}", self._get_item),
            ("DELETE", f"/api/public/dataset-items/{seg}", self._delete_item),
            ("POST", "/api/public/scores", self._create_scores),
            ("GET", "/api/public/v3/scores", self._get_scores),
            ("POST", "/api/public/v2/prompts", self._create_prompt),
            ("GET", "/api/public/v2/prompts", self._list_prompts),
            ("GET", f"/api/public/v2/prompts/{seg}", self._get_prompt),
            ("PATCH", f"/api/public/v2/prompts/{seg}/versions/{seg}", self._update_prompt_labels),
            ("GET", "/api/public/v2/observations", self._get_observations),
            ("POST", "/api/public/otel/v1/traces", self._otel_traces),
            ("GET", "/api/public/experiments", self._list_experiments),
            ("GET", "/api/public/experiment-items", self._list_experiment_items),
            *self.queue_routes(seg),
        ]
        return [(m, re.compile(p), h) for m, p, h in table]

    # projects

    def _health(self, req: _Request) -> tuple[int, Any]:
        return 200, {"status": "OK", "version": self.server_version}

    # score configs

    def _create_score_config(self, req: _Request) -> tuple[int, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        name, data_type = body.get("name"), body.get("dataType")
        if not isinstance(name, str) or not name:
            return 400, {"message": "name is required"}
        if data_type not in ("NUMERIC", "BOOLEAN", "CATEGORICAL", "TEXT"):
            return 400, {"message": f"invalid dataType {data_type!r}"}
        if data_type == "CATEGORICAL" and not body.get("categories"):
            return 400, {"message": "categorical configs need categories"}
        categories = body.get("categories")
        if data_type == "BOOLEAN":
            categories = [{"label": "True", "value": 1}, {"label": "False", "value": 0}]
        now = iso(_now())
        config = {
            "id": str(uuid.uuid4()),
            "name": name,
            "dataType": data_type,
            "isArchived": False,
            "minValue": body.get("minValue"),
            "maxValue": body.get("maxValue"),
            "categories": categories,
            "description": body.get("description"),
            "projectId": self.project_id,
            "createdAt": now,
            "updatedAt": now,
        }
        self._state.score_configs[config["id"]] = config
        return 200, dict(config)

    def _list_score_configs(self, req: _Request) -> tuple[int, Any]:
        rows = sorted(self._state.score_configs.values(), key=lambda c: c["createdAt"])
        page, meta = _paginate([dict(c) for c in rows], req.query)
        return 200, {"data": page, "meta": meta}

    @property
    def score_configs(self) -> dict[str, dict[str, Any]]:
        """Stored score configs by id."""
        with self._lock:
            return {k: dict(v) for k, v in self._state.score_configs.items()}

    def _check_config(self, score: Mapping[str, Any]) -> str | None:
        """LangFuse validates a score against its config: name, type, range, categories."""
        config = self._state.score_configs.get(str(score.get("configId")))
        if config is None:
            return f"score {score['name']}: no score config {score.get('configId')!r}"
        if config["name"] != score["name"]:
            return f"score {score['name']}: config {config['id']} is for {config['name']!r}"
        data_type = score.get("dataType") or config["dataType"]
        if data_type != config["dataType"]:
            return f"score {score['name']}: config wants {config['dataType']}"
        value = score["value"]
        if config["dataType"] == "NUMERIC":
            low, high = config.get("minValue"), config.get("maxValue")
            if (low is not None and value < low) or (high is not None and value > high):
                return f"score {score['name']}: {value} outside [{low}, {high}]"
        if config["dataType"] == "CATEGORICAL":
            labels = {c["label"] for c in config["categories"] or []}
            if value not in labels:
                return f"score {score['name']}: {value!r} is not a category of its config"
        return None

    def _projects(self, req: _Request) -> tuple[int, Any]:
        return 200, {
            "data": [
                {
                    "id": self.project_id,
                    "name": self.project_name,
                    "organization": {"id": "org-fake", "name": "Fake Org"},
                    "metadata": {},
                }
            ]
        }

    # datasets

    def _create_dataset(self, req: _Request) -> tuple[int, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        name = body.get("name")
        if not isinstance(name, str) or not name:
            return 400, {"message": "name is required"}
        now = iso(_now())
        existing = self._state.datasets.get(name)
        if existing is None:
            existing = {
                "id": "ds-" + uuid.uuid4().hex[:12],
                "name": name,
                "description": None,
                "metadata": None,
                "inputSchema": None,
                "expectedOutputSchema": None,
                "projectId": self.project_id,
                "createdAt": now,
                "updatedAt": now,
            }
            self._state.datasets[name] = existing
        for key in ("description", "metadata", "inputSchema", "expectedOutputSchema"):
            if key in body and body[key] is not None:
                existing[key] = body[key]
        existing["updatedAt"] = now
        return 200, dict(existing)

    def _list_datasets(self, req: _Request) -> tuple[int, Any]:
        rows = sorted(self._state.datasets.values(), key=lambda d: d["createdAt"], reverse=True)
        page, meta = _paginate([dict(d) for d in rows], req.query)
        return 200, {"data": page, "meta": meta}

    def _get_dataset(self, req: _Request) -> tuple[int, Any]:
        dataset = self._state.datasets.get(req.params[0])
        if dataset is None:
            return 404, {"message": f"Dataset {req.params[0]} not found"}
        return 200, dict(dataset)

    # dataset items (kept with their history, so ?version= reads the past)

    def _item_at(self, item_id: str, at: datetime | None) -> dict[str, Any] | None:
        history = self._state.items.get(item_id, [])
        current: dict[str, Any] | None = None
        for valid_from, snapshot in history:
            if at is not None and valid_from > at:
                break
            current = snapshot
        return dict(current) if current is not None else None

    def _upsert_item(self, req: _Request) -> tuple[int, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        dataset_name = body.get("datasetName")
        dataset = self._state.datasets.get(dataset_name) if isinstance(dataset_name, str) else None
        if dataset is None:
            return 404, {"message": f"Dataset {dataset_name} not found"}
        item_id = body.get("id") or str(uuid.uuid4())
        if not isinstance(item_id, str) or len(item_id) > 255:
            return 400, {"message": "id must be a string of at most 255 characters"}
        previous = self._item_at(item_id, None)
        if previous is not None and previous["datasetId"] != dataset["id"]:
            return 400, {"message": f"Dataset item id {item_id} already exists in another dataset"}
        now = _now()
        status = body.get("status") or (previous or {}).get("status") or "ACTIVE"
        if status not in ("ACTIVE", "ARCHIVED"):
            return 400, {"message": f"invalid status {status!r}"}
        snapshot = {
            "id": item_id,
            "status": status,
            "input": body.get("input"),
            "expectedOutput": body.get("expectedOutput"),
            "metadata": body.get("metadata"),
            "sourceTraceId": body.get("sourceTraceId"),
            "sourceObservationId": body.get("sourceObservationId"),
            "datasetId": dataset["id"],
            "datasetName": dataset["name"],
            "createdAt": previous["createdAt"] if previous else iso(now),
            "updatedAt": iso(now),
            "version": iso(now),
            "mediaReferences": [],
        }
        self._state.items.setdefault(item_id, []).append((now, snapshot))
        self._listings.clear()
        return 200, dict(snapshot)

    def _list_items(self, req: _Request) -> tuple[int, Any]:
        name = _first(req.query, "datasetName")
        version = _first(req.query, "version")
        at = parse_ts(version) if version else None
        trace = _first(req.query, "sourceTraceId")
        observation = _first(req.query, "sourceObservationId")
        if name is not None and name not in self._state.datasets:
            return 404, {"message": f"Dataset {name} not found"}
        key = (name, version, trace, observation)
        rows = self._listings.get(key)
        if rows is None:
            rows = self._listings[key] = self._listing(name, at, trace, observation)
        page, meta = _paginate(rows, req.query)
        return 200, {"data": page, "meta": meta}

    def _listing(self, name: str | None, at: datetime | None, trace: str | None,
                 observation: str | None) -> list[dict[str, Any]]:  # fmt: skip
        rows = []
        for item_id in self._state.items:
            item = self._item_at(item_id, at)
            if item is None:
                continue
            if name is not None and item["datasetName"] != name:
                continue
            if trace is not None and item["sourceTraceId"] != trace:
                continue
            if observation is not None and item["sourceObservationId"] != observation:
                continue
            rows.append(item)
        rows.sort(key=lambda i: (i["createdAt"], i["id"]), reverse=True)
        return rows

    def _get_item(self, req: _Request) -> tuple[int, Any]:
        item = self._item_at(req.params[0], None)
        if item is None:
            return 404, {"message": "Dataset item not found"}
        return 200, item

    def _delete_item(self, req: _Request) -> tuple[int, Any]:
        item = self._item_at(req.params[0], None)
        if item is None:
            return 404, {"message": "Dataset item not found"}
        self._state.items[req.params[0]].append((_now(), None))
        self._listings.clear()
        return 200, {"message": "Dataset item deleted successfully"}

    # scores

    @staticmethod
    def _validate_score(score: Any) -> str | None:
        if not isinstance(score, dict):
            return "score must be an object"
        if not isinstance(score.get("name"), str) or not score["name"]:
            return "name is required"
        if "value" not in score or score["value"] is None:
            return f"score {score['name']}: value is required"
        if not any(score.get(k) for k in ("traceId", "sessionId", "datasetRunId")):
            return f"score {score['name']}: one of traceId, sessionId, datasetRunId is required"
        if score.get("observationId") and not score.get("traceId"):
            return f"score {score['name']}: observationId requires traceId"
        value = score["value"]
        data_type = score.get("dataType")
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if data_type == "NUMERIC" and not numeric:
            return f"score {score['name']}: NUMERIC needs a number"
        if data_type is None and not (numeric or isinstance(value, (str, bool))):
            return f"score {score['name']}: value must be a number or a string"
        if data_type == "BOOLEAN" and value not in (0, 1, True, False):
            return f"score {score['name']}: BOOLEAN needs 0 or 1"
        if data_type in ("CATEGORICAL", "TEXT", "CORRECTION") and not isinstance(value, str):
            return f"score {score['name']}: {data_type} needs a string"
        if data_type not in (None, "NUMERIC", "BOOLEAN", "CATEGORICAL", "TEXT", "CORRECTION"):
            return f"score {score['name']}: unknown dataType {data_type!r}"
        return None

    def _store_score(self, score: Mapping[str, Any]) -> None:
        now = iso(_now())
        value = score["value"]
        data_type = score.get("dataType") or (
            "BOOLEAN"
            if isinstance(value, bool)
            else "CATEGORICAL"
            if isinstance(value, str)
            else "NUMERIC"
        )
        score_id = score.get("id") or uuid.uuid4().hex
        previous = self._state.scores.get(score_id)
        timestamp = score.get("timestamp")
        self._state.scores[score_id] = {
            **{k: v for k, v in score.items() if v is not None},
            "id": score_id,
            "dataType": data_type,
            "name": "output" if data_type == "CORRECTION" else score["name"],
            "projectId": self.project_id,
            "source": score.get("source") or "API",
            "environment": score.get("environment") or "default",
            "timestamp": iso(parse_ts(timestamp)) if isinstance(timestamp, str) else now,
            "createdAt": previous["createdAt"] if previous else now,
            "updatedAt": now,
        }

    def _create_scores(self, req: _Request) -> tuple[int, Any]:
        if self._reject_scores_status is not None:
            return self._reject_scores_status, {"message": "Invalid request data (fake: rejected)"}
        if not isinstance(req.body, list):
            return 400, {"message": "expected a JSON array of scores"}
        errors: list[dict[str, str]] = []
        accepted = 0
        for score in req.body:
            error = self._validate_score(score)
            if error is None and score.get("configId"):
                error = self._check_config(score)
            if error is None and score.get("name") in self._reject_score_names:
                error = f"score {score['name']}: rejected (fake)"
            if error is not None:
                errors.append({"message": error})
                continue
            accepted += 1
            if score.get("name") in self._lose_score_names and score.get("id") not in self._lost:
                self._lost.add(str(score.get("id")))
                continue
            self._store_score(score)
        if errors:
            return 207, {"accepted": accepted, "rejected": len(errors), "errors": errors}
        return 202, {"message": "Accepted"}

    @staticmethod
    def _score_trace_id(score: Mapping[str, Any]) -> str | None:
        trace_id = score.get("traceId")
        return trace_id if isinstance(trace_id, str) else None

    def _score_v3(self, score: Mapping[str, Any], groups: set[str]) -> dict[str, Any]:
        data_type = score["dataType"]
        value: Any = score["value"]
        if data_type == "NUMERIC":
            value = float(value)
        elif data_type == "BOOLEAN":
            value = bool(value)
        else:
            value = str(value)
        out: dict[str, Any] = {
            "id": score["id"],
            "projectId": score["projectId"],
            "name": score["name"],
            "value": value,
            "dataType": data_type,
            "source": score["source"],
            "timestamp": score["timestamp"],
            "environment": score["environment"],
            "createdAt": score["createdAt"],
            "updatedAt": score["updatedAt"],
        }
        if "details" in groups:
            out["comment"] = score.get("comment")
            out["configId"] = score.get("configId")
            out["metadata"] = score.get("metadata")
        if "annotation" in groups:
            out["authorUserId"] = score.get("authorUserId")
            out["queueId"] = score.get("queueId")
        if "subject" in groups:
            if score.get("observationId"):
                out["subject"] = {
                    "kind": "observation",
                    "id": score["observationId"],
                    "traceId": score.get("traceId"),
                }
            elif score.get("traceId"):
                out["subject"] = {"kind": "trace", "id": score["traceId"]}
            elif score.get("sessionId"):
                out["subject"] = {"kind": "session", "id": score["sessionId"]}
            else:
                out["subject"] = {"kind": "experiment", "id": score.get("datasetRunId")}
        return out

    def _get_scores(self, req: _Request) -> tuple[int, Any]:
        q = req.query
        groups = set(_csv(q, "fields") or [])
        unknown = groups - {"details", "subject", "annotation"}
        if unknown:
            return 400, {"message": f"unknown field groups: {sorted(unknown)}"}
        subjects = [k for k in ("traceId", "sessionId", "experimentId") if _first(q, k)]
        if len(subjects) > 1:
            return 400, {"message": f"{' and '.join(subjects)} are mutually exclusive"}
        if _first(q, "observationId") and not _first(q, "traceId"):
            return 400, {"message": "observationId requires traceId"}
        filters: dict[str, tuple[str, list[str] | None]] = {
            "id": ("id", _csv(q, "id")),
            "name": ("name", _csv(q, "name")),
            "traceId": ("traceId", _csv(q, "traceId")),
            "sessionId": ("sessionId", _csv(q, "sessionId")),
            "observationId": ("observationId", _csv(q, "observationId")),
            "experimentId": ("datasetRunId", _csv(q, "experimentId")),
            "environment": ("environment", _csv(q, "environment")),
            "configId": ("configId", _csv(q, "configId")),
            "queueId": ("queueId", _csv(q, "queueId")),
            "authorUserId": ("authorUserId", _csv(q, "authorUserId")),
        }
        sources = [s.upper() for s in _csv(q, "source") or []]
        data_types = [d.upper() for d in _csv(q, "dataType") or []]
        values = _csv(q, "value")
        value_min, value_max = _first(q, "valueMin"), _first(q, "valueMax")
        if (values or value_min or value_max) and len(data_types) != 1:
            return 400, {"message": "value filters need exactly one dataType"}
        from_ts, to_ts = _first(q, "fromTimestamp"), _first(q, "toTimestamp")
        rows = []
        for score in self._state.scores.values():
            if any(wanted and score.get(key) not in wanted for key, wanted in filters.values()):
                continue
            if sources and score["source"].upper() not in sources:
                continue
            if data_types and score["dataType"] not in data_types:
                continue
            v3 = self._score_v3(score, groups)
            if (
                values is not None
                and str(v3["value"]).lower() not in {x.lower() for x in values}
                and not (
                    data_types[0] == "NUMERIC" and float(v3["value"]) in {float(x) for x in values}
                )
            ):
                continue
            if value_min is not None and float(v3["value"]) < float(value_min):
                continue
            if value_max is not None and float(v3["value"]) > float(value_max):
                continue
            ts = parse_ts(score["timestamp"])
            if from_ts and ts < parse_ts(from_ts):
                continue
            if to_ts and ts >= parse_ts(to_ts):
                continue
            rows.append(v3)
        rows.sort(key=lambda s: (s["timestamp"], s["id"]), reverse=True)
        chunk, cursor, limit = _cursor_page(rows, q, default_limit=50, max_limit=100)
        meta: dict[str, Any] = {"limit": limit}
        if cursor:
            meta["cursor"] = cursor
        return 200, {"data": chunk, "meta": meta}

    # prompts

    def _create_prompt(self, req: _Request) -> tuple[int, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        name = body.get("name")
        if not isinstance(name, str) or not name or len(name) > 255:
            return 400, {"message": "name is required (at most 255 characters)"}
        prompt_type = body.get("type") or "text"
        prompt = body.get("prompt")
        if prompt_type == "chat":
            if not isinstance(prompt, list) or not all(
                isinstance(m, dict)
                and (
                    (isinstance(m.get("role"), str) and isinstance(m.get("content"), str))
                    or m.get("type") == "placeholder"
                )
                for m in prompt
            ):
                return 400, {"message": "chat prompt must be a list of {role, content} messages"}
        elif prompt_type == "text":
            if not isinstance(prompt, str):
                return 400, {"message": "text prompt must be a string"}
        else:
            return 400, {"message": f"unknown prompt type {prompt_type!r}"}
        versions = self._state.prompts.setdefault(name, [])
        if versions and versions[-1]["type"] != prompt_type:
            return 400, {"message": "prompt type cannot change between versions"}
        labels = [label for label in dict.fromkeys(body.get("labels") or []) if label != "latest"]
        for old in versions:
            old["labels"] = [
                label for label in old["labels"] if label not in labels and label != "latest"
            ]
        tags = body.get("tags")
        if tags is not None:
            for old in versions:
                old["tags"] = list(tags)
        record: dict[str, Any] = {
            "type": prompt_type,
            "prompt": prompt,
            "name": name,
            "version": len(versions) + 1,
            "config": body.get("config") if body.get("config") is not None else {},
            "labels": [*labels, "latest"],
            "tags": list(tags) if tags is not None else (versions[-1]["tags"] if versions else []),
            "commitMessage": body.get("commitMessage"),
            "_updatedAt": iso(_now()),
        }
        versions.append(record)
        return 201, self._prompt_out(record)

    @staticmethod
    def _prompt_out(record: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in record.items() if not k.startswith("_")}

    def _get_prompt(self, req: _Request) -> tuple[int, Any]:
        name = req.params[0]
        versions = self._state.prompts.get(name)
        label = _first(req.query, "label")
        version = _first(req.query, "version")
        if label and version:
            return 400, {"message": "pass either label or version, not both"}
        if not versions:
            return 404, {"message": f"Prompt not found: {name}"}
        if version:
            found = [p for p in versions if p["version"] == int(version)]
        else:
            wanted = label or "production"
            found = [p for p in versions if wanted in p["labels"]]
        if not found:
            return 404, {
                "message": f"Prompt not found: {name} ({label or version or 'production'})"
            }
        return 200, self._prompt_out(found[-1])

    def _list_prompts(self, req: _Request) -> tuple[int, Any]:
        name = _first(req.query, "name")
        label = _first(req.query, "label")
        tag = _first(req.query, "tag")
        rows = []
        for prompt_name, versions in sorted(self._state.prompts.items()):
            if name is not None and prompt_name != name:
                continue
            selected = [
                p
                for p in versions
                if (label is None or label in p["labels"]) and (tag is None or tag in p["tags"])
            ]
            if not selected:
                continue
            rows.append(
                {
                    "name": prompt_name,
                    "type": versions[-1]["type"],
                    "versions": [p["version"] for p in selected],
                    "labels": sorted({lab for p in selected for lab in p["labels"]}),
                    "tags": versions[-1]["tags"],
                    "lastUpdatedAt": selected[-1]["_updatedAt"],
                    "lastConfig": selected[-1]["config"],
                }
            )
        page, meta = _paginate(rows, req.query)
        return 200, {"data": page, "meta": meta}

    def _update_prompt_labels(self, req: _Request) -> tuple[int, Any]:
        name, version = req.params[0], int(req.params[1])
        versions = self._state.prompts.get(name, [])
        target = next((p for p in versions if p["version"] == version), None)
        if target is None:
            return 404, {"message": f"Prompt not found: {name} v{version}"}
        body = req.body if isinstance(req.body, dict) else {}
        new_labels = [label for label in body.get("newLabels") or [] if label != "latest"]
        for p in versions:
            if p is not target:
                p["labels"] = [label for label in p["labels"] if label not in new_labels]
        target["labels"] = list(dict.fromkeys([*target["labels"], *new_labels]))
        return 200, self._prompt_out(target)

    # observations v2

    def _trace_contexts(self) -> dict[str, dict[str, Any]]:
        """Per trace: its tags (union), trace name and release, in one pass over observations
        (per trace and per request this was quadratic: 2,000 traces took minutes)."""
        found: dict[str, dict[str, Any]] = {}
        for obs in self._state.observations.values():
            ctx = found.setdefault(obs["traceId"], {"tags": [], "traceName": None, "release": None})
            for tag in obs.get("tags") or []:
                if tag not in ctx["tags"]:
                    ctx["tags"].append(tag)
            ctx["traceName"] = ctx["traceName"] or obs.get("traceName")
            ctx["release"] = ctx["release"] or obs.get("release")
        for ctx in found.values():
            ctx["tags"] = sorted(ctx["tags"])
        return found

    def _observation_rows(self) -> list[dict[str, Any]]:
        contexts = self._trace_contexts()
        return [{**obs, **contexts[obs["traceId"]]} for obs in self._state.observations.values()]

    def _get_observations(self, req: _Request) -> tuple[int, Any]:
        q = req.query
        if _bool_param(q, "parseIoAsJson"):
            return 400, {"message": "parseIoAsJson is deprecated; input/output are raw strings"}
        groups = _csv(q, "fields") or ["core", "basic"]
        unknown = set(groups) - set(FIELD_GROUPS)
        if unknown:
            return 400, {"message": f"unknown field groups: {sorted(unknown)}"}
        structured: list[dict[str, Any]] = []
        raw_filter = _first(q, "filter")
        if raw_filter:
            try:
                parsed = json.loads(raw_filter)
            except ValueError:
                return 400, {"message": "filter must be a JSON array"}
            if not isinstance(parsed, list):
                return 400, {"message": "filter must be a JSON array"}
            structured = parsed
        conditions = _query_conditions(q)
        # "filter takes precedence": a query parameter is dropped when the structured filter
        # constrains the same column.
        filtered_columns = {_canonical_column(c.get("column", "")) for c in structured}
        conditions = [
            c for c in conditions if _canonical_column(c["column"]) not in filtered_columns
        ]
        rows = []
        for obs in self._observation_rows():
            try:
                keep = all(_matches(obs, c) for c in [*conditions, *structured])
            except _HttpError as exc:
                return exc.status, {"message": exc.message}
            if keep:
                rows.append(obs)
        rows.sort(key=lambda o: (o["startTime"], o["id"]), reverse=True)
        chunk, cursor, _ = _cursor_page(rows, q, default_limit=50, max_limit=1000)
        keys = {"id", "traceId", "startTime", "projectId", "type"} | {
            k for g in ["core", *groups] for k in FIELD_GROUPS[g]
        }
        data = [{k: obs.get(k) for k in sorted(keys)} for obs in chunk]
        meta: dict[str, Any] = {}
        if cursor:
            meta["cursor"] = cursor
        return 200, {"data": data, "meta": meta}

    # OTLP

    def _otel_traces(self, req: _Request) -> tuple[int, Any]:
        spans = req.body if isinstance(req.body, list) else []
        for span in spans:
            self._state.spans.append(span)
            obs = span_to_observation(span, self.project_id)
            self._state.observations[(obs["traceId"], obs["id"])] = obs
        return 200, _Protobuf(ExportTraceServiceResponse().SerializeToString())

    # experiments (derived from the experiment attributes the SDK puts on spans)

    def _experiment_rows(self) -> list[dict[str, Any]]:
        return [
            obs
            for obs in self._state.observations.values()
            if obs["_attributes"].get("langfuse.experiment.id")
            and obs["parentObservationId"] is None
        ]

    def _list_experiments(self, req: _Request) -> tuple[int, Any]:
        q = req.query
        from_ts = _first(q, "fromStartTime")
        if not from_ts:
            return 400, {"message": "fromStartTime is required"}
        to_ts = _first(q, "toStartTime")
        ids, names, dataset_ids = _csv(q, "id"), _csv(q, "name"), _csv(q, "datasetId")
        groups = set(_csv(q, "fields") or ["core"])
        grouped: dict[str, list[dict[str, Any]]] = {}
        for obs in self._experiment_rows():
            start = parse_ts(obs["startTime"])
            if start < parse_ts(from_ts) or (to_ts and start >= parse_ts(to_ts)):
                continue
            grouped.setdefault(obs["_attributes"]["langfuse.experiment.id"], []).append(obs)
        rows = []
        for experiment_id, items in grouped.items():
            attrs = items[0]["_attributes"]
            record: dict[str, Any] = {
                "id": experiment_id,
                "name": attrs.get("langfuse.experiment.name"),
                "description": attrs.get("langfuse.experiment.description"),
                "startTime": min(o["startTime"] for o in items),
                "endTime": max(o["endTime"] or o["startTime"] for o in items),
                "itemCount": len({o["traceId"] for o in items}),
                "datasetId": attrs.get("langfuse.experiment.dataset.id"),
            }
            if ids and experiment_id not in ids:
                continue
            if names and record["name"] not in names:
                continue
            if dataset_ids and record["datasetId"] not in dataset_ids:
                continue
            if "metadata" in groups:
                record["metadata"] = _json_or_raw(attrs.get("langfuse.experiment.metadata"))
            if "scores" in groups:
                record["scores"] = [
                    self._score_v3(s, {"details"})
                    for s in self._state.scores.values()
                    if s.get("datasetRunId") == experiment_id
                ]
            rows.append(record)
        rows.sort(key=lambda r: r["endTime"], reverse=True)
        chunk, cursor, _ = _cursor_page(rows, q, default_limit=50, max_limit=100)
        meta: dict[str, Any] = {"cursor": cursor} if cursor else {}
        return 200, {"data": chunk, "meta": meta}

    def _list_experiment_items(self, req: _Request) -> tuple[int, Any]:
        """Filtered and sorted on the cheap keys first, and only the requested page's rows
        built (with their scores), the way an indexed query pages: building every matching
        row per request made a walk over n items cost O(n^2) here, which the real server's
        query does not."""
        q = req.query
        from_ts = _first(q, "fromStartTime")
        if not from_ts:
            return 400, {"message": "fromStartTime is required"}
        to_ts = _first(q, "toStartTime")
        from_dt, to_dt = parse_ts(from_ts), parse_ts(to_ts) if to_ts else None
        groups = set(_csv(q, "fields") or ["core", "dataset"])
        wanted = {
            "langfuse.experiment.id": _csv(q, "experimentId"),
            "langfuse.experiment.name": _csv(q, "experimentName"),
            "langfuse.experiment.item.id": _csv(q, "experimentItemId"),
            "langfuse.experiment.dataset.id": _csv(q, "datasetId"),
        }
        matched = []
        for obs in self._experiment_rows():
            attrs = obs["_attributes"]
            start = parse_ts(obs["startTime"])
            if start < from_dt or (to_dt and start >= to_dt):
                continue
            if any(values and attrs.get(key) not in values for key, values in wanted.items()):
                continue
            matched.append(obs)
        matched.sort(key=lambda o: (o["startTime"], o["id"]), reverse=True)
        chunk, cursor, _ = _cursor_page(matched, q, default_limit=50, max_limit=100)
        by_trace: dict[str, list[dict[str, Any]]] = {}
        if "scores" in groups:  # one pass over the scores, for this page's traces only
            traces = {obs["traceId"] for obs in chunk}
            for s in self._state.scores.values():
                if s.get("traceId") in traces:
                    by_trace.setdefault(s["traceId"], []).append(s)
        rows = [self._experiment_item(obs, groups, by_trace, q) for obs in chunk]
        meta: dict[str, Any] = {"cursor": cursor} if cursor else {}
        return 200, {"data": rows, "meta": meta}

    def _experiment_item(
        self,
        obs: Mapping[str, Any],
        groups: set[str],
        by_trace: Mapping[str, list[dict[str, Any]]],
        q: Query,
    ) -> dict[str, Any]:
        attrs = obs["_attributes"]
        record: dict[str, Any] = {
            "id": obs["id"],
            "traceId": obs["traceId"],
            "startTime": obs["startTime"],
            "endTime": obs["endTime"],
            "level": obs["level"],
            "environment": obs["environment"],
            "experimentId": attrs["langfuse.experiment.id"],
            "experimentName": attrs.get("langfuse.experiment.name"),
            "experimentItemId": attrs.get("langfuse.experiment.item.id"),
        }
        if "dataset" in groups:
            record["experimentDatasetId"] = attrs.get("langfuse.experiment.dataset.id")
            record["experimentItemVersion"] = attrs.get("langfuse.experiment.item.version")
        if "io" in groups:
            record["input"] = obs["input"]
            record["output"] = obs["output"]
            record["expectedOutput"] = attrs.get("langfuse.experiment.item.expected_output")
        if "metadata" in groups:
            record["metadata"] = obs["metadata"]
        if "itemMetadata" in groups:
            record["experimentItemMetadata"] = _json_or_raw(
                attrs.get("langfuse.experiment.item.metadata")
            )
        if "experimentMetadata" in groups:
            record["experimentMetadata"] = _json_or_raw(attrs.get("langfuse.experiment.metadata"))
            record["experimentDescription"] = attrs.get("langfuse.experiment.description")
        if "scores" in groups:
            limit = _int_param(q, "scoreLimit", 50)
            record["scores"] = [
                self._score_v3(s, {"details", "subject"})
                for s in by_trace.get(obs["traceId"], [])[:limit]
            ]
        return record


# --- observation filters ------------------------------------------------------------------

_COLUMN_ALIASES = {"traceTags": "tags", "providedModelName": "model"}
_QUERY_COLUMNS = {
    "name": "name",
    "userId": "userId",
    "sessionId": "sessionId",
    "type": "type",
    "traceId": "traceId",
    "level": "level",
    "parentObservationId": "parentObservationId",
    "version": "version",
}


def _canonical_column(column: str) -> str:
    return _COLUMN_ALIASES.get(column, column)


def _query_conditions(q: Query) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for param, column in _QUERY_COLUMNS.items():
        value = _first(q, param)
        if value is not None:
            out.append({"type": "string", "column": column, "operator": "=", "value": value})
    root = _bool_param(q, "isRootObservation")
    if root is not None:
        out.append(
            {"type": "boolean", "column": "isRootObservation", "operator": "=", "value": root}
        )
    environments = q.get("environment")
    if environments:
        out.append(
            {
                "type": "stringOptions",
                "column": "environment",
                "operator": "any of",
                "value": environments,
            }
        )
    if _first(q, "fromStartTime"):
        out.append(
            {
                "type": "datetime",
                "column": "startTime",
                "operator": ">=",
                "value": _first(q, "fromStartTime"),
            }
        )
    if _first(q, "toStartTime"):
        out.append(
            {
                "type": "datetime",
                "column": "startTime",
                "operator": "<",
                "value": _first(q, "toStartTime"),
            }
        )
    return out


def _matches(obs: Mapping[str, Any], cond: Mapping[str, Any]) -> bool:
    kind, op, value = cond.get("type"), cond.get("operator"), cond.get("value")
    column = _canonical_column(str(cond.get("column", "")))
    if column == "metadata":
        actual: Any = (obs.get("metadata") or {}).get(cond.get("key", ""))
    else:
        actual = obs.get(column)
    if kind == "null":
        return (actual is None) == (op == "is null")
    if kind == "datetime":
        if actual is None:
            return False
        a, b = parse_ts(str(actual)), parse_ts(str(value))
        return {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[str(op)]
    if kind == "boolean":
        return (bool(actual) == bool(value)) == (op == "=")
    if kind in ("string", "stringObject"):
        a_str = "" if actual is None else str(actual)
        v_str = str(value)
        if op == "=":
            return actual is not None and a_str == v_str
        if op == "contains" or op == "matches":
            return v_str.lower() in a_str.lower()
        if op == "does not contain":
            return v_str.lower() not in a_str.lower()
        if op == "starts with":
            return a_str.startswith(v_str)
        if op == "ends with":
            return a_str.endswith(v_str)
        if op == "is set":
            return actual is not None
        if op == "is not set":
            return actual is None
    if kind in ("stringOptions", "categoryOptions"):
        inside = actual in (value or [])
        return inside if op == "any of" else not inside
    if kind == "arrayOptions":
        have, want = set(actual or []), set(value or [])
        if op == "any of":
            return bool(have & want)
        if op == "all of":
            return want <= have
        if op == "none of":
            return not (have & want)
    if kind in ("number", "numberObject"):
        if actual is None:
            return False
        a_num, b_num = float(actual), float(str(value))
        return {
            "=": a_num == b_num,
            ">": a_num > b_num,
            "<": a_num < b_num,
            ">=": a_num >= b_num,
            "<=": a_num <= b_num,
        }[str(op)]
    raise _HttpError(400, f"unsupported filter {dict(cond)!r}")


# --- HTTP plumbing ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Protobuf:
    payload: bytes


def _make_handler(server: FakeLangfuse) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: "down" takes effect at once

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _read_body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                data = b"".join(chunks)
            else:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding", "").lower() == "gzip":
                data = gzip.decompress(data)
            return data

        def _handle(self) -> None:
            if server._drop_connections:
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            split = urlsplit(self.path)
            raw_path = split.path
            path = unquote(raw_path)
            query = parse_qs(split.query, keep_blank_values=True)
            headers = {
                k.lower(): v for k, v in self.headers.items() if k.lower() not in _REDACTED_HEADERS
            }
            data = self._read_body()
            body: Any
            status: int
            response: Any
            extra_headers: dict[str, str] = {}
            try:
                body = self._decode(path, data)
            except Exception as exc:  # a malformed payload is a 400, and still recorded
                body = data.decode("utf-8", "replace")
                status, response = 400, {"message": f"undecodable body: {exc}"}
            else:
                status, response = 0, None
            public_key, ok = server._check_auth(self.headers.get("Authorization"))
            if status == 0:
                fault = server._take_fault(self.command, path)
                if fault is not None:
                    status = fault.status
                    response = {"message": f"fake fault {fault.status}"}
                    if fault.retry_after is not None:
                        extra_headers["Retry-After"] = fault.retry_after
                elif not ok:
                    status, response = (
                        401,
                        {
                            "error": "UnauthorizedError",
                            "message": "Invalid credentials. Confirm that you've configured"
                            " the correct host.",
                        },
                    )
                else:
                    try:
                        status, response = server._dispatch(
                            self.command, path, raw_path, query, body
                        )
                        if path == "/api/public/scores" and server._score_delay_s:
                            time.sleep(server._score_delay_s)  # stored; the answer is late
                    except _HttpError as exc:
                        status, response = exc.status, {"message": exc.message}
                    except Exception as exc:  # a fake bug must show up as a 500, not a hang
                        status, response = 500, {"message": f"fake server error: {exc!r}"}
                    rule = server._rewrites.get(path)
                    if rule is not None and self.command == "GET":  # sent with a 200
                        status, response = 200, rule(query, response)
            server._record(
                RecordedRequest(
                    method=self.command,
                    path=path,
                    raw_path=raw_path,
                    query=query,
                    headers=headers,
                    body=body,
                    public_key=public_key,
                    status=status,
                )
            )
            self._respond(status, response, extra_headers)

        def _decode(self, path: str, data: bytes) -> Any:
            if not data:
                return None
            if path == "/api/public/otel/v1/traces":
                content_type = self.headers.get("Content-Type", "")
                if "protobuf" not in content_type:
                    raise ValueError(f"fake accepts OTLP protobuf only, got {content_type!r}")
                return decode_otlp(data)
            text = data.decode("utf-8")
            try:
                return json.loads(text)
            except ValueError:
                return text

        def _respond(self, status: int, response: Any, extra_headers: Mapping[str, str]) -> None:
            drip = 0.0
            if isinstance(response, RawAnswer):
                payload, content_type = response.payload, "application/json"
                drip = response.drip_s
            elif isinstance(response, _Protobuf):
                payload, content_type = response.payload, "application/x-protobuf"
            else:
                payload, content_type = json.dumps(response).encode(), "application/json"
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for key, value in extra_headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if not drip:
                    self.wfile.write(payload)
                for i in range(len(payload)) if drip else ():
                    self.wfile.flush()
                    time.sleep(drip)
                    self.wfile.write(payload[i : i + 1])
            except OSError:  # the client went away
                pass

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle

    return Handler


# --- pytest helpers -----------------------------------------------------------------------


@contextlib.contextmanager
def running_fake_langfuse(**kwargs: Any) -> Iterator[FakeLangfuse]:
    """``with running_fake_langfuse() as server:`` -- started, and stopped afterwards."""
    server = FakeLangfuse(**kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def client_for(
    server: FakeLangfuse,
    label: str = "test",
    *,
    flush_interval: float = 0.05,
    timeout: int = 5,
) -> Any:
    """A real ``langfuse.Langfuse`` client on ``server`` with fresh keys (the SDK caches one
    client per public key per process) and a short flush interval. Call ``shutdown()``."""
    from langfuse import Langfuse

    public_key, secret_key = server.new_keys(label)
    return Langfuse(
        public_key=public_key,
        secret_key=secret_key,
        base_url=server.base_url,
        flush_interval=flush_interval,
        timeout=timeout,
    )
