"""``response_format``: auto-detected once per run against loopback servers that refuse some
formats the way real ones do (llama-cpp-python's 500, a 400), then recorded in the run, the
cache key and the summary; a refused request is not retried item after item.

Assertions are on what the server received."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import ConfigError, UsageError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local, estimate_run
from extraction_eval.experiments.runner import RunOutcome
from extraction_eval.llm.formats import FormatChoice
from extraction_eval.llm.openai_provider import OpenAIProvider
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.factory import make_pipeline
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.views.runs import render_run_summary
from tests.support.openai_server import (
    FormatRule,
    LoopbackServer,
    baseline_answer,
    llama_cpp_python_formats,
    sent_format,
    server_error,
)

N = 4
NO_WAIT = {"retry_initial_wait_s": 0, "retry_jitter_s": 0}


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a compatible server needs none
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture()
def store() -> LocalStore:
    return LocalStore()


def config(server: LoopbackServer, name: str, **pipeline: Any) -> RunConfig:
    return RunConfig(
        name=name,
        pipeline=PipelineConfig(model="openai:smollm2", base_url=server.url, **pipeline),
        scoring=ScoringConfig(resamples=50),
        limit=N,
        concurrency=2,
        backend="local",
    )


def run(cfg: RunConfig, store: LocalStore) -> RunOutcome:
    return asyncio.run(arun_local(cfg, store=store))


def summary_text(outcome: RunOutcome) -> str:
    console = Console(width=200, record=True, force_terminal=False)
    render_run_summary(outcome, console)
    return console.export_text()


@pytest.fixture()
def llama_like() -> Iterator[LoopbackServer]:
    with LoopbackServer(answer=baseline_answer, formats=llama_cpp_python_formats()) as srv:
        yield srv


def test_auto_falls_back_to_json_object_with_schema_on_llama_cpp_python(
    llama_like: LoopbackServer, store: LocalStore
) -> None:
    outcome = run(config(llama_like, "auto-llama"), store)
    sent = [sent_format(r.body) for r in llama_like.chat_requests]
    statuses = [r.status for r in llama_like.chat_requests]
    # one probe per format, strongest first, until one is taken; then every item that way
    assert sent == ["json_schema", "json_object_schema"] + ["json_object_schema"] * N
    assert statuses == [500] + [200] * (N + 1)
    item_body = llama_like.chat_requests[-1].body
    assert item_body["response_format"]["schema"]["required"] == ["entities", "relationships"]
    assert outcome.summary.errors == 0
    record = outcome.run.config
    assert record["response_format"] == "json_object_schema"
    choice = FormatChoice.from_json(record["response_format_choice"])
    assert choice is not None and (choice.asked, choice.how) == ("auto", "detected")
    assert [(t.format, t.outcome) for t in choice.tried] == [
        ("json_schema", "rejected"),
        ("json_object_schema", "accepted"),
    ]
    assert "Input should be 'text' or 'json_object'" in (choice.tried[0].detail or "")
    text = summary_text(outcome)
    assert "response format" in text
    assert "json_object_schema (llamacpp form) (auto: the server refused json_schema)" in text


def test_detection_walks_down_to_json_object_then_text(store: LocalStore) -> None:
    json_mode_only = FormatRule(accepts=("json_object", "text"))  # 400 for the others
    with LoopbackServer(answer=baseline_answer, formats=json_mode_only) as server:
        outcome = run(config(server, "auto-json-mode"), store)
        sent = [sent_format(r.body) for r in server.chat_requests]
    assert sent == ["json_schema", "json_object_schema", "json_object"] + ["json_object"] * N
    assert outcome.run.config["response_format"] == "json_object"

    text_only = FormatRule(accepts=("text",), status=422, message="Extra inputs are not permitted")
    with LoopbackServer(answer=baseline_answer, formats=text_only) as server:
        outcome = run(config(server, "auto-text"), store)
        sent = [sent_format(r.body) for r in server.chat_requests]
    assert sent == ["json_schema", "json_object_schema", "json_object", "text"] + ["text"] * N
    assert all("response_format" not in r.body for r in server.chat_requests[-N:])
    assert outcome.run.config["response_format"] == "text"
    assert outcome.summary.errors == 0


def test_a_pinned_format_sends_no_probe(llama_like: LoopbackServer, store: LocalStore) -> None:
    outcome = run(config(llama_like, "pinned", response_format="json_object_schema"), store)
    assert [sent_format(r.body) for r in llama_like.chat_requests] == ["json_object_schema"] * N
    choice = FormatChoice.from_json(outcome.run.config["response_format_choice"])
    assert choice is not None and choice.how == "pinned"
    assert "json_object_schema (llamacpp form) (pinned)" in summary_text(outcome)


def test_a_refused_request_is_not_retried_item_after_item(
    llama_like: LoopbackServer, store: LocalStore
) -> None:
    """Before: each item's 500 was retried (4 attempts, ≈8.5 s of backoff per item)."""
    cfg = config(llama_like, "pinned-json-schema", response_format="json_schema")
    outcome = run(cfg, store)  # the default retry policy: waits of 1 s and up between attempts
    assert len(llama_like.chat_requests) == N  # one request per item, none repeated
    results = outcome.results
    assert [r.attempts for r in results] == [1] * N
    assert all(r.error_kind == "provider" and "500" in (r.error or "") for r in results)


