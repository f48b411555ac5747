"""``anthropic:MODEL`` through the official ``anthropic`` SDK against a loopback server that
speaks the Messages API (``tests/support/anthropic_server.py``): the forced tool call, a text
reply read leniently, retries with Retry-After, errors as rows, usage and prices, the response
cache, Message Batches, and the key kept out of everything stored or shown."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore, default_home
from extraction_eval.cli import app
from extraction_eval.errors import ConfigError, InvalidValue, ProviderError
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local, run_experiment
from extraction_eval.llm.anthropic_provider import TOOL_NAME, AnthropicProvider
from extraction_eval.llm.base import ChatMessage, CompletionRequest
from extraction_eval.llm.formats import resolve
from extraction_eval.llm.registry import make_provider
from extraction_eval.llm.retry import RetryPolicy
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.baseline import extract_baseline
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.prompts.contract import extraction_json_schema
from extraction_eval.types import DatasetItem
from tests.support.anthropic_server import AnthropicServer
from tests.support.batches import polling_interrupted
from tests.support.openai_server import (
    baseline_answer,
    echo_auth,
    input_text,
    malformed_body,
    rate_limited,
    server_error,
    slow,
)

runner = CliRunner()
SECRET = "anth-DO-NOT-LEAK-77c1f0"  # not sk-shaped: masked because it is the configured key
PRICED = "claude-haiku-4-5"  # a model genai-prices lists under Anthropic (flat prices)
FAST = {"retry_initial_wait_s": 0, "retry_max_wait_s": 0, "retry_jitter_s": 0}


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("EXTRACTION_EVAL_BATCH_POLL_S", "0.01")
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def items() -> list[DatasetItem]:
    return LocalStore().get_items(SAMPLE_DATASET)[:6]


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(answer=baseline_answer) as s:
        yield s


def config(server: AnthropicServer, name: str, model: str = "claude-x", **kw: Any) -> RunConfig:
    pipeline = PipelineConfig(
        model=f"anthropic:{model}",
        base_url=server.url,
        max_attempts=kw.pop("max_attempts", 3),
        extra=FAST | kw.pop("extra", {}),
        response_format=kw.pop("response_format", "json_schema"),  # no probe in the counts
    )
    return RunConfig(dataset=SAMPLE_DATASET, name=name, pipeline=pipeline, backend="local", **kw)


def run_cli(*args: str) -> Any:
    result = runner.invoke(app, ["run", *args])
    assert result.exit_code == 0, result.output
    return result


def run_claude(server: AnthropicServer, name: str, limit: int, *extra: str) -> Any:
    """``run`` of the first ``limit`` items on ``anthropic:claude-x`` through ``server``."""
    model = ["--model", "anthropic:claude-x", "--base-url", server.url]
    return run_cli("--name", name, "--limit", str(limit), *model, *extra)


def test_cli_run_speaks_the_messages_api_with_a_forced_tool_call(
    server: AnthropicServer, items: list[DatasetItem]
) -> None:
    args = ["--name", "a1", "--limit", "4", "--model", "anthropic:claude-x"]
    run_cli(*args, "--base-url", server.url)
    sent = server.message_requests
    # the format probe (a gateway, not Anthropic's API: the tool call is probed), then 4 items
    assert len(sent) == 5 and all(r.status == 200 for r in sent)
    assert not [r for r in server.requests if "chat/completions" in r.path]  # not OpenAI's
    schema = extraction_json_schema(items[0].schema_)
    for request in sent:
        assert request.headers["anthropic-version"]
        assert request.headers["authorization"] == f"Bearer {SECRET}"  # SDK 2.x
        assert request.headers["x-api-key"] == SECRET  # what gateways for SDK 1.x read
        body = request.body
        assert body["model"] == "claude-x" and body["max_tokens"] > 0
        assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
        (tool,) = body["tools"]
        assert tool["name"] == TOOL_NAME and tool["input_schema"] == schema
        assert body["system"] and [m["role"] for m in body["messages"]] == ["user"]
        assert "temperature" not in body
    run = LocalStore().get_run("a1")
    assert run is not None and run.config["response_format"] == "json_schema"
    results = LocalStore().results(run.id)
    assert len(results) == 4 and all(r.ok and r.repairs == [] for r in results)
    assert {r.item_id for r in results} == {i.id for i in items[:4]}
    # the answer is the tool's input, as JSON text
    text_of = {i.id: i.text for i in items}
    for r in results:
        expected = extract_baseline(text_of[r.item_id]).model_dump(mode="json")
        assert json.loads(r.raw_output or "") == expected


def test_usage_and_price_are_recorded_and_a_rerun_is_answered_from_the_cache(
    server: AnthropicServer,
) -> None:
    first = run_experiment(config(server, "p1", model=PRICED, limit=4))
    rates = Pricer("anthropic", PRICED).record()
    assert rates["provider_id"] == "anthropic" and rates["model_id"] == PRICED
    by_text = {input_text(r.body): r.body for r in server.message_requests}
    for result in first.results:
        assert result.ok and result.usage.tokens_in and result.usage.tokens_out
        price = (
            result.usage.tokens_in * rates["input_per_mtok"]
            + result.usage.tokens_out * rates["output_per_mtok"]
        ) / 1e6
        assert result.usage.cost_usd == pytest.approx(price)
    assert len(by_text) == 4
    calls = len(server.message_requests)
    again = run_experiment(config(server, "p2", model=PRICED, limit=4))
    assert len(server.message_requests) == calls  # no call at all
    assert all(r.ok and r.cache_hit for r in again.results)


def test_a_rerun_on_a_gateway_recalls_the_probed_format_and_calls_nothing(
    server: AnthropicServer,
) -> None:
    """The probe's answer is kept in the response cache (as for an OpenAI-compatible
    server): an unchanged re-run asks the gateway nothing, not even the probe."""
    run_experiment(config(server, "f1", limit=2, response_format="auto"))
    calls = len(server.message_requests)
    assert calls == 3  # the probe, then the 2 items
    again = run_experiment(config(server, "f2", limit=2, response_format="auto"))
    assert len(server.message_requests) == calls
    assert all(r.ok and r.cache_hit for r in again.results)


def test_a_gateway_without_tools_is_asked_for_text_and_a_fenced_reply_is_repaired(
    items: list[DatasetItem],
) -> None:
    with AnthropicServer(
        answer=baseline_answer,
        refuse_tools=True,
        text_reply=lambda text: f"Here it is:\n```json\n{text}\n```",
    ) as server:
        result = run_claude(server, "t1", 3)
        sent = server.message_requests
    # the probe's tool call refused (400), its text call taken, then the 3 items as text
    assert [r.status for r in sent] == [400, 200, 200, 200, 200]
    assert all("tools" not in r.body for r in sent[1:])
    run = LocalStore().get_run("t1")
    assert run is not None and run.config["response_format"] == "text"
    assert run.summary["repairs"]  # counted in the summary
    results = LocalStore().results(run.id)
    assert len(results) == 3 and all(r.ok and r.repairs for r in results)
    assert "answers repaired" in " ".join(result.output.split())


def test_429_is_retried_after_retry_after_and_500s_exhausted_are_an_error_row(
    server: AnthropicServer, items: list[DatasetItem]
) -> None:
    wait = 1.0
    server.inject(
        rate_limited(retry_after=wait, match=items[0].text),
        server_error(500, match=items[1].text, times=3),
        server_error(529, match=items[2].text),  # overloaded: retried
    )
    outcome = asyncio.run(arun_local(config(server, "r1", limit=4), store=LocalStore()))
    by_id = {r.item_id: r for r in outcome.results}
    assert len(by_id) == 4  # nothing missing
    assert by_id[items[0].id].ok and by_id[items[0].id].attempts == 2
    tries = [r for r in server.message_requests if input_text(r.body) == items[0].text]
    assert [r.status for r in tries] == [429, 200]
    assert tries[1].received_at - tries[0].received_at >= wait * 0.95  # Retry-After honoured
    failed = by_id[items[1].id]
    assert not failed.ok and failed.error_kind == "provider" and failed.attempts == 3
    assert "500" in (failed.error or "") and "api_error" in (failed.error or "")
    assert by_id[items[2].id].ok and by_id[items[2].id].attempts == 2
    stored = LocalStore().results(outcome.run.id)
    assert {r.item_id for r in stored} == set(by_id)  # the error row is stored too


def test_errors_say_whether_to_retry_and_how_long_to_wait(server: AnthropicServer) -> None:
    request = CompletionRequest(
        messages=(ChatMessage("user", "x"),), model="claude-x", json_schema={"type": "object"}
    )

    async def refusals(count: int) -> list[ProviderError]:
        provider = AnthropicProvider(model="claude-x", base_url=server.url)
        out = []
        try:
            for _ in range(count):
                with pytest.raises(ProviderError) as caught:
                    await provider.complete(request)
                out.append(caught.value)
        finally:
            await provider.aclose()
        return out

    server.inject(rate_limited(retry_after=7), server_error(529), server_error(400))
    limited, overloaded, invalid = asyncio.run(refusals(3))
    assert limited.retryable and limited.retry_after == 7
    assert "429 rate_limit_error: injected 429" in str(limited)
    assert overloaded.retryable and "overloaded_error" in str(overloaded)
    assert not invalid.retryable and invalid.invalid_request
    server.error_headers = {"x-should-retry": "false"}
    server.inject(server_error(500))
    (told,) = asyncio.run(refusals(1))
    assert not told.retryable  # the server's x-should-retry wins over the status


def test_a_call_past_its_timeout_is_retried_then_a_timeout_row(
    server: AnthropicServer, items: list[DatasetItem]
) -> None:
    server.inject(slow(3.0, match=items[0].text), slow(3.0, match=items[1].text, times=2))
    run = replace(config(server, "slow", limit=2, max_attempts=2), concurrency=2)
    run = replace(run, pipeline=replace(run.pipeline, timeout_s=0.5))
    by_id = {r.item_id: r for r in run_experiment(run).results}
    assert by_id[items[0].id].ok and by_id[items[0].id].attempts == 2
    late = by_id[items[1].id]
    assert not late.ok and late.error_kind == "timeout" and late.attempts == 2


def test_a_malformed_body_is_retried_and_one_that_stays_broken_is_an_error_row(
    server: AnthropicServer, items: list[DatasetItem]
) -> None:
    server.inject(malformed_body(match=items[0].text), malformed_body(match=items[1].text, times=3))
    outcome = run_experiment(config(server, "m1", limit=3))
    by_id = {r.item_id: r for r in outcome.results}
    assert by_id[items[0].id].ok and by_id[items[0].id].attempts == 2
    broken = by_id[items[1].id]
    assert not broken.ok and broken.attempts == 3 and "malformed" in (broken.error or "")
    assert by_id[items[2].id].ok


def test_batch_mode_goes_through_message_batches_at_half_price(
    server: AnthropicServer, items: list[DatasetItem]
) -> None:
    server.fail = lambda _cid, params: (
        "prompt is too long" if input_text(params) == items[1].text else None
    )
    outcome = run_experiment(config(server, "b1", model=PRICED, limit=4, batch=True))
    assert not server.message_requests  # no synchronous call
    (batch_id,) = server.batches
    params = server.input_params()
    assert len(params) == 4 and all(p["tool_choice"]["name"] == TOOL_NAME for p in params)
    rates = Pricer("anthropic", PRICED).record()
    by_id = {r.item_id: r for r in outcome.results}
    assert len(by_id) == 4
    errored = by_id[items[1].id]
    assert not errored.ok and "prompt is too long" in (errored.error or "")
    for item in (items[0], items[2], items[3]):
        got = by_id[item.id]
        assert got.ok and got.usage.tokens_in
        full = (
            got.usage.tokens_in * rates["input_per_mtok"]
            + (got.usage.tokens_out or 0) * rates["output_per_mtok"]
        ) / 1e6
        assert got.usage.cost_usd == pytest.approx(full / 2)
    assert any("batch API: 4 requests, 3 answered" in w for w in outcome.warnings)
    with LocalStore() as store:
        ids = [r["custom_id"] for r in server.batches[batch_id].requests]
        (record,) = store.batches_covering(ids)
        assert record.batch_id == batch_id and record.status == "ended"


def test_an_interrupted_batch_is_polled_again_and_an_errored_request_asked_again(
    server: AnthropicServer, items: list[DatasetItem], monkeypatch: pytest.MonkeyPatch
) -> None:
    import extraction_eval.llm.anthropic_batch as batch_mod

    with polling_interrupted(monkeypatch, batch_mod):
        run_experiment(config(server, "rb", limit=3, batch=True))
    (first,) = server.batches
    server.fail = lambda _cid, params: "overloaded" if input_text(params) == items[0].text else None
    outcome = run_experiment(config(server, "rb", limit=3, batch=True))
    assert list(server.batches) == [first]  # polled the same batch, submitted nothing new
    assert any(f"resumed {first}" in w for w in outcome.warnings)
    assert sum(not r.ok for r in outcome.results) == 1 and len(outcome.results) == 3
    server.fail = lambda _cid, _params: None  # recovered
    again = run_experiment(
        config(server, "rb", limit=3, batch=True, resume=True, retry_errors=True)
    )
    # the ended batch's errored result is not an answer: that request goes in a new batch
    assert len(server.batches) == 2 and len(server.batches[list(server.batches)[1]].requests) == 1
    assert len(again.results) == 3 and all(r.ok for r in again.results)


def test_large_batch_runs_are_split(
    server: AnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXTRACTION_EVAL_BATCH_MAX_REQUESTS", "2")
    outcome = run_experiment(config(server, "split", limit=5, batch=True))
    assert sorted(len(b.requests) for b in server.batches.values()) == [1, 2, 2]
    assert len(outcome.results) == 5 and all(r.ok for r in outcome.results)


def test_the_key_echoed_by_the_server_never_reaches_store_exports_or_logs(
    server: AnthropicServer, items: list[DatasetItem], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.inject(echo_auth(status=401, match=items[0].text))
    result = run_claude(server, "s1", 3, "--response-format", "json_schema")
    echoed = [r for r in server.message_requests if r.fault == "echo"]
    assert len(echoed) == 1  # the server did quote the key back
    run = LocalStore().get_run("s1")
    assert run is not None
    (row,) = [r for r in LocalStore().results(run.id) if not r.ok]
    assert row.item_id == items[0].id and "***" in (row.error or "")
    exported = runner.invoke(app, ["runs", "export", "s1", "--format", "jsonl"]).stdout
    shown = runner.invoke(app, ["runs", "show", "s1", "--item", items[0].id]).stdout
    store = b"".join(p.read_bytes() for p in default_home().glob("store.db*"))
    for text in (
        result.output,
        exported,
        shown,
        caplog.text,
        json.dumps(run.config),
        store.decode("latin-1"),
    ):
        assert SECRET not in text


def test_a_set_temperature_is_one_warning_and_never_sent(server: AnthropicServer) -> None:
    result = run_claude(server, "w1", 2, "--temperature", "0.7", "--response-format", "json_schema")
    assert "temperature 0.7 is not sent to Anthropic" in " ".join(result.output.split())
    assert all("temperature" not in r.body for r in server.message_requests)


def test_the_provider_is_chosen_and_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    made = make_provider(PipelineConfig(model="anthropic:claude-x", base_url="http://127.0.0.1:9"))
    assert isinstance(made, AnthropicProvider) and made.endpoint == "http://127.0.0.1:9"
    official = make_provider(PipelineConfig(model="anthropic:claude-x"))
    request = CompletionRequest(messages=(ChatMessage("user", "x"),), model="claude-x")
    choice = resolve(official, request, RetryPolicy.immediate())  # Anthropic's API: no probe
    assert choice.how == "known" and choice.summary() == "json_schema (auto: Anthropic's API)"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        make_provider(PipelineConfig(model="anthropic:claude-x"))
    lower = PipelineConfig(
        model="anthropic:claude-x", base_url="http://127.0.0.1:9", extra={"max_tokens": 4096}
    )
    made_lower = make_provider(lower)
    assert isinstance(made_lower, AnthropicProvider)
    assert made_lower.request_body(request)["max_tokens"] == 4096
    with pytest.raises(InvalidValue, match="max_tokens"):
        make_provider(replace(lower, extra={"max_tokens": 0}))
    with pytest.raises(InvalidValue, match=r"\(ANTHROPIC_API_KEY\), not in the URL"):
        PipelineConfig(model="anthropic:claude-x", base_url="http://u:pw@127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/?key=k")
    with pytest.raises(ConfigError, match=r"ANTHROPIC_BASE_URL must not carry .*ANTHROPIC_API"):
        make_provider(PipelineConfig(model="anthropic:claude-x"))
    with pytest.raises(InvalidValue, match="response_format"):
        make_provider(
            PipelineConfig(
                model="anthropic:claude-x",
                base_url="http://127.0.0.1:9",
                response_format="json_object",
            )
        )
