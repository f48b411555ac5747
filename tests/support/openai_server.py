"""A loopback OpenAI-compatible server for tests and benchmarks (stdlib only).

It speaks ``POST /v1/chat/completions`` (and, for the Gemini SDK, ``POST
/v1beta/models/{model}:generateContent``), records every request, waits a fixed latency, and
plays injected faults before falling back to an answer function::

    with LoopbackServer(latency_s=0.2) as server:
        server.inject(rate_limited(retry_after=1), server_error(500))
        client = AsyncOpenAI(base_url=server.url, api_key="test", max_retries=0)
        ...
        assert [r.status for r in server.requests] == [429, 500, 200]

Threaded with a large accept backlog so thousands of concurrent keep-alive requests do not
queue behind each other (the benchmark runs 2,000 requests at concurrency 64).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tests.support.loopback_http import (
    Fault,
    FaultKind,
    LoopbackAPI,
    RecordedRequest,
    RecordingHandler,
)

__all__ = ["Fault", "FaultKind", "RecordedRequest"]  # the fault helpers' types, as before

EMPTY_EXTRACTION: dict[str, Any] = {"entities": [], "relationships": []}
OMIT_USAGE = object()  # ``LoopbackServer.usage`` returns it: the answer carries no usage

Answer = Callable[[dict[str, Any]], "str | dict[str, Any]"]


def rate_limited(retry_after: float | str | None = 1, **kw: Any) -> Fault:
    return Fault("status", status=429, retry_after=retry_after, **kw)


def server_error(status: int = 500, **kw: Any) -> Fault:
    return Fault("status", status=status, **kw)


def slow(delay_s: float, **kw: Any) -> Fault:
    """Answer normally, but only after ``delay_s`` (beyond the client's timeout, usually)."""
    return Fault("slow", delay_s=delay_s, **kw)


def malformed_body(**kw: Any) -> Fault:
    """HTTP 200 with a truncated JSON body: the transport-level answer is broken."""
    return Fault("malformed_body", **kw)


def disconnect(**kw: Any) -> Fault:
    """Close the connection after reading the request, without answering anything."""
    return Fault("disconnect", **kw)


def content(text: str, **kw: Any) -> Fault:
    """A well-formed completion whose message content is ``text`` (bad JSON, off-schema...)."""
    return Fault("content", content=text, **kw)


def sent_format(body: Any) -> str:
    """What a chat body asks for: json_schema | json_object_schema | json_object | text, or
    ``structured_outputs`` (vLLM's field beside response_format)."""
    if not isinstance(body, dict):
        return "text"
    if "structured_outputs" in body:
        return "structured_outputs"
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return "text"
    if fmt.get("type") == "json_object":
        return "json_object_schema" if "schema" in fmt else "json_object"
    return str(fmt.get("type"))


# llama-cpp-python 0.3's server, asked for json_schema: HTTP 500 with pydantic's message
LLAMA_CPP_PYTHON_REFUSAL = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
    "  Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema',"
    " input_type=str]"
)


@dataclass(frozen=True)
class FormatRule:
    """The response formats a server takes (``sent_format`` names); any other is refused
    with ``status`` and ``message``, as the real server would."""

    accepts: tuple[str, ...]
    status: int = 400
    message: str = "response_format is not supported"


def llama_cpp_python_formats() -> FormatRule:
    """llama-cpp-python's server: text and json_object (with or without a schema)."""
    return FormatRule(
        accepts=("text", "json_object", "json_object_schema"),
        status=500,
        message=LLAMA_CPP_PYTHON_REFUSAL,
    )


def echo_auth(status: int = 401, **kw: Any) -> Fault:
    """An error whose body echoes the request's ``Authorization`` header and the bare key (a
    misconfigured proxy): what a client does with error text is then visible."""
    return Fault("echo", status=status, **kw)


def html_error(status: int = 503, **kw: Any) -> Fault:
    """An HTML error page instead of JSON (a load balancer's 503)."""
    return Fault("html", status=status, **kw)


def truncated(**kw: Any) -> Fault:
    """HTTP 200 announcing more bytes than it sends, then closing the connection."""
    return Fault("truncated", **kw)


def reset(**kw: Any) -> Fault:
    """Reset the TCP connection (RST) after reading the request."""
    return Fault("reset", **kw)


def drip(delay_s: float, **kw: Any) -> Fault:
    """A correct answer sent one byte at a time, ``delay_s`` apart (slow-drip)."""
    return Fault("drip", delay_s=delay_s, **kw)