def test_server_errors_that_are_not_refusals_are_still_retried(store: LocalStore) -> None:
    first = store.get_items("extraction-eval")[0]
    with LoopbackServer(answer=baseline_answer) as server:
        server.inject(server_error(500, match=first.text))  # an ordinary 500: retried
        outcome = run(
            config(server, "retried", response_format="json_schema", extra=NO_WAIT), store
        )
    assert outcome.summary.errors == 0
    assert {r.item_id: r.attempts for r in outcome.results}[first.id] == 2


def test_a_server_refusing_every_format_stops_before_the_run(store: LocalStore) -> None:
    nothing = FormatRule(accepts=(), status=400, message="model does not exist here")
    with LoopbackServer(formats=nothing) as server:
        with pytest.raises(ConfigError, match="refused every response format"):
            run(config(server, "refused-all"), store)
        assert len(server.chat_requests) == 4  # one probe per format, no retry
    assert store.get_run("refused-all", "extraction-eval") is None  # nothing left behind


def test_a_failed_probe_keeps_json_schema_and_says_so(store: LocalStore) -> None:
    """A failure that is not a refusal (here: 503 on every attempt) says nothing about the
    format: the run goes on with json_schema, and a warning names the probe's failure."""
    with LoopbackServer(answer=baseline_answer) as server:
        server.inject(server_error(503, match="Ada Lovelace", times=2))
        cfg = config(server, "probe-failed", max_attempts=2, extra=NO_WAIT)
        outcome = run(cfg, store)
        sent = [sent_format(r.body) for r in server.chat_requests]
    assert sent == ["json_schema"] * (2 + N)
    assert outcome.run.config["response_format"] == "json_schema"
    assert any("response format not detected" in w and "503" in w for w in outcome.warnings)
    assert outcome.summary.errors == 0


def test_the_cache_key_follows_the_format(llama_like: LoopbackServer, store: LocalStore) -> None:
    def pipeline_for(fmt: str) -> LLMPipeline:
        pipe = make_pipeline(
            PipelineConfig(model="openai:smollm2", base_url=llama_like.url, response_format=fmt)
        )
        assert isinstance(pipe, LLMPipeline)
        return pipe

    item = store.get_items("extraction-eval")[0]
    keys = {fmt: pipeline_for(fmt).key_for(item) for fmt in ("json_schema", "json_object_schema",
                                                             "json_object", "text")}  # fmt: skip
    assert len(set(keys.values())) == 4
    # json_schema (the only format before there was a choice) keeps the key caches were made
    # with: no response_format field in it
    fields = pipeline_for("json_schema").answer_fields(item)
    assert "response_format" not in {k for k, v in fields.items() if v is not None}
    assert pipeline_for("text").answer_fields(item)["response_format"] == "text"

    # a re-run asked the same way answers from the cache; asked another way, it calls again
    first = run(config(llama_like, "cache-1"), store)
    calls = len(llama_like.chat_requests)
    again = run(config(llama_like, "cache-2"), store)
    assert again.summary.cache_hits == N and first.summary.cache_hits == 0
    assert len(llama_like.chat_requests) == calls  # the probe's answer is cached too
    other = run(config(llama_like, "cache-3", response_format="json_object"), store)
    assert other.summary.cache_hits == 0
    assert len(llama_like.chat_requests) == calls + N


