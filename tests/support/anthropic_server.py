"""A loopback server that speaks Anthropic's Messages API, as the official SDK sends and reads it
(stdlib only).

``POST /v1/messages`` checks the key (``x-api-key``, or ``Authorization: Bearer`` as SDK 2.x
sends it) and the ``anthropic-version`` header, records the request, plays injected faults
(``openai_server``'s ``Fault`` helpers: ``rate_limited``, ``server_error``, ``malformed_body``,
``content``, ``echo_auth``, ``slow``) and otherwise answers with the ``answer`` function's
extraction: as the forced tool's ``tool_use`` block when the request carries tools, else as a
text block (``text_reply`` shapes it, e.g. in a Markdown fence). A ``temperature`` is refused
with a 400, as the API does since version 2026-10-21.
Errors are the API's shape, ``{"type": "error", "error": {"type": ..., "message": ...}}``.

Message Batches: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}`` (in
progress for ``polls_before_done`` retrievals, then ended with a ``results_url``) and
``GET /v1/messages/batches/{id}/results`` (JSONL, one line per request; ``fail`` makes a line
an ``errored`` result).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tests.support.loopback_http import LoopbackAPI, RecordedRequest, RecordingHandler
from tests.support.openai_server import empty_answer, user_text

Answer = Callable[[dict[str, Any]], "str | dict[str, Any]"]
Fail = Callable[[str, dict[str, Any]], "str | None"]  # (custom id, params) -> error message

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def api_key(record: RecordedRequest) -> str:
    """The key as the API takes it: ``x-api-key`` (SDK 1.x) or ``Authorization: Bearer``
    (SDK 2.x sends this one)."""
    bearer = record.headers.get("authorization", "")
    return record.headers.get("x-api-key") or bearer.removeprefix("Bearer ").strip()


def bare_text(extraction: str) -> str:
    return extraction


def message_body(
    body: dict[str, Any], answer: str | dict[str, Any], text_reply: Callable[[str], str]
) -> dict[str, Any]:
    """The Messages API's answer to ``body``: a tool_use block when tools were sent."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    tools = body.get("tools") or []
    if tools:
        try:
            arguments = json.loads(text)
        except ValueError:
            arguments = {"raw": text}
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": "toolu_loopback",
            "name": tools[0]["name"],
            "input": arguments,
        }
        stop = "tool_use"
    else:
        block = {"type": "text", "text": text_reply(text)}
        stop = "end_turn"
    prompt_words = len(user_text(body).split()) + len(str(body.get("system") or "").split())
    return {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model") or "claude-loopback"),
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_words, "output_tokens": len(text.split())},
    }


@dataclass
class Batch:
    id: str
    requests: list[dict[str, Any]]
    polls: int = 0
    status: str = "in_progress"
    results: bytes = b""  # fixed when the batch ends, as the API's are


class _Handler(RecordingHandler):
    def do_GET(self) -> None:
        self.serve("GET")


