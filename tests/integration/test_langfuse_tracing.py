"""Generations through ``LangfuseTracer`` arrive as OTLP spans with model, usage and prompt."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest

from extraction_eval.backends.langfuse import LangfuseTracer, fetch_prompt, push_prompt
from extraction_eval.errors import ProviderError
from extraction_eval.llm.fake import FakeProvider
from extraction_eval.llm.tracing import CallTracer, GenerationHandle
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.types import DatasetItem
from tests.support.langfuse_server import FakeLangfuse

ANSWER = {"entities": [{"name": "Ada", "type": "person"}], "relationships": []}


def _generation(server: FakeLangfuse) -> dict[str, Any]:
    (span,) = [s for s in server.spans if s["name"] == "extract"]
    assert span["attributes"]["langfuse.observation.type"] == "generation"
    return span


def _keywords(function: Any) -> dict[str, tuple[Any, Any]]:
    """A callable's parameters (kind, default), ``self`` aside."""
    parameters = inspect.signature(function).parameters.items()
    return {n: (p.kind, p.default) for n, p in parameters if n != "self"}


def test_tracer_satisfies_the_protocol(server: FakeLangfuse, lf: Any) -> None:
    """The pipeline calls any ``CallTracer`` with the protocol's keywords: LangfuseTracer takes
    exactly those (names, keyword-only, defaults), and so does the handle it yields."""
    tracer: CallTracer = LangfuseTracer(lf)
    assert _keywords(tracer.generation) == _keywords(CallTracer.generation)
    with tracer.generation(name="extract", model="m", model_parameters={}, input=[]) as handle:
        assert _keywords(handle.update) == _keywords(GenerationHandle.update)
        handle.update(output=ANSWER)
    lf.flush()
    assert json.loads(_generation(server)["attributes"]["langfuse.observation.output"]) == ANSWER


def test_generation_span_carries_model_parameters_usage_and_prompt(
    server: FakeLangfuse, lf: Any
) -> None:
    push_prompt(lf, "extraction", label="staging")
    prompt = fetch_prompt(lf, "extraction", label="staging", cache_ttl_seconds=0)
    with LangfuseTracer(lf).generation(
        name="extract",
        model="gpt-test",
        model_parameters={"temperature": 0.0},
        input=[{"role": "user", "content": "Ada."}],
        prompt=prompt,  # a PromptTemplate: its LangFuse client is linked
        metadata={"item_id": "doc-1"},
    ) as generation:
        generation.update(output=ANSWER, usage_details={"input": 12, "output": 5})
    lf.flush()
    attrs = _generation(server)["attributes"]
    assert attrs["langfuse.observation.model.name"] == "gpt-test"
    assert json.loads(attrs["langfuse.observation.model.parameters"]) == {"temperature": 0.0}
    assert json.loads(attrs["langfuse.observation.usage_details"]) == {"input": 12, "output": 5}
    assert attrs["langfuse.observation.prompt.name"] == "extraction"
    assert attrs["langfuse.observation.prompt.version"] == 1
    assert json.loads(attrs["langfuse.observation.output"]) == ANSWER
    assert json.loads(attrs["langfuse.observation.metadata.item_id"]) == "doc-1"
    # and the read model agrees: the observation is a GENERATION linked to prompt v1
    obs = lf.api.observations.get_many(name="extract", fields="core,model,usage,prompt")
    assert obs.data[0].type == "GENERATION" and obs.data[0].prompt_version == 1


def test_fallback_prompt_is_not_linked(server: FakeLangfuse, lf: Any) -> None:
    prompt = fetch_prompt(lf, "missing", label="staging", max_retries=0)
    assert prompt.source == "fallback"
    with LangfuseTracer(lf).generation(
        name="extract", model="m", model_parameters={}, input="x", prompt=prompt
    ):
        pass
    lf.flush()
    attrs = _generation(server)["attributes"]
    assert "langfuse.observation.prompt.name" not in attrs


def test_exception_marks_the_generation_as_error(server: FakeLangfuse, lf: Any) -> None:
    tracer = LangfuseTracer(lf)
    with (
        pytest.raises(ProviderError),
        tracer.generation(name="extract", model="m", model_parameters={}, input="x"),
    ):
        raise ProviderError("upstream said no\nsecond line")
    lf.flush()
    span = _generation(server)
    assert span["attributes"]["langfuse.observation.level"] == "ERROR"
    assert span["attributes"]["langfuse.observation.status_message"] == (
        "upstream said no second line"
    )
    assert span["status"]["code"] == "ERROR"
    # no exception event: its traceback would carry the chained, unredacted provider error
    assert [e["name"] for e in span["events"]] == []


def test_llm_pipeline_generation_links_fetched_prompt(server: FakeLangfuse, lf: Any) -> None:
    push_prompt(lf, "extraction", label="staging")
    prompt = fetch_prompt(lf, "extraction", label="staging", cache_ttl_seconds=0)
    provider = FakeProvider.from_script(
        {"default": {**ANSWER, "usage": {"input": 30, "output": 7}}}
    )
    pipeline = LLMPipeline(
        provider=provider,
        prompt=prompt,
        config=PipelineConfig(model="fake:test", temperature=0.2, max_attempts=1),
        tracer=LangfuseTracer(lf),
    )
    item = DatasetItem(id="doc-9", text="Ada wrote the first program.")
    out = asyncio.run(pipeline.extract(item))
    assert out.extraction.entities[0].name == "Ada"
    lf.flush()
    attrs = _generation(server)["attributes"]
    assert attrs["langfuse.observation.prompt.version"] == 1
    assert json.loads(attrs["langfuse.observation.model.parameters"]) == {"temperature": 0.2}
    assert json.loads(attrs["langfuse.observation.usage_details"]) == {"input": 30, "output": 7}
    sent = json.loads(attrs["langfuse.observation.input"])
    assert "Ada wrote the first program." in sent[-1]["content"]


def test_rate_limited_span_export_is_retried_and_nothing_is_lost(
    server: FakeLangfuse, lf: Any
) -> None:
    server.fail_next("/api/public/otel/v1/traces", 1, status=429, retry_after="0.2")
    with LangfuseTracer(lf).generation(name="extract", model="m", model_parameters={}, input="x"):
        pass
    lf.flush()
    statuses = [r.status for r in server.requests_to("/api/public/otel/v1/traces")]
    assert statuses == [429, 200]
    _generation(server)
    exports = server.requests_to("/api/public/otel/v1/traces")
    assert exports[0].headers["content-encoding"] == "gzip"
    assert exports[0].headers["content-type"] == "application/x-protobuf"
