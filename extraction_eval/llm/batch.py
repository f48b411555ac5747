"""OpenAI's Batch API: the same requests a run would make, sent as one file, at half the price.
(Anthropic's Message Batches: ``llm/anthropic_batch.py``, answering through the same ledger
and :class:`BatchProvider`.)

Requests are written as JSONL (one chat-completion body per line, ``custom_id`` = the
response-cache key of the request, so a custom id names exactly one question), uploaded
(``files.create``, purpose ``batch``), submitted (``batches.create``, 24 h window) and polled
with backoff; the output and error files are downloaded and matched back by ``custom_id``.

Every submitted batch is written to a ledger (the local store) before it is polled, so an
interrupted command resumes polling the batches that cover its requests instead of paying
again. A request whose batch ended without an answer for it (error line, expired, cancelled,
failed) is an error of that item, never a lost one; asking for it again (``--retry-errors``,
a gold rebuild) submits it again.

:class:`BatchProvider` then stands in for the provider: the pipeline asks it as it would ask
the model, and it answers from the batch results by item, so prompts, parsing, scoring,
caching and tracing are the same code as a live run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from extraction_eval.errors import ProviderError, one_line
from extraction_eval.llm.base import Completion, CompletionRequest, reported_usage
from extraction_eval.llm.context import current_item_id

if TYPE_CHECKING:
    from openai import AsyncOpenAI

T = TypeVar("T")

# OpenAI's limits per batch input file (50,000 requests, 200 MB); we stay a little below.
MAX_REQUESTS = 50_000
MAX_BYTES = 190 * 1024 * 1024
ENDPOINT = "/v1/chat/completions"
# Batch requests cost half the synchronous price (OpenAI's published batch discount).
BATCH_DISCOUNT = 0.5
FINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class BatchRecord:
    """One submitted batch as the ledger keeps it."""

    batch_id: str
    owner: str  # what submitted it: "run NAME" or "gold DATASET ..."; for people
    custom_ids: tuple[str, ...]
    status: str
    input_file_id: str | None = None


class BatchLedger(Protocol):
    """Where submitted batches are remembered (the local store)."""

    def batches_covering(self, custom_ids: Sequence[str]) -> list[BatchRecord]: ...

    def add_batch(self, record: BatchRecord) -> None: ...

    def set_batch_status(self, batch_id: str, status: str) -> None: ...


POLL_ENV = "EXTRACTION_EVAL_BATCH_POLL_S"
MAX_REQUESTS_ENV = "EXTRACTION_EVAL_BATCH_MAX_REQUESTS"


@dataclass(frozen=True)
class BatchSettings:
    poll_initial_s: float = 5.0
    poll_max_s: float = 60.0
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES

    @classmethod
    def from_env(cls) -> BatchSettings:
        """``EXTRACTION_EVAL_BATCH_POLL_S`` (first poll interval; it doubles up to 60 s) and
        ``EXTRACTION_EVAL_BATCH_MAX_REQUESTS`` (requests per batch file)."""
        import os

        from extraction_eval.errors import ConfigError

        out = cls()
        try:
            if os.environ.get(POLL_ENV, "").strip():
                out = replace(out, poll_initial_s=float(os.environ[POLL_ENV]))
            if os.environ.get(MAX_REQUESTS_ENV, "").strip():
                out = replace(out, max_requests=int(os.environ[MAX_REQUESTS_ENV]))
        except ValueError:
            raise ConfigError(f"{POLL_ENV} / {MAX_REQUESTS_ENV} must be numbers") from None
        if out.poll_initial_s <= 0 or out.max_requests < 1:
            raise ConfigError(f"{POLL_ENV} must be > 0 and {MAX_REQUESTS_ENV} >= 1")
        return out


@dataclass
class BatchResults:
    """Answers and errors by custom id, and what happened (for the run's warnings)."""

    answers: dict[str, Completion] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)  # batch ids created now
    resumed: list[str] = field(default_factory=list)  # batch ids found in the ledger