def test_an_unchanged_rerun_makes_no_model_call(
    llama_like: LoopbackServer, store: LocalStore
) -> None:
    """The probe's answer is cached under the server's identity (provider, endpoint, model):
    a re-run calls nothing and records the same choice; another model, or a refreshed
    cache, probes again."""
    first = run(config(llama_like, "rerun-1"), store)
    calls = len(llama_like.chat_requests)
    assert calls == 2 + N  # json_schema refused, json_object_schema taken, the items
    again = run(config(llama_like, "rerun-2"), store)
    assert len(llama_like.chat_requests) == calls
    assert again.summary.cache_hits == N
    assert again.run.config["response_format_choice"] == first.run.config["response_format_choice"]
    refreshed = run(config(llama_like, "rerun-3", cache="refresh"), store)
    assert len(llama_like.chat_requests) == calls + 2 + N
    assert refreshed.run.config["response_format"] == "json_object_schema"
    other = RunConfig(**{**config(llama_like, "rerun-4").__dict__, "pipeline": PipelineConfig(
        model="openai:another", base_url=llama_like.url)})  # fmt: skip
    run(other, store)
    assert len(llama_like.chat_requests) == calls + 2 + N + 2 + N


def test_vllm_gets_the_schema_in_structured_outputs(store: LocalStore) -> None:
    with LoopbackServer(answer=baseline_answer) as server:
        cfg = RunConfig(
            name="vllm-form",
            pipeline=PipelineConfig(
                model="vllm:qwen", base_url=server.url, response_format="json_object_schema"
            ),
            limit=1,
            backend="local",
        )
        run(cfg, store)
        body = server.chat_requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert body["structured_outputs"]["json"]["required"] == ["entities", "relationships"]


def test_resume_refuses_a_changed_format(llama_like: LoopbackServer, store: LocalStore) -> None:
    run(config(llama_like, "resumed", response_format="json_object"), store)
    cfg = config(llama_like, "resumed", response_format="text")
    with pytest.raises(UsageError, match="response_format differ"):
        run(RunConfig(**{**cfg.__dict__, "resume": True}), store)


def test_dry_run_probes_nothing(llama_like: LoopbackServer, store: LocalStore) -> None:
    estimate_run(config(llama_like, "dry"), store=store)
    assert llama_like.chat_requests == []


def test_openai_api_itself_is_not_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    from extraction_eval.llm.formats import resolve
    from extraction_eval.llm.retry import RetryPolicy

    provider = OpenAIProvider(model="gpt-4o-mini", api_key="sk-test", response_format="auto")
    assert provider.official_api

    def no_probe(*_: Any) -> FormatChoice:
        raise AssertionError("probed OpenAI's API")

    monkeypatch.setattr("extraction_eval.llm.formats._in_thread", no_probe)
    choice = resolve(provider, None, RetryPolicy())  # type: ignore[arg-type]
    assert (choice.used, choice.how) == ("json_schema", "known")
    assert provider.response_format == "json_schema"


def test_a_failed_probe_after_a_refusal_keeps_the_format_being_probed(
    llama_like: LoopbackServer, store: LocalStore
) -> None:
    """json_schema refused, then the json_object_schema probe times out / 503s (a slow CPU
    server): the run must not go back to the refused json_schema."""
    llama_like.inject(server_error(503, match="Ada Lovelace worked", times=2))
    outcome = run(config(llama_like, "probe-failed-late", max_attempts=2, extra=NO_WAIT), store)
    sent = [sent_format(r.body) for r in llama_like.chat_requests]
    assert sent == ["json_schema"] + ["json_object_schema"] * (2 + N)
    assert outcome.run.config["response_format"] == "json_object_schema"
    assert any("sending json_object_schema" in w for w in outcome.warnings)
    assert outcome.summary.errors == 0