def hang(**kw: Any) -> Fault:
    """Read the request and never answer (until the server stops)."""
    return Fault("hang", **kw)


_TEXT_TAG = re.compile(r"<text>\n(.*?)\n</text>", re.DOTALL)


def user_text(body: Any) -> str:
    """The last user message of an OpenAI or Gemini request body."""
    if not isinstance(body, dict):
        return ""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            value = message.get("content")
            return value if isinstance(value, str) else json.dumps(value)
    for entry in reversed(body.get("contents") or []):
        if isinstance(entry, dict) and entry.get("role", "user") == "user":
            return "".join(str(p.get("text", "")) for p in entry.get("parts") or [])
    return ""


def input_text(body: Any) -> str:
    """The document inside the prompt's ``<text>`` tags (the whole user message otherwise)."""
    message = user_text(body)
    match = _TEXT_TAG.search(message)
    return match.group(1) if match else message


def empty_answer(_: dict[str, Any]) -> dict[str, Any]:
    return EMPTY_EXTRACTION


def baseline_answer(body: dict[str, Any]) -> str:
    """A realistic, imperfect extraction of the request's text (the offline baseline's)."""
    from extraction_eval.pipeline.baseline import extract_baseline

    return extract_baseline(input_text(body)).model_dump_json()


class _Handler(RecordingHandler):
    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.rstrip("/").endswith("/models"):
            model = owner.model if isinstance(owner, LoopbackServer) else ""
            self.send_json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
        else:
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})