def completion_from_body(body: Any, fallback_model: str) -> Completion:
    """A chat-completion JSON body (a batch output line's ``response.body``) as a Completion."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices:
        raise ValueError("no chat completion in the response body")
    message = choices[0].get("message") or {}
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    return Completion(
        text=message.get("content") or "",
        model=body.get("model") or fallback_model,
        usage=reported_usage(  # a count that cannot be true is priced by the estimate
            usage.get("prompt_tokens"), usage.get("completion_tokens"), details.get("cached_tokens")
        ),
        batch=True,
    )


def split_requests(
    requests: Sequence[tuple[str, T]],
    *,
    max_requests: int,
    max_bytes: int,
    size: Callable[[str, T], int],
) -> list[list[tuple[str, T]]]:
    """``requests`` in order, cut into batches within the provider's request-count and byte
    limits (``size``: the bytes one request, with its custom id, adds to its batch)."""
    out: list[list[tuple[str, T]]] = []
    current: list[tuple[str, T]] = []
    total = 0
    for custom_id, request in requests:
        length = size(custom_id, request)
        if current and (len(current) >= max_requests or total + length > max_bytes):
            out.append(current)
            current, total = [], 0
        current.append((custom_id, request))
        total += length
    if current:
        out.append(current)
    return out


async def _read_file(
    client: AsyncOpenAI, file_id: str | None, custom_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """The rows of a batch's output (or error) file for ``custom_ids``, streamed: each line
    is read under the JSONL reader's rules (``lines.objects``: at most ``MAX_LINE_BYTES``,
    UTF-8, no NUL, not too deep), so a bad or oversized line costs only its own request
    (which then has no answer: that item's error); rows for other ids are never kept."""
    if not file_id:
        return []
    async with client.files.with_streaming_response.content(file_id) as response:
        return await read_rows(response.iter_bytes(), custom_ids)


async def read_rows(
    chunks: AsyncIterator[bytes], custom_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """The JSONL rows of a streamed results file whose ``custom_id`` is one of ``custom_ids``,
    each line read under the JSONL reader's rules (``lines.objects``): a bad or oversized
    line costs only its own request (which then has no answer: that item's error)."""
    from extraction_eval.datasets.lines import objects

    wanted = set(custom_ids)
    rows = []
    async for line in stream_lines(chunks):
        for _, row, _ in objects([line]):
            if row is not None and row.get("custom_id") in wanted:
                rows.append(row)
    return rows


async def stream_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of a byte stream as they arrive, each at most ``MAX_LINE_BYTES``: a longer
    one is dropped while it arrives, and an ``Overlong`` stands in its place."""
    from extraction_eval.datasets.lines import Overlong
    from extraction_eval.limits import MAX_LINE_BYTES

    line, dropping = bytearray(), False
    async for chunk in chunks:
        for piece in chunk.splitlines(keepends=True):
            if not dropping:
                line += piece
                if len(line) > MAX_LINE_BYTES:
                    line, dropping = bytearray(), True
            if piece.endswith((b"\n", b"\r")):
                yield Overlong() if dropping else bytes(line)
                line, dropping = bytearray(), False
    if dropping or line:
        yield Overlong() if dropping else bytes(line)


async def run_batches(
    client: AsyncOpenAI,
    requests: Sequence[tuple[str, dict[str, Any]]],
    ledger: BatchLedger,
    *,
    owner: str,
    settings: BatchSettings = BatchSettings(),
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> BatchResults:
    """Answers for ``requests`` ((custom id, chat-completion body)) through the Batch API.

    Requests covered by a batch in the ledger that is still running, or that answered them,
    are not submitted again: that batch is polled (again) and read. A request a completed
    batch answered with an error is submitted again."""
    import openai

    wanted = {cid for cid, _ in requests}
    results = BatchResults()
    known = ledger.batches_covering(sorted(wanted))
    reuse: list[BatchRecord] = []
    covered: set[str] = set()
    done = [r for r in known if r.status == "completed"]
    for record in known:
        if record.status in FINAL:
            continue  # read below (completed) or asked again (failed, expired, cancelled)
        reuse.append(record)
        covered.update(set(record.custom_ids) & wanted)
    results.resumed = [r.batch_id for r in (*done, *reuse)]
    try:
        # a completed batch's answers are read now; what it answered with an error line is
        # asked again (the caller wants an answer for every request it passes)
        await asyncio.gather(*(_collect(client, r, ledger, results, settings, sleep) for r in done))
    except openai.OpenAIError as exc:
        from extraction_eval.llm.openai_provider import map_openai_error

        raise map_openai_error(exc) from exc
    covered.update(results.answers.keys() & wanted)
    for cid in wanted - covered:
        results.errors.pop(cid, None)
    todo = [
        (
            cid,
            (
                json.dumps({"custom_id": cid, "method": "POST", "url": ENDPOINT, "body": body})
                + "\n"
            ).encode(),
        )
        for cid, body in requests
        if cid not in covered
    ]
    try:
        for chunk in split_requests(
            todo,
            max_requests=settings.max_requests,
            max_bytes=settings.max_bytes,
            size=lambda _cid, line: len(line),  # the line carries its custom id
        ):
            upload = await client.files.create(
                file=("requests.jsonl", b"".join(line for _, line in chunk)), purpose="batch"
            )
            batch = await client.batches.create(
                input_file_id=upload.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={"owner": owner[:500]},
            )
            record = BatchRecord(
                batch.id, owner, tuple(cid for cid, _ in chunk), batch.status, upload.id
            )
            ledger.add_batch(record)  # before polling: an interrupted command resumes it
            results.submitted.append(batch.id)
            reuse.append(record)
        await asyncio.gather(
            *(_collect(client, r, ledger, results, settings, sleep) for r in reuse)
        )
    except openai.OpenAIError as exc:
        from extraction_eval.llm.openai_provider import map_openai_error

        raise map_openai_error(exc) from exc
    keep_asked(results, wanted)
    return results


def keep_asked(results: BatchResults, wanted: set[str]) -> None:
    """Only the requests asked for (a reused batch may cover other runs' too), each with an
    answer or an error: a request no batch answered is its item's error, never lost."""
    results.answers = {c: a for c, a in results.answers.items() if c in wanted}
    results.errors = {c: e for c, e in results.errors.items() if c in wanted}
    for cid in wanted - results.answers.keys() - results.errors.keys():
        results.errors[cid] = "the batch that covered this request gave no answer for it"


async def _collect(
    client: AsyncOpenAI,
    record: BatchRecord,
    ledger: BatchLedger,
    results: BatchResults,
    settings: BatchSettings,
    sleep: Callable[[float], Any],
) -> None:
    delay = settings.poll_initial_s
    while True:
        batch = await client.batches.retrieve(record.batch_id)
        if batch.status != record.status:
            ledger.set_batch_status(record.batch_id, batch.status)
        if batch.status in FINAL:
            break
        await sleep(delay)
        delay = min(delay * 2, settings.poll_max_s)
    model = ""
    for row in await _read_file(client, batch.output_file_id, record.custom_ids):
        cid = row.get("custom_id")
        response = row.get("response") or {}
        if not isinstance(cid, str):
            continue
        if response.get("status_code") == 200:
            try:
                results.answers[cid] = completion_from_body(response.get("body"), model)
            except (ValueError, AttributeError) as exc:
                results.errors[cid] = f"batch {record.batch_id}: {one_line(exc)}"
        else:
            results.errors[cid] = _error_text(record.batch_id, row)
    for row in await _read_file(client, batch.error_file_id, record.custom_ids):
        cid = row.get("custom_id")
        if isinstance(cid, str) and cid not in results.answers:
            results.errors[cid] = _error_text(record.batch_id, row)
    if batch.status != "completed":
        reason = f"batch {record.batch_id} {batch.status} before this request finished"
        if batch.status == "failed" and batch.errors and batch.errors.data:
            reason += f" ({one_line(batch.errors.data[0].message or '')})"
        for cid in record.custom_ids:
            if cid not in results.answers and cid not in results.errors:
                results.errors[cid] = reason


def summary_line(results: BatchResults, requests: int) -> str:
    """What a run says about its batches (one warning line)."""
    return (
        f"batch API: {requests} requests, {len(results.answers)} answered,"
        f" {len(results.errors)} without an answer (item errors);"
        f" batches submitted {', '.join(results.submitted) or 'none'}"
        + (f", resumed {', '.join(results.resumed)}" if results.resumed else "")
    )


def _error_text(batch_id: str, row: dict[str, Any]) -> str:
    error = row.get("error") or {}
    response = row.get("response") or {}
    body = response.get("body") if isinstance(response, dict) else None
    if not error and isinstance(body, dict):
        error = body.get("error") or {}
    status = response.get("status_code") if isinstance(response, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    parts = [f"batch {batch_id}"]
    if status:
        parts.append(f"status {status}")
    if code:
        parts.append(str(code))
    return ": ".join([" ".join(parts), one_line(message or "request failed")])


class BatchProvider:
    """Answers the pipeline from batch results, by the item being run (never calls a model)."""

    def __init__(self, inner: Any, by_item: dict[str, str], results: BatchResults) -> None:
        self.name = inner.name
        self.endpoint = getattr(inner, "endpoint", None)  # the same response-cache keys
        self._inner = inner
        self._by_item = by_item  # item id -> custom id
        self._results = results

    async def complete(self, request: CompletionRequest) -> Completion:
        item_id = current_item_id.get()
        cid = self._by_item.get(item_id or "")
        if cid is None:
            raise ProviderError(f"item {item_id!r} was not part of the batch", retryable=False)
        answer = self._results.answers.get(cid)
        if answer is not None:
            return answer
        raise ProviderError(
            self._results.errors.get(cid, "no batch answer for this request"), retryable=False
        )

    async def aclose(self) -> None:
        return None  # the model client was closed when the batch answers came back


async def batch_pipeline(
    pipeline: Any,
    items: Sequence[Any],
    ledger: BatchLedger,
    *,
    owner: str,
    cache: Any = None,
    settings: BatchSettings | None = None,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> BatchResults:
    """Send the items the pipeline would call the model for (not in ``cache``) as batches and
    make the pipeline answer from the results from now on."""
    from extraction_eval.errors import ConfigError
    from extraction_eval.llm.anthropic_provider import AnthropicProvider
    from extraction_eval.llm.openai_provider import OpenAIProvider

    provider = getattr(pipeline, "provider", None)
    if not isinstance(provider, (OpenAIProvider, AnthropicProvider)):
        raise ConfigError(
            "the Batch API needs an OpenAI (or OpenAI-compatible) or an Anthropic model"
        )
    requests: dict[str, dict[str, Any]] = {}
    by_item: dict[str, str] = {}
    for item in items:
        key = pipeline.key_for(item)
        if cache is not None and cache.get(key) is not None:
            continue
        by_item[item.id] = key
        requests.setdefault(key, provider.request_body(pipeline.request_for(item)))
    results = BatchResults()
    if requests and isinstance(provider, AnthropicProvider):  # Message Batches
        from extraction_eval.llm import anthropic_batch

        results = await anthropic_batch.run_batches(
            provider.client,
            list(requests.items()),
            ledger,
            owner=owner,
            model=provider.model,
            settings=settings or BatchSettings.from_env(),
            sleep=sleep,
        )
    elif requests and isinstance(provider, OpenAIProvider):
        results = await run_batches(
            provider.client,
            list(requests.items()),
            ledger,
            owner=owner,
            settings=settings or BatchSettings.from_env(),
            sleep=sleep,
        )
    # the client is not needed any more: close it on the loop that used it (LangFuse mode
    # runs the items on another loop, inside the SDK)
    await provider.aclose()
    pipeline.provider = BatchProvider(provider, by_item, results)
    return results