@dataclass
class AnthropicServer(LoopbackAPI):
    """Context manager: a Messages API on 127.0.0.1 with a free port."""

    handler: ClassVar[type[RecordingHandler]] = _Handler
    thread_name: ClassVar[str] = "loopback-anthropic"

    answer: Answer = empty_answer
    text_reply: Callable[[str], str] = bare_text  # how a text-format answer is written
    refuse_tools: bool = False  # a gateway without tool use: 400 to any request with tools
    fail: Fail = lambda _cid, _params: None
    polls_before_done: int = 1
    error_headers: dict[str, str] = field(default_factory=dict)  # on every injected status
    batches: dict[str, Batch] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The SDK's ``base_url`` (it adds ``/v1/messages`` itself)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def message_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.rstrip("/") == "/v1/messages"]

    def respond(self, handler: RecordingHandler, record: RecordedRequest) -> None:
        path = record.path.split("?", 1)[0].rstrip("/")
        if not api_key(record) or not record.headers.get("anthropic-version"):
            record.status = 401
            handler.send_json(401, error_body(401, "an API key and anthropic-version required"))
            return
        if record.method == "POST" and path == "/v1/messages":
            self._message(handler, record)
        elif record.method == "POST" and path == "/v1/messages/batches":
            self._create_batch(handler, record)
        elif record.method == "GET" and path.startswith("/v1/messages/batches/"):
            rest = path.removeprefix("/v1/messages/batches/")
            if rest.endswith("/results"):
                self._results(handler, record, rest.removesuffix("/results"))
            else:
                self._retrieve(handler, record, rest)
        else:
            record.status = 404
            handler.send_json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": path}}
            )

    def _message(self, handler: RecordingHandler, record: RecordedRequest) -> None:
        body = record.body
        if not isinstance(body, dict):
            record.status = 400
            handler.send_json(400, error_body(400, "request body is not JSON"))
            return
        if "temperature" in body:  # as the API since version 2026-10-21
            record.status = 400
            handler.send_json(400, error_body(400, "temperature: Extra inputs are not permitted"))
            return
        if self.refuse_tools and body.get("tools"):
            record.status = 400
            handler.send_json(400, error_body(400, "tools: Extra inputs are not permitted"))
            return
        fault = self.take_fault(record.raw)
        record.fault = fault.kind if fault else None
        if fault is not None and fault.kind == "slow":  # answers, after the client gave up
            self._stopping.wait(fault.delay_s)
        if fault is not None and fault.kind == "status":
            headers = dict(self.error_headers)
            if fault.retry_after is not None:
                headers["retry-after"] = str(fault.retry_after)
            record.status = fault.status
            handler.send_json(
                fault.status, error_body(fault.status, f"injected {fault.status}"), headers
            )
            return
        if fault is not None and fault.kind == "echo":  # a proxy that quotes the key back
            key = api_key(record)
            record.status = fault.status
            handler.send_json(
                fault.status, error_body(fault.status, f"proxy refused x-api-key: {key}")
            )
            return
        if fault is not None and fault.kind == "malformed_body":
            record.status = 200
            handler.send_bytes(200, b'{"id": "msg_broken", "type": "message", "cont')
            return
        content = fault is not None and fault.kind == "content"
        answer = (fault.content or "") if fault is not None and content else self.answer(body)
        record.status = 200
        handler.send_json(200, message_body(body, answer, self.text_reply))

    def _create_batch(self, handler: RecordingHandler, record: RecordedRequest) -> None:
        requests = (record.body or {}).get("requests") if isinstance(record.body, dict) else None
        if not isinstance(requests, list) or not requests:
            record.status = 400
            handler.send_json(400, error_body(400, "requests: field required"))
            return
        with self._lock:
            batch = Batch(id=f"msgbatch_{len(self.batches) + 1:04d}", requests=requests)
            self.batches[batch.id] = batch
        record.status = 200
        handler.send_json(200, self._batch_json(batch))

    def _retrieve(self, handler: RecordingHandler, record: RecordedRequest, batch_id: str) -> None:
        batch = self.batches.get(batch_id)
        if batch is None:
            record.status = 404
            handler.send_json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}
            )
            return
        with self._lock:
            batch.polls += 1
            ending = batch.status != "ended" and batch.polls > self.polls_before_done
        if ending:
            batch.results = self._run(batch)
            batch.status = "ended"
        record.status = 200
        handler.send_json(200, self._batch_json(batch))

    def _results(self, handler: RecordingHandler, record: RecordedRequest, batch_id: str) -> None:
        record.status = 200
        handler.send_bytes(200, self.batches[batch_id].results)

    def _run(self, batch: Batch) -> bytes:
        """The batch's result lines: each request answered, or failed by ``fail``."""
        lines = []
        for request in batch.requests:
            cid, params = request["custom_id"], request["params"]
            problem = self.fail(cid, params)
            if problem is not None:
                result: dict[str, Any] = {"type": "errored", "error": error_body(400, problem)}
            else:
                message = message_body(params, self.answer(params), self.text_reply)
                result = {"type": "succeeded", "message": message}
            lines.append(json.dumps({"custom_id": cid, "result": result}))
        return ("\n".join(lines) + "\n").encode("utf-8")

    def _batch_json(self, batch: Batch) -> dict[str, Any]:
        ended = batch.status == "ended"
        total = len(batch.requests)
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.status,
            "request_counts": {
                "processing": 0 if ended else total,
                "succeeded": total if ended else 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-02T00:00:00Z",
            "ended_at": "2026-01-01T00:01:00Z" if ended else None,
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    def input_params(self) -> list[dict[str, Any]]:
        """Every request's params of every batch created, in order."""
        return [r["params"] for b in self.batches.values() for r in b.requests]
