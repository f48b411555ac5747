"""The real ``openai`` (and ``google-genai``) clients over real HTTP against a loopback server.

Assertions are on what the server received: how many requests, with what parameters, and
what the pipeline made of each answer. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from extraction_eval.errors import ProviderError, SchemaFailure
from extraction_eval.llm.base import Completion
from extraction_eval.llm.retry import ProviderTimeout, RetryPolicy
from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.types import DatasetItem, Schema
from tests.support.openai_server import (
    LoopbackServer,
    baseline_answer,
    content,
    input_text,
    malformed_body,
    rate_limited,
    server_error,
    slow,
)

ITEM = DatasetItem(
    id="i1",
    text="Maria Gonzalez works for Acme Corp. She lives in Madrid.",
    schema=Schema(
        entity_types=["person", "organization", "location"],
        relationship_types=["employed_by", "lived_in"],
    ),
)
NO_WAIT = RetryPolicy(max_attempts=3, timeout_s=5.0, initial_wait_s=0, jitter_s=0)


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-dummy")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture()
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(answer=baseline_answer) as srv:
        yield srv


def openai_pipeline(
    server: LoopbackServer, retry: RetryPolicy = NO_WAIT, **config: Any
) -> LLMPipeline:
    cfg = PipelineConfig(model="openai:gpt-test", base_url=server.url, temperature=0.25, **config)
    pipe = make_pipeline(cfg, retry=retry)
    assert isinstance(pipe, LLMPipeline)
    return pipe


def extract(pipe: LLMPipeline, item: DatasetItem = ITEM) -> PipelineOutput:
    """One item through the pipeline, then close its client on the same event loop."""

    async def go() -> PipelineOutput:
        try:
            return await pipe.extract(item)
        finally:
            await pipe.aclose()

    return asyncio.run(go())


def test_request_carries_model_temperature_schema_and_key(server: LoopbackServer) -> None:
    out = extract(openai_pipeline(server))
    (request,) = server.chat_requests
    body = request.body
    assert body["model"] == "gpt-test" and body["temperature"] == 0.25
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert input_text(body) == ITEM.text
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["entities"]["items"]["properties"]["type"][
        "enum"
    ] == ["person", "organization", "location"]
    assert request.headers["authorization"] == "Bearer sk-test-dummy"
    assert ("Maria Gonzalez", "employed_by", "Acme Corp.") in {
        (r.source, r.type, r.target) for r in out.extraction.relationships
    }
    assert out.attempts == 1 and out.usage.tokens_in and out.usage.tokens_out


def test_429_is_retried_after_the_servers_retry_after(server: LoopbackServer) -> None:
    server.inject(rate_limited(retry_after=1))
    started = time.monotonic()
    out = extract(openai_pipeline(server))
    elapsed = time.monotonic() - started
    assert server.statuses() == [429, 200]
    assert out.attempts == 2
    assert elapsed >= 0.95  # the policy's own backoff is zero here: this wait is Retry-After
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert gap >= 0.95


def test_5xx_is_retried_and_4xx_is_not(server: LoopbackServer) -> None:
    server.inject(server_error(500), server_error(503))
    assert extract(openai_pipeline(server)).attempts == 3
    assert server.statuses() == [500, 503, 200]

    server.inject(server_error(400))
    with pytest.raises(ProviderError, match="400") as info:
        extract(openai_pipeline(server))
    assert not info.value.retryable and info.value.attempts == 1
    assert server.statuses()[3:] == [400]


def test_exhausted_retries_raise_with_attempts(server: LoopbackServer) -> None:
    server.inject(server_error(502, times=5))
    with pytest.raises(ProviderError, match="502") as info:
        extract(openai_pipeline(server))
    assert info.value.attempts == 3 and server.statuses() == [502, 502, 502]


def test_slow_responses_time_out_after_bounded_attempts(server: LoopbackServer) -> None:
    server.inject(slow(3.0, times=3))
    policy = RetryPolicy(max_attempts=3, timeout_s=0.2, initial_wait_s=0, jitter_s=0)
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        extract(openai_pipeline(server, retry=policy, timeout_s=0.2))
    assert time.monotonic() - started < 2.5
    assert info.value.attempts == 3 and info.value.retryable
    assert len(server.chat_requests) == 3


def test_slow_then_fast_recovers(server: LoopbackServer) -> None:
    server.inject(slow(3.0))
    policy = RetryPolicy(max_attempts=3, timeout_s=0.3, initial_wait_s=0, jitter_s=0)
    out = extract(openai_pipeline(server, retry=policy, timeout_s=0.3))
    assert out.attempts == 2 and len(server.chat_requests) == 2


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("{not json", "invalid JSON"),
        ('{"answer": "Maria Gonzalez"}', "neither 'entities' nor 'relationships'"),
        ('{"entities": [{"name": "Maria"}], "relationships": []}', "entities.0.type"),
    ],
)
def test_malformed_or_off_schema_content_is_a_schema_failure_without_retry(
    server: LoopbackServer, answer: str, message: str
) -> None:
    server.inject(content(answer))
    with pytest.raises(SchemaFailure, match=message) as info:
        extract(openai_pipeline(server))
    assert info.value.raw == answer and info.value.attempts == 1
    assert len(server.chat_requests) == 1


def test_malformed_response_body_is_a_retryable_provider_error(server: LoopbackServer) -> None:
    server.inject(malformed_body())
    out = extract(openai_pipeline(server))
    assert out.attempts == 2 and server.statuses() == [200, 200]
    assert server.requests[0].fault == "malformed_body"


def test_cache_hit_sends_nothing(server: LoopbackServer) -> None:
    class DictCache(dict[str, Completion]):
        def put(self, key: str, completion: Completion) -> None:
            self[key] = completion

    cache = DictCache()
    first_pipe, second_pipe = openai_pipeline(server), openai_pipeline(server)
    first_pipe.cache = second_pipe.cache = cache
    first = extract(first_pipe)
    second = extract(second_pipe)  # a re-run of the same config
    assert not first.cache_hit and second.cache_hit
    assert second.extraction == first.extraction
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize(
    ("mode", "expected"), [("json_object", {"type": "json_object"}), ("text", None)]
)
def test_response_format_fallbacks_for_compatible_servers(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, mode: str, expected: Any
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")  # a compatible server needs no key
    cfg = PipelineConfig(model="vllm:qwen2.5", base_url=server.url, extra={"response_format": mode})
    pipe = make_pipeline(cfg, retry=NO_WAIT)
    assert isinstance(pipe, LLMPipeline)
    extract(pipe)
    body = server.chat_requests[0].body
    assert body.get("response_format") == expected
    assert body["model"] == "qwen2.5"
    assert server.chat_requests[0].headers["authorization"] == "Bearer not-needed"


def test_concurrent_calls_overlap(server: LoopbackServer) -> None:
    server.latency_s = 0.2
    pipe = openai_pipeline(server)
    items = [
        ITEM.model_copy(update={"id": f"i{n}", "text": f"Ada Brook {n} works for Acme Corp."})
        for n in range(20)
    ]

    async def run_all() -> list[PipelineOutput]:
        try:
            return await asyncio.gather(*(pipe.extract(item) for item in items))
        finally:
            await pipe.aclose()

    outputs = asyncio.run(run_all())
    assert len(outputs) == 20 and len(server.chat_requests) == 20
    # one after another, the server would never hold more than one request at a time
    assert server.max_in_flight == 20


def test_gemini_sdk_over_loopback_retries_and_sends_the_response_schema(
    server: LoopbackServer,
) -> None:
    server.inject(rate_limited(retry_after=0), server_error(500))
    cfg = PipelineConfig(model="gemini:gemini-test", base_url=server.root_url, temperature=0.5)
    pipe = make_pipeline(cfg, retry=NO_WAIT)
    assert isinstance(pipe, LLMPipeline)
    out = extract(pipe)
    assert out.attempts == 3 and server.statuses() == [429, 500, 200]
    request = server.requests[-1]
    assert request.path.endswith("/models/gemini-test:generateContent")
    assert request.headers["x-goog-api-key"] == "gm-test-dummy"
    generation = request.body["generationConfig"]
    assert generation["temperature"] == 0.5
    assert generation["responseMimeType"] == "application/json"
    schema = json.dumps(generation["responseSchema"])
    assert "additionalProperties" not in schema and '"enum": ["employed_by", "lived_in"]' in schema
    assert "systemInstruction" in request.body
    assert input_text(request.body) == ITEM.text
    assert {e.name for e in out.extraction.entities} >= {"Maria Gonzalez", "Acme Corp."}


def test_gemini_errors_map_status_and_retry_delay(server: LoopbackServer) -> None:
    server.inject(server_error(403))
    cfg = PipelineConfig(model="gemini:gemini-test", base_url=server.root_url)
    pipe = make_pipeline(cfg, retry=NO_WAIT)
    assert isinstance(pipe, LLMPipeline)
    with pytest.raises(ProviderError, match="Gemini API error 403") as info:
        extract(pipe)
    assert not info.value.retryable and info.value.attempts == 1


def test_gemini_retry_info_in_error_details_is_honoured() -> None:
    from google.genai import errors

    from extraction_eval.llm.gemini_provider import map_gemini_error

    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"}],
        }
    }
    mapped = map_gemini_error(errors.ClientError(429, body, None))
    assert mapped.retryable and mapped.retry_after == 17.0
    assert "RESOURCE_EXHAUSTED" in str(mapped)
