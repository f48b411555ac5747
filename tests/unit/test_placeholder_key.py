"""A keyless gateway's client carries a placeholder key (the SDKs refuse to start without
one). A twin of that provider (the format probe's) must not make the placeholder a secret:
every later text saying it would be masked, model answers and reports included."""

from __future__ import annotations

import pytest

from extraction_eval.llm.anthropic_provider import PLACEHOLDER_API_KEY as ANTHROPIC_PLACEHOLDER
from extraction_eval.llm.anthropic_provider import AnthropicProvider
from extraction_eval.llm.openai_provider import PLACEHOLDER_API_KEY as OPENAI_PLACEHOLDER
from extraction_eval.llm.openai_provider import OpenAIProvider
from extraction_eval.redact import redact


def test_an_anthropic_twin_of_a_keyless_gateway_registers_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    provider = AnthropicProvider(model="m", base_url="http://127.0.0.1:9")
    provider.clone(response_format="text")
    said = f"the gateway's key is {ANTHROPIC_PLACEHOLDER}"
    assert redact(said) == said


def test_an_openai_twin_of_a_keyless_server_registers_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    provider = OpenAIProvider(model="m", base_url="http://127.0.0.1:9/v1")
    provider.clone(response_format="text")
    said = f"the server's key is {OPENAI_PLACEHOLDER}"
    assert redact(said) == said
