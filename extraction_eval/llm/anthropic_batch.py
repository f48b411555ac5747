"""Anthropic's Message Batches API: the requests a run would make, sent as one batch, at half
the price (Anthropic's published batch discount, the same as OpenAI's: ``BATCH_DISCOUNT``).

Each request is ``{"custom_id": <response-cache key>, "params": <Messages API body>}``
(a cache key is 64 hex digits, what Anthropic's custom ids allow); the batch is created
(``messages.batches.create``), polled with backoff until its ``processing_status`` is
``ended``, and its results file is streamed line by line under the JSONL reader's rules and
matched back by ``custom_id``. The ledger, the resume of an interrupted command and the
answering of the pipeline (``BatchProvider``) are ``llm/batch.py``'s, shared with OpenAI's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from extraction_eval.errors import one_line
from extraction_eval.llm.batch import (
    BatchLedger,
    BatchRecord,
    BatchResults,
    BatchSettings,
    keep_asked,
    read_rows,
    split_requests,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

# Anthropic's limits per batch (100,000 requests, 256 MB); we stay a little below the bytes.
MAX_REQUESTS = 100_000
MAX_BYTES = 250 * 1024 * 1024
ENDED = "ended"


async def run_batches(
    client: AsyncAnthropic,
    requests: Sequence[tuple[str, dict[str, Any]]],
    ledger: BatchLedger,
    *,
    owner: str,
    model: str,
    settings: BatchSettings | None = None,
    sleep: Callable[[float], Any] = asyncio.sleep,
) -> BatchResults:
    """Answers for ``requests`` ((custom id, Messages API body)) through Message Batches.

    A batch in the ledger that covers a request and is still running, or ended with an
    answer to it, is polled (again) and read instead of paying again; a request it answered
    with an error is submitted again."""
    import anthropic

    from extraction_eval.llm.anthropic_provider import map_anthropic_error

    settings = settings or BatchSettings()
    wanted = {cid for cid, _ in requests}
    results = BatchResults()
    known = ledger.batches_covering(sorted(wanted))
    ended = [r for r in known if r.status == ENDED]
    running = [r for r in known if r.status != ENDED]
    results.resumed = [r.batch_id for r in (*ended, *running)]
    try:
        await asyncio.gather(
            *(_collect(client, r, ledger, results, settings, sleep, model) for r in ended)
        )
        covered = set(results.answers) & wanted
        for record in running:
            covered.update(set(record.custom_ids) & wanted)
        for cid in wanted - covered:
            results.errors.pop(cid, None)  # asked again below
        todo = [(cid, params) for cid, params in requests if cid not in covered]
        chunks = split_requests(
            todo,
            max_requests=min(settings.max_requests, MAX_REQUESTS),
            max_bytes=MAX_BYTES,
            size=lambda cid, params: len(json.dumps({"custom_id": cid, "params": params})),
        )
        for chunk in chunks:
            batch = await client.messages.batches.create(
                requests=[{"custom_id": cid, "params": params} for cid, params in chunk]  # type: ignore[typeddict-item]
            )
            record = BatchRecord(
                batch.id, owner, tuple(cid for cid, _ in chunk), batch.processing_status
            )
            ledger.add_batch(record)  # before polling: an interrupted command resumes it
            results.submitted.append(batch.id)
            running.append(record)
        await asyncio.gather(
            *(_collect(client, r, ledger, results, settings, sleep, model) for r in running)
        )
    except anthropic.AnthropicError as exc:
        raise map_anthropic_error(exc) from exc
    keep_asked(results, wanted)
    return results


async def _collect(
    client: AsyncAnthropic,
    record: BatchRecord,
    ledger: BatchLedger,
    results: BatchResults,
    settings: BatchSettings,
    sleep: Callable[[float], Any],
    model: str,
) -> None:
    """Poll ``record``'s batch until it has ended, then read its results for its ids."""
    delay = settings.poll_initial_s
    status = record.status
    while True:
        batch = await client.messages.batches.retrieve(record.batch_id)
        if batch.processing_status != status:
            status = batch.processing_status
            ledger.set_batch_status(record.batch_id, status)
        if status == ENDED:
            break
        await sleep(delay)
        delay = min(delay * 2, settings.poll_max_s)
    for row in await _read_results(client, record):
        _take(row, record.batch_id, results, model)


async def _read_results(client: AsyncAnthropic, record: BatchRecord) -> list[dict[str, Any]]:
    """The result lines of ``record``'s batch for its ids, streamed: each line read under the
    JSONL reader's rules (``lines.objects``), so a bad or oversized line costs only its own
    request (which then has no answer: that item's error)."""
    streamed = client.messages.batches.with_streaming_response.results(record.batch_id)
    async with streamed as response:
        return await read_rows(response.iter_bytes(), record.custom_ids)


def _take(row: dict[str, Any], batch_id: str, results: BatchResults, model: str) -> None:
    """One result line into ``results``: an answer, or the error that item will carry."""
    from extraction_eval.llm.anthropic_provider import completion_from_message

    cid = row["custom_id"]
    result = row.get("result")
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    if kind == "succeeded":
        try:
            results.answers[cid] = completion_from_message(
                result.get("message") or {}, model, batch=True
            )
        except (ValueError, AttributeError) as exc:
            results.errors[cid] = f"batch {batch_id}: {one_line(exc)}"
        return
    if kind == "errored":
        error = result.get("error")
        inner = error.get("error") if isinstance(error, dict) else None
        inner = inner if isinstance(inner, dict) else {}
        message = one_line(str(inner.get("message") or "request failed"))
        label = f" {inner['type']}" if isinstance(inner.get("type"), str) else ""
        results.errors[cid] = f"batch {batch_id}:{label} {message}"
        return
    results.errors[cid] = f"batch {batch_id}: the request {kind or 'gave no result'}"