@dataclass
class LoopbackServer(LoopbackAPI):
    """Context manager: starts on 127.0.0.1 with a free port, stops on exit."""

    handler: ClassVar[type[RecordingHandler]] = _Handler
    thread_name: ClassVar[str] = "loopback-openai"

    latency_s: float = 0.0
    answer: Answer = empty_answer
    model: str = "loopback-model"
    formats: FormatRule | None = None  # None: every response format is taken
    # what a 200 reports as ``usage`` (Gemini: ``usageMetadata``) for a request's body
    # (``OMIT_USAGE``: no such key);
    # None: word counts (a hostile server reports negative, fractional, absurd counts)
    usage: Callable[[dict[str, Any]], Any] | None = None
    # how many requests were being answered at once, at most (counted, not timed: overlap
    # tests assert on it rather than on wall time, which a loaded machine stretches)
    max_in_flight: int = 0
    _in_flight: int = field(default=0, repr=False)

    @property
    def url(self) -> str:
        """The OpenAI ``base_url`` (with ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The bare origin, e.g. for the Gemini SDK's ``http_options.base_url``."""
        return f"http://127.0.0.1:{self.port}"

    # --- scripting ---------------------------------------------------------------------------

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.is_chat]

    # --- request handling (handler threads) -------------------------------------------------

    def respond(self, handler: RecordingHandler, record: RecordedRequest) -> None:
        gemini = ":generateContent" in record.path
        if not (record.is_chat or gemini):
            record.status = 404
            handler.send_json(404, {"error": {"message": f"no route {record.path}"}})
            return
        if record.body is None:
            record.status = 400
            handler.send_json(400, {"error": {"message": "request body is not JSON"}})
            return
        rule = self.formats
        if rule is not None and not gemini and sent_format(record.body) not in rule.accepts:
            record.status = rule.status
            kind = "invalid_request_error" if rule.status < 500 else "internal_server_error"
            handler.send_json(rule.status, {"error": {"message": rule.message, "type": kind}})
            return
        fault = self.take_fault(record.raw)
        record.fault = fault.kind if fault else None
        if self.latency_s > 0:
            with self._lock:
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
            try:
                self._stopping.wait(self.latency_s)
            finally:
                with self._lock:
                    self._in_flight -= 1
        if fault is not None and fault.kind == "slow":
            self._stopping.wait(fault.delay_s)
        if fault is not None and fault.kind == "status":
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            record.status = fault.status
            handler.send_json(fault.status, _error_body(fault.status, gemini), headers)
            return
        if fault is not None and fault.kind in _RAW_FAULTS:
            record.status = fault.status if fault.kind in ("echo", "html") else None
            _RAW_FAULTS[fault.kind](self, handler, record, fault)
            return
        if fault is not None and fault.kind == "disconnect":
            handler.close_connection = True  # the server closes the socket; no status line
            return
        if fault is not None and fault.kind == "malformed_body":
            record.status = 200
            handler.send_bytes(200, b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mess')
            return
        if fault is not None and fault.kind == "content":
            text = fault.content or ""
        else:
            answer = self.answer(record.body)
            text = answer if isinstance(answer, str) else json.dumps(answer)
        prompt_words = len(user_text(record.body).split())
        payload = (
            _gemini_body(text, self.model, prompt_words)
            if gemini
            else _chat_body(text, str(record.body.get("model") or self.model), prompt_words)
        )
        if self.usage is not None:
            key = "usageMetadata" if gemini else "usage"
            reported = self.usage(record.body)
            if reported is OMIT_USAGE:
                del payload[key]
            else:
                payload[key] = reported
        record.status = 200
        handler.send_json(200, payload)


def _echo(
    owner: LoopbackServer, handler: RecordingHandler, record: RecordedRequest, fault: Fault
) -> None:
    auth = record.headers.get("authorization", "")
    key = auth.split(" ", 1)[-1]
    message = f"proxy refused Authorization: {auth} (key {key}) for {record.path}"
    handler.send_json(fault.status, {"error": {"message": message, "type": "invalid_request"}})


def _html(
    owner: LoopbackServer, handler: RecordingHandler, record: RecordedRequest, fault: Fault
) -> None:
    page = b"<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
    handler.send_response(fault.status)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Content-Length", str(len(page)))
    handler.end_headers()
    handler.wfile.write(page)


def _truncated(
    owner: LoopbackServer, handler: RecordingHandler, record: RecordedRequest, fault: Fault
) -> None:
    payload = json.dumps(_chat_body("{}", owner.model, 1)).encode("utf-8")
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload[: len(payload) // 2])
    handler.wfile.flush()
    handler.close_connection = True


def _reset(
    owner: LoopbackServer, handler: RecordingHandler, record: RecordedRequest, fault: Fault
) -> None:
    import socket
    import struct

    # SO_LINGER with a zero timeout: close() sends RST instead of FIN
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.close_connection = True


def _drip(
    owner: LoopbackServer, handler: RecordingHandler, record: RecordedRequest, fault: Fault
) -> None:
    answer = owner.answer(record.body)
    text = answer if isinstance(answer, str) else json.dumps(answer)
    payload = json.dumps(_chat_body(text, owner.model, 1)).encode("utf-8")
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    for i in range(len(payload)):
        if owner._stopping.wait(fault.delay_s):
            break
        handler.wfile.write(payload[i : i + 1])
        handler.wfile.flush()
    record.status = 200


def _hang(
    owner: LoopbackServer, handler: RecordingHandler, record: RecordedRequest, fault: Fault
) -> None:
    owner._stopping.wait()
    handler.close_connection = True


_RAW_FAULTS: dict[
    str, Callable[[LoopbackServer, RecordingHandler, RecordedRequest, Fault], None]
] = {
    "echo": _echo,
    "html": _html,
    "truncated": _truncated,
    "reset": _reset,
    "drip": _drip,
    "hang": _hang,
}


def _error_body(status: int, gemini: bool) -> dict[str, Any]:
    names = {
        429: "RESOURCE_EXHAUSTED",
        500: "INTERNAL",
        503: "UNAVAILABLE",
        400: "INVALID_ARGUMENT",
    }
    if gemini:
        return {
            "error": {
                "code": status,
                "message": "injected fault",
                "status": names.get(status, "UNKNOWN"),
            }
        }
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return {"error": {"message": f"injected {status}", "type": kind, "code": str(status)}}


def _chat_body(text: str, model: str, prompt_words: int) -> dict[str, Any]:
    completion_words = len(text.split())
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": completion_words,
            "total_tokens": prompt_words + completion_words,
        },
    }


def _gemini_body(text: str, model: str, prompt_words: int) -> dict[str, Any]:
    completion_words = len(text.split())
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_words,
            "candidatesTokenCount": completion_words,
            "totalTokenCount": prompt_words + completion_words,
        },
        "modelVersion": model,
    }


def main(argv: list[str] | None = None) -> None:
    """Serve until killed, in its own process: ``python -m tests.support.openai_server``.

    Prints the base URL as the first line of stdout, so a benchmark can measure the client
    without the server competing for the same interpreter lock.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument(
        "--answer", choices=("empty", "baseline"), default="empty", help="default answer"
    )
    args = parser.parse_args(argv)
    answer: Answer = baseline_answer if args.answer == "baseline" else empty_answer
    server = LoopbackServer(latency_s=args.latency, answer=answer).start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
