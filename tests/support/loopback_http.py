"""What the loopback API servers (``openai_server``, ``anthropic_server``) share, stdlib only:
the threaded HTTP server on 127.0.0.1 with a free port, a handler that records each request
before the owner answers it, and the scripted faults. One copy, so a fix to the lifecycle
(shutdown waking slow handlers, a client that left mid-answer) reaches every fake API.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal, Self

FaultKind = Literal[
    "status",
    "slow",
    "malformed_body",
    "content",
    "disconnect",
    "echo",
    "html",
    "truncated",
    "reset",
    "drip",
    "hang",
]


@dataclass
class Fault:
    """One injected misbehaviour, used by the first ``times`` requests it matches."""

    kind: FaultKind
    status: int = 500
    retry_after: float | str | None = None
    delay_s: float = 0.0
    content: str | None = None
    match: str | None = None  # only requests whose raw body contains this substring
    times: int = 1


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    received_at: float
    status: int | None = None  # what the server answered (None: the client went away first)
    fault: str | None = None

    @property
    def is_chat(self) -> bool:
        return self.path.rstrip("/").endswith("/chat/completions")


class LoopbackHTTPServer(ThreadingHTTPServer):
    # a large accept backlog: thousands of concurrent keep-alive requests do not queue
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    owner: LoopbackAPI


class RecordingHandler(BaseHTTPRequestHandler):
    """Reads a request into a :class:`RecordedRequest`, records it, lets the owner answer."""

    protocol_version = "HTTP/1.1"  # keep-alive: a client reuses connections as real APIs allow
    # Headers and body go out in two writes; with Nagle on, the body waited for the client's
    # delayed ACK of the headers (~40 ms a request on Linux loopback).
    disable_nagle_algorithm = True
    server: LoopbackHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        self.serve("POST")

    def serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = RecordedRequest(
            method=method,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=raw,
            body=body,
            received_at=time.monotonic(),
        )
        owner = self.server.owner
        owner.record(record)
        try:
            owner.respond(self, record)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            self.close_connection = True

    def send_bytes(
        self, status: int, payload: bytes, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self.send_bytes(status, json.dumps(obj).encode("utf-8"), headers)


@dataclass
class LoopbackAPI:
    """Context manager: starts on 127.0.0.1 with a free port, stops on exit. A subclass
    answers in :meth:`respond` and may take its faults with :meth:`take_fault`."""

    handler: ClassVar[type[RecordingHandler]] = RecordingHandler
    thread_name: ClassVar[str] = "loopback-api"

    requests: list[RecordedRequest] = field(default_factory=list)
    _faults: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _httpd: LoopbackHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Self:
        httpd = LoopbackHTTPServer(("127.0.0.1", 0), self.handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # shutdown() waits up to one poll interval
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on latency or a slow fault
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    def inject(self, *faults: Fault | Iterable[Fault]) -> None:
        with self._lock:
            for fault in faults:
                self._faults.extend([fault] if isinstance(fault, Fault) else fault)

    def pending_faults(self) -> int:
        with self._lock:
            return sum(f.times for f in self._faults)

    def statuses(self) -> list[int | None]:
        with self._lock:
            return [r.status for r in self.requests]

    def record(self, record: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(record)

    def take_fault(self, raw: bytes) -> Fault | None:
        """The first injected fault matching this request's body, used up once."""
        text = raw.decode("utf-8", "replace")
        with self._lock:
            for fault in self._faults:
                if fault.times > 0 and (fault.match is None or fault.match in text):
                    fault.times -= 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def respond(self, handler: RecordingHandler, record: RecordedRequest) -> None:
        raise NotImplementedError
