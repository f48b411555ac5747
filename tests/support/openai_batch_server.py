"""A loopback server for OpenAI's Batch API (stdlib only), driven by the official client.

It speaks ``POST /v1/files`` (multipart upload), ``GET /v1/files/{id}/content``,
``POST /v1/batches``, ``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel``. A batch
is ``validating``, then ``in_progress`` for ``polls_before_done`` retrievals, then it runs its
requests through ``answer`` (chat-completion content) or ``fail`` (an error line) and is
``completed`` — or ``expired`` after ``expire_after`` requests, the rest unanswered, as a
real batch that runs out of its 24 h window.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], "str | dict[str, Any]"]
Fail = Callable[[str, dict[str, Any]], "tuple[int, str] | None"]


def _empty(_: dict[str, Any]) -> dict[str, Any]:
    return {"entities": [], "relationships": []}


def _never(_: str, __: dict[str, Any]) -> tuple[int, str] | None:
    return None


@dataclass
class Batch:
    id: str
    input_file_id: str
    endpoint: str
    metadata: dict[str, Any]
    created_at: int
    status: str = "validating"
    polls: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(
        default_factory=lambda: {"total": 0, "completed": 0, "failed": 0}
    )

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "created_at": self.created_at,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "request_counts": self.counts,
            "metadata": self.metadata,
        }


@dataclass
class BatchServer:
    answer: Answer = _empty
    fail: Fail = _never
    polls_before_done: int = 1
    expire_after: int | None = None  # requests answered before the batch expires
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # id -> (purpose, bytes)
    batches: dict[str, Batch] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)  # (method, path)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def __enter__(self) -> BatchServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                owner._handle(self, "GET", b"")

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                owner._handle(self, "POST", self.rfile.read(n) if n else b"")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def input_lines(self, batch_id: str) -> list[dict[str, Any]]:
        data = self.files[self.batches[batch_id].input_file_id][1]
        return [json.loads(x) for x in data.decode().splitlines() if x.strip()]

    # --- handling ------------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, method: str, raw: bytes) -> None:
        path = h.path.split("?")[0].rstrip("/")
        with self._lock:
            self.calls.append((method, path))
            status, body, ctype = self._route(method, path, raw, h.headers.get("Content-Type", ""))
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)

    def _route(self, method: str, path: str, raw: bytes, ctype: str) -> tuple[int, Any, str]:
        js = "application/json"
        parts = path.split("/")
        if method == "POST" and path == "/v1/files":
            return 200, self._upload(raw, ctype), js
        if method == "GET" and len(parts) == 5 and parts[2] == "files" and parts[4] == "content":
            found = self.files.get(parts[3])
            if found is None:
                return 404, {"error": {"message": "no such file"}}, js
            return 200, found[1], "application/octet-stream"
        if method == "POST" and path == "/v1/batches":
            req = json.loads(raw)
            if req.get("input_file_id") not in self.files:
                return 400, {"error": {"message": "input file not found"}}, js
            batch = Batch(
                id=f"batch_{len(self.batches) + 1}",
                input_file_id=req["input_file_id"],
                endpoint=req["endpoint"],
                metadata=req.get("metadata") or {},
                created_at=int(time.time()),
            )
            self.batches[batch.id] = batch
            return 200, batch.json(), js
        if len(parts) >= 4 and parts[2] == "batches":
            batch = self.batches.get(parts[3])
            if batch is None:
                return 404, {"error": {"message": "no such batch"}}, js
            if method == "POST" and len(parts) == 5 and parts[4] == "cancel":
                if batch.status not in ("completed", "failed", "expired"):
                    batch.status = "cancelled"
                return 200, batch.json(), js
            if method == "GET" and len(parts) == 4:
                self._advance(batch)
                return 200, batch.json(), js
        return 404, {"error": {"message": f"no route {method} {path}"}}, js

    def _upload(self, raw: bytes, ctype: str) -> dict[str, Any]:
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + raw
        )
        purpose, data, name = "", b"", "upload"
        for part in message.iter_parts():
            field_name = part.get_param("name", header="content-disposition")
            content = part.get_payload(decode=True) or b""
            if field_name == "purpose":
                purpose = content.decode()
            elif field_name == "file":
                data = content
                name = part.get_filename() or name
        file_id = f"file-{len(self.files) + 1}"
        self.files[file_id] = (purpose, data)
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": name,
            "purpose": purpose,
            "status": "processed",
        }

    def _advance(self, batch: Batch) -> None:
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return
        batch.polls += 1
        if batch.status == "validating":
            batch.status = "in_progress"
        if batch.polls <= self.polls_before_done:
            return
        lines = [
            json.loads(x)
            for x in self.files[batch.input_file_id][1].decode().splitlines()
            if x.strip()
        ]
        batch.counts["total"] = len(lines)
        out, err = [], []
        for n, line in enumerate(lines):
            if self.expire_after is not None and n >= self.expire_after:
                break
            cid, body = line["custom_id"], line["body"]
            failed = self.fail(cid, body)
            if failed is not None:
                status, message = failed
                err.append(
                    {
                        "id": f"req_{n}",
                        "custom_id": cid,
                        "response": {
                            "status_code": status,
                            "request_id": f"r{n}",
                            "body": {"error": {"message": message, "code": "invalid_request"}},
                        },
                        "error": None,
                    }
                )
                batch.counts["failed"] += 1
                continue
            answer = self.answer(body)
            text = answer if isinstance(answer, str) else json.dumps(answer)
            words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            out.append(
                {
                    "id": f"req_{n}",
                    "custom_id": cid,
                    "response": {
                        "status_code": 200,
                        "request_id": f"r{n}",
                        "body": {
                            "id": f"chatcmpl-{n}",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": body.get("model", "loopback"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {
                                "prompt_tokens": words,
                                "completion_tokens": len(text.split()),
                                "total_tokens": words + len(text.split()),
                            },
                        },
                    },
                    "error": None,
                }
            )
            batch.counts["completed"] += 1
        for rows, attr in ((out, "output_file_id"), (err, "error_file_id")):
            if rows:
                file_id = f"file-{len(self.files) + 1}"
                data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                self.files[file_id] = ("batch_output", data)
                setattr(batch, attr, file_id)
        expired = self.expire_after is not None and self.expire_after < len(lines)
        batch.status = "expired" if expired else "completed"
