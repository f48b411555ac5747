"""The scripted fake provider: per-item answers, injected failures, call records, registration."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.errors import ConfigError, ProviderError
from extraction_eval.llm.base import ChatMessage, Completion, CompletionRequest
from extraction_eval.llm.context import item_context
from extraction_eval.llm.fake import (
    LOG_ENV,
    SCRIPT_ENV,
    FakeProvider,
    register_fake,
    unregister_fake,
)
from extraction_eval.llm.registry import make_provider
from extraction_eval.llm.retry import ProviderTimeout, RetryPolicy, call_with_retry
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import Entity, Extraction
from tests.support.fake_log import read_fake_log

ANSWER = {"entities": [{"name": "Ada", "type": "person"}], "relationships": []}


def request(text: str) -> CompletionRequest:
    return CompletionRequest(
        messages=(ChatMessage("system", "sys"), ChatMessage("user", f"<text>\n{text}\n</text>")),
        model="m",
    )


def complete(fake: FakeProvider, text: str, item_id: str | None = None) -> Completion:
    async def go() -> Completion:
        with item_context(item_id):
            return await fake.complete(request(text))

    return asyncio.run(go())


def complete_with_retry(
    fake: FakeProvider, text: str, item_id: str | None, policy: RetryPolicy
) -> tuple[Completion, int]:
    async def go() -> tuple[Completion, int]:
        with item_context(item_id):
            return await call_with_retry(lambda: fake.complete(request(text)), policy)

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(SCRIPT_ENV, raising=False)
    monkeypatch.delenv(LOG_ENV, raising=False)
    yield
    unregister_fake()


def test_unscripted_calls_get_an_empty_extraction_and_are_recorded() -> None:
    fake = FakeProvider.from_script(None)
    out = complete(fake, "anything", "i1")
    assert json.loads(out.text) == {"entities": [], "relationships": []}
    assert out.usage.tokens_in and out.usage.tokens_out
    assert [(c.item_id, c.rule, c.outcome) for c in fake.calls] == [("i1", None, "ok")]


def test_per_item_sequence_with_injected_errors_is_played_across_attempts() -> None:
    fake = FakeProvider.from_script(
        {
            "items": {
                "i1": [
                    {"error": 429, "retry_after": 0.01},
                    {"error": 500},
                    {"error": "timeout"},
                    {"json": ANSWER, "usage": {"input": 11, "output": 7}},
                ]
            }
        }
    )
    out, attempts = complete_with_retry(fake, "Ada", "i1", RetryPolicy.immediate(max_attempts=5))
    assert attempts == 4 and json.loads(out.text) == ANSWER
    assert (out.usage.tokens_in, out.usage.tokens_out) == (11, 7)
    assert [c.outcome for c in fake.calls] == [
        "error:429",
        "error:500",
        "error:timeout",
        "ok",
    ]
    # Another item does not consume i1's script.
    complete(fake, "Ada", "i2")
    assert fake.call_count(item_id="i1") == 4 and fake.call_count(item_id="i2") == 1
    assert fake.calls[-1].rule is None


def test_errors_say_what_is_retryable() -> None:
    fake = FakeProvider.from_script(
        {
            "rules": [
                {"item": "a", "response": {"error": 429, "retry_after": 2}},
                {"item": "b", "response": {"error": 400}},
                {"item": "c", "response": {"error": "timeout"}},
                {"item": "d", "response": {"error": "connection"}},
                {"item": "e", "response": {"error": 503, "retryable": False}},
            ]
        }
    )
    errors: dict[str, ProviderError] = {}
    for item in "abcde":
        with pytest.raises(ProviderError) as info:
            complete(fake, "x", item)
        errors[item] = info.value
    assert errors["a"].retryable and errors["a"].retry_after == 2.0
    assert not errors["b"].retryable
    assert isinstance(errors["c"], ProviderTimeout) and errors["c"].retryable
    assert errors["d"].retryable
    assert not errors["e"].retryable


def test_last_response_repeats_once_the_sequence_is_exhausted() -> None:
    fake = FakeProvider.from_script([{"item": "i", "responses": ["first", "second"]}])
    assert [complete(fake, "t", "i").text for _ in range(4)] == [
        "first",
        "second",
        "second",
        "second",
    ]
    assert [c.index for c in fake.calls] == [0, 1, 2, 3]


def test_contains_rules_match_the_user_message_and_count_per_input() -> None:
    fake = FakeProvider.from_script(
        {"contains": {"Paris": [{"text": "{not json"}, ANSWER]}, "default": "DEFAULT"}
    )
    assert complete(fake, "He lives in Paris.").text == "{not json"
    assert complete(fake, "She lives in Paris too.").text == "{not json"  # another input
    assert json.loads(complete(fake, "He lives in Paris.").text) == ANSWER
    assert complete(fake, "Berlin").text == "DEFAULT"
    assert fake.call_count(contains="Paris") == 3


def test_rules_can_require_both_item_and_substring() -> None:
    fake = FakeProvider.from_script([{"item": "i", "contains": "Ada", "response": "hit"}])
    assert complete(fake, "Ada", "i").text == "hit"
    assert complete(fake, "Bob", "i").text != "hit"
    assert complete(fake, "Ada", "j").text != "hit"


def test_scripted_sleep_trips_the_per_call_timeout() -> None:
    fake = FakeProvider.from_script({"items": {"slow": {"sleep": 5, "text": "late"}}})
    with pytest.raises(ProviderTimeout) as info:
        complete_with_retry(
            fake, "x", "slow", RetryPolicy.immediate(max_attempts=2, timeout_s=0.05)
        )
    assert info.value.attempts == 2
    assert [c.outcome for c in fake.calls] == ["cancelled", "cancelled"]


def test_python_scripts_accept_callables_and_extraction_objects() -> None:
    extraction = Extraction(entities=[Entity(name="Ada", type="person")])
    fake = FakeProvider.from_script(
        {
            "items": {"obj": extraction},
            "default": lambda req: {"json": {"entities": [], "relationships": [], "n": 1}},
        }
    )
    assert Extraction.model_validate_json(complete(fake, "x", "obj").text) == extraction
    assert json.loads(complete(fake, "x", "other").text)["n"] == 1


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"rulez": []}, "unknown key"),
        ({"rules": [{"item": "a"}]}, "no 'responses'"),
        ({"rules": [{"item": "a", "responses": [{"eror": 429}]}]}, "unknown key"),
        ({"default": 42}, "must be a string"),
        ("not a script", "JSON object or a list"),
    ],
)
def test_bad_scripts_are_config_errors(script: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FakeProvider.from_script(script)


def test_registry_builds_fakes_from_the_env_script_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"items": {"i1": [{"error": 500}, ANSWER]}}))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv(SCRIPT_ENV, str(script))
    monkeypatch.setenv(LOG_ENV, str(log))
    provider = make_provider(PipelineConfig(model="fake:scripted"))
    assert isinstance(provider, FakeProvider) and provider.name == "fake"
    out, attempts = complete_with_retry(provider, "x", "i1", RetryPolicy.immediate())
    assert attempts == 2 and json.loads(out.text) == ANSWER
    assert [(c["item_id"], c["outcome"]) for c in read_fake_log(log)] == [
        ("i1", "error:500"),
        ("i1", "ok"),
    ]


def test_env_script_errors_are_one_line_config_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SCRIPT_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="cannot read"):
        make_provider(PipelineConfig(model="fake:x"))
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    monkeypatch.setenv(SCRIPT_ENV, str(bad))
    with pytest.raises(ConfigError, match="not JSON"):
        make_provider(PipelineConfig(model="fake:x"))


def test_registered_fake_is_the_instance_the_registry_returns() -> None:
    fake = register_fake("counted", {"default": ANSWER})
    assert make_provider(PipelineConfig(model="fake:counted")) is fake
    assert make_provider(PipelineConfig(model="fake:other")) is not fake
    unregister_fake("counted")
    assert make_provider(PipelineConfig(model="fake:counted")) is not fake


def test_rules_can_require_a_model_and_a_temperature() -> None:
    """What a matrix test needs: one script, a different answer per model and temperature."""
    fake = FakeProvider.from_script(
        [
            {"model": "m", "temperature": 0.7, "response": "m-hot"},
            {"model": ["m", "n"], "response": "m-or-n"},
        ]
    )

    def ask(model: str, temperature: float) -> str:
        req = CompletionRequest(
            messages=(ChatMessage("user", "x"),), model=model, temperature=temperature
        )
        return asyncio.run(fake.complete(req)).text

    assert ask("m", 0.7) == "m-hot"
    assert ask("m", 0.0) == "m-or-n"
    assert ask("n", 0.7) == "m-or-n"
    assert ask("o", 0.7) != "m-hot"
    with pytest.raises(ConfigError, match="temperature"):
        FakeProvider.from_script([{"temperature": "hot", "response": "x"}])
