"""LLMPipeline over the scripted fake: caching, parsing, failures, tracing; plus the factory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest

from extraction_eval.errors import ConfigError, InvalidValue, ProviderError, SchemaFailure
from extraction_eval.llm.base import Completion
from extraction_eval.llm.fake import FakeProvider
from extraction_eval.llm.registry import make_provider
from extraction_eval.llm.retry import RetryPolicy
from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.pipeline.baseline import BaselinePipeline
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.pipeline.user import UserPipeline
from extraction_eval.prompts.template import PromptTemplate, load_local_prompt
from extraction_eval.types import DatasetItem, Schema

ANSWER = {
    "entities": [
        {"name": "Ada", "type": "person", "evidence": "Ada works at Acme.", "attributes": []},
        {"name": "Acme", "type": "organization", "evidence": "Ada works at Acme."},
    ],
    "relationships": [
        {"source": "Ada", "type": "employed_by", "target": "Acme", "evidence": "Ada works at Acme."}
    ],
}
ITEM = DatasetItem(
    id="i1",
    text="Ada works at Acme.",
    schema=Schema(entity_types=["person", "organization"], relationship_types=["employed_by"]),
)
CONFIG = PipelineConfig(model="fake:test", temperature=0.3, max_attempts=3, timeout_s=5)


class DictCache:
    def __init__(self) -> None:
        self.data: dict[str, Completion] = {}
        self.gets = 0

    def get(self, key: str) -> Completion | None:
        self.gets += 1
        return self.data.get(key)

    def put(self, key: str, completion: Completion) -> None:
        self.data[key] = completion


class Generation:
    def __init__(self, opened: dict[str, Any]) -> None:
        self.opened = opened
        self.updates: list[dict[str, Any]] = []

    def update(self, **kwargs: Any) -> None:
        self.updates.append(kwargs)

    @property
    def merged(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for update in self.updates:
            out.update({k: v for k, v in update.items() if v is not None})
        return out


class RecordingTracer:
    def __init__(self) -> None:
        self.generations: list[Generation] = []

    @contextmanager
    def generation(self, **kwargs: Any) -> Iterator[Generation]:
        gen = Generation(kwargs)
        self.generations.append(gen)
        yield gen


def pipeline(
    script: Any,
    *,
    cache: DictCache | None = None,
    tracer: RecordingTracer | None = None,
    config: PipelineConfig = CONFIG,
    prompt: PromptTemplate | None = None,
) -> tuple[LLMPipeline, FakeProvider]:
    fake = FakeProvider.from_script(script, model="test")
    pipe = LLMPipeline(
        fake,
        prompt or load_local_prompt(),
        config,
        cache=cache,
        tracer=tracer,
        retry=RetryPolicy.immediate(max_attempts=config.max_attempts),
    )
    return pipe, fake


def extract(pipe: LLMPipeline, item: DatasetItem = ITEM) -> PipelineOutput:
    return asyncio.run(pipe.extract(item))


def test_extract_sends_the_compiled_prompt_schema_and_temperature() -> None:
    pipe, fake = pipeline({"default": ANSWER})
    out = extract(pipe)
    assert [e.name for e in out.extraction.entities] == ["Ada", "Acme"]
    assert out.attempts == 1 and not out.cache_hit and out.raw == json.dumps(ANSWER)
    assert out.prompt is pipe.prompt and out.model == "test"
    request = fake.calls[0].request
    assert request.messages == load_local_prompt().compile(ITEM.text, ITEM.schema_)
    assert request.temperature == 0.3 and request.model == "test" and request.timeout_s == 5
    assert request.json_schema is not None
    entity_type = request.json_schema["properties"]["entities"]["items"]["properties"]["type"]
    assert entity_type["enum"] == ["person", "organization"]
    assert fake.calls[0].item_id == "i1"  # the item id reaches the provider


def test_cache_hit_makes_no_model_call() -> None:
    cache = DictCache()
    pipe, fake = pipeline({"default": ANSWER}, cache=cache)
    first = extract(pipe)
    second = extract(pipe)
    assert len(fake.calls) == 1
    assert second.cache_hit and not first.cache_hit
    assert second.extraction == first.extraction and second.attempts == 0
    assert second.usage.tokens_in is None  # no tokens were spent on a hit
    # A fresh pipeline (a re-run of an unchanged config) hits the same entry.
    pipe2, fake2 = pipeline({"default": ANSWER}, cache=cache)
    assert extract(pipe2).cache_hit and fake2.calls == []


def test_cache_key_changes_with_everything_that_changes_the_answer() -> None:
    pipe, _ = pipeline(None)
    base = pipe.key_for(ITEM)
    assert base == pipeline(None)[0].key_for(ITEM)

    def key(**changes: Any) -> str:
        prompt = changes.pop("prompt", None)
        item = changes.pop("item", ITEM)
        p, _ = pipeline(None, config=replace(CONFIG, **changes), prompt=prompt)
        return p.key_for(item)

    other_prompt = PromptTemplate(
        name="extraction", messages=[{"role": "user", "content": "{{text}}"}]
    )
    variants = {
        key(temperature=0.0),
        key(model="fake:other"),
        key(prompt=other_prompt),
        key(item=ITEM.model_copy(update={"text": "Ada works at Initech."})),
        key(item=ITEM.model_copy(update={"schema_": None})),
        base,
    }
    assert len(variants) == 6
    # Not part of the key: the item id, the prompt's label / version.
    assert key(item=ITEM.model_copy(update={"id": "other"})) == base
    relabeled = replace(load_local_prompt(), label="production", version=3, source="langfuse")
    assert key(prompt=relabeled) == base


def test_schema_failure_records_raw_and_attempts_and_is_not_cached() -> None:
    cache = DictCache()
    pipe, fake = pipeline(
        {"items": {"i1": [{"error": 429}, {"text": "{not json"}, ANSWER]}}, cache=cache
    )
    with pytest.raises(SchemaFailure) as info:
        extract(pipe)
    assert info.value.raw == "{not json"
    assert info.value.attempts == 2  # the 429, then the answer that did not parse
    assert len(fake.calls) == 2 and cache.data == {}  # no retry of the schema failure itself
    # Next run calls the model again and caches the good answer.
    assert not extract(pipe).cache_hit
    assert len(fake.calls) == 3 and len(cache.data) == 1


def test_off_schema_json_is_a_schema_failure() -> None:
    pipe, _ = pipeline({"default": {"json": {"answer": "Ada"}}})
    with pytest.raises(SchemaFailure, match="neither 'entities' nor 'relationships'") as info:
        extract(pipe)
    assert info.value.raw == '{"answer": "Ada"}'


def test_fenced_answers_parse() -> None:
    pipe, _ = pipeline({"default": "```json\n" + json.dumps(ANSWER) + "\n```"})
    assert len(extract(pipe).extraction.relationships) == 1


def test_provider_errors_carry_attempts_after_bounded_retries() -> None:
    pipe, fake = pipeline({"default": {"error": 503}})
    with pytest.raises(ProviderError, match="503") as info:
        extract(pipe)
    assert info.value.attempts == 3 and len(fake.calls) == 3


def test_tracer_gets_one_generation_with_input_usage_and_prompt_link() -> None:
    tracer = RecordingTracer()
    prompt = replace(load_local_prompt(), client=object())
    pipe, _ = pipeline(
        {"default": {"json": ANSWER, "usage": {"input": 120, "output": 30}}},
        tracer=tracer,
        prompt=prompt,
    )
    extract(pipe)
    (gen,) = tracer.generations
    assert gen.opened["name"] == "extract" and gen.opened["model"] == "test"
    assert gen.opened["model_parameters"] == {"temperature": 0.3}
    assert gen.opened["prompt"] is prompt.client
    assert gen.opened["input"][0]["role"] == "system"
    assert gen.merged["usage_details"] == {"input": 120, "output": 30}
    assert gen.merged["output"]["entities"][0]["name"] == "Ada"
    assert "level" not in gen.merged


class SilentTracer(RecordingTracer):
    """A tracer that says it records nothing (as ``NullTracer`` does)."""

    records = False


def test_a_tracer_that_records_nothing_is_handed_no_input_or_output() -> None:
    """Local mode's tracer records nothing: the pipeline builds no messages list and no dump
    of the answer for it (per-item work for nobody); the answer itself is unchanged, from
    the server and from the cache."""
    silent, cache = SilentTracer(), DictCache()
    pipe, _ = pipeline({"default": {"json": ANSWER}}, tracer=silent, cache=cache)
    fresh, cached = extract(pipe), extract(pipe)
    assert cached.cache_hit and not fresh.cache_hit
    assert fresh.extraction == cached.extraction and fresh.extraction.entities[0].name == "Ada"
    assert [g.opened["input"] for g in silent.generations] == [None, None]
    assert all("output" not in g.merged for g in silent.generations)


def test_tracer_marks_failures_as_errors() -> None:
    tracer = RecordingTracer()
    pipe, _ = pipeline({"default": {"text": "nope"}}, tracer=tracer)
    with pytest.raises(SchemaFailure):
        extract(pipe)
    failed = tracer.generations[0].merged
    assert failed["level"] == "ERROR" and failed["output"] == "nope"
    assert failed["status_message"].startswith("schema failure")

    pipe, _ = pipeline({"default": {"error": 401}}, tracer=tracer)
    with pytest.raises(ProviderError):
        extract(pipe)
    assert tracer.generations[1].merged["level"] == "ERROR"


def test_default_retry_policy_comes_from_the_config() -> None:
    config = replace(CONFIG, max_attempts=2, extra={"retry_initial_wait_s": 0, "retry_jitter_s": 0})
    pipe = LLMPipeline(
        FakeProvider.from_script({"default": {"error": 500}}), load_local_prompt(), config
    )
    assert pipe._retry.max_attempts == 2 and pipe._retry.initial_wait_s == 0
    with pytest.raises(ProviderError) as info:
        extract(pipe)
    assert info.value.attempts == 2


def test_factory_picks_baseline_user_or_model_pipeline() -> None:
    assert isinstance(make_pipeline(PipelineConfig()), BaselinePipeline)
    user = make_pipeline(PipelineConfig(pipeline="json:loads"))
    assert isinstance(user, UserPipeline)
    llm = make_pipeline(PipelineConfig(model="fake:any"))
    assert isinstance(llm, LLMPipeline) and isinstance(llm.provider, FakeProvider)
    with pytest.raises(ConfigError, match="offline:baseline"):
        make_pipeline(PipelineConfig(model="offline:other"))


def test_registry_selects_providers_and_rejects_unknown_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from extraction_eval.llm.gemini_provider import GeminiProvider
    from extraction_eval.llm.openai_provider import OpenAIProvider

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-dummy")
    openai = make_provider(PipelineConfig(model="openai:gpt-4o-mini"))
    assert isinstance(openai, OpenAIProvider) and openai.model == "gpt-4o-mini"
    compat = make_provider(
        PipelineConfig(
            model="vllm:qwen", base_url="http://127.0.0.1:9/v1", extra={"response_format": "text"}
        )
    )
    assert isinstance(compat, OpenAIProvider)
    assert (compat.name, compat.model, compat.response_format) == ("vllm", "qwen", "text")
    bare = make_provider(PipelineConfig(model="llama3", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(bare, OpenAIProvider) and bare.model == "llama3"
    gemini = make_provider(PipelineConfig(model="gemini:gemini-2.5-flash"))
    assert isinstance(gemini, GeminiProvider) and gemini.model == "gemini-2.5-flash"

    cases: list[tuple[PipelineConfig, type[Exception], str]] = [
        (PipelineConfig(model="mystery:model"), ConfigError, "unknown model provider 'mystery'"),
        (PipelineConfig(model="openai-compatible:x"), InvalidValue, "base_url is required for"),
        (PipelineConfig(model="openai:"), InvalidValue, "model 'openai:' names no model"),
        (PipelineConfig(model="offline:baseline"), ConfigError, "offline baseline"),
        (
            PipelineConfig(model="openai:x", extra={"response_format": "xml"}),
            ConfigError,
            "response_format must be one of",
        ),
    ]
    for config, error, message in cases:
        with pytest.raises(error, match=message) as info:
            make_provider(config)
        assert "\n" not in str(info.value) and "--" not in str(info.value)


def test_missing_api_keys_are_config_errors_that_never_echo_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for env in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(env, raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        make_provider(PipelineConfig(model="openai:gpt-4o-mini"))
    with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
        make_provider(PipelineConfig(model="gemini:gemini-2.5-flash"))
    # A compatible server needs no key: a placeholder is used.
    provider = make_provider(
        PipelineConfig(model="ollama:llama3", base_url="http://127.0.0.1:9/v1")
    )
    assert provider.name == "ollama"
