"""The OpenAI client over both HTTP transports (aiohttp, the default, and httpx) against the
loopback server: every failure becomes the same ``ProviderError`` (type, retryable,
retry_after, message) whichever transport carried the request, so the retry policy and the
stored ``error_kind`` do not depend on it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from extraction_eval.errors import ConfigError, InvalidValue, ProviderError
from extraction_eval.llm.base import ChatMessage, CompletionRequest
from extraction_eval.llm.openai_provider import OpenAIProvider
from extraction_eval.llm.registry import make_provider
from extraction_eval.pipeline.base import PipelineConfig
from tests.support.openai_server import (
    Fault,
    LoopbackServer,
    disconnect,
    malformed_body,
    rate_limited,
    server_error,
    slow,
)

TRANSPORTS = ("aiohttp", "httpx")
REQUEST = CompletionRequest(
    messages=(ChatMessage("user", "Ada Lovelace met Charles Babbage."),),
    model="gpt-test",
    json_schema={"type": "object", "properties": {}, "additionalProperties": False},
    timeout_s=5.0,
)


@pytest.fixture()
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def call(provider: OpenAIProvider, request: CompletionRequest = REQUEST) -> Any:
    """One ``complete`` on a fresh loop; the outcome (a completion or the raised error)."""

    async def go() -> Any:
        try:
            return await provider.complete(request)
        except ProviderError as exc:
            return exc
        finally:
            await provider.aclose()

    return asyncio.run(go())


def outcome(error: Any) -> tuple[str, bool, float | None, str]:
    assert isinstance(error, ProviderError), error
    return (type(error).__name__, error.retryable, error.retry_after, str(error))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_default_transport_is_aiohttp(server: LoopbackServer) -> None:
    from openai import DefaultAioHttpClient

    provider = OpenAIProvider(model="gpt-test", base_url=server.url, api_key="sk-test")
    assert isinstance(provider._client._client, DefaultAioHttpClient)
    chosen = make_provider(PipelineConfig(model="openai:gpt-test", base_url=server.url))
    assert isinstance(chosen, OpenAIProvider)
    assert isinstance(chosen._client._client, DefaultAioHttpClient)
    plain = make_provider(
        PipelineConfig(
            model="openai:gpt-test", base_url=server.url, extra={"http_transport": "httpx"}
        )
    )
    assert isinstance(plain, OpenAIProvider)
    assert not isinstance(plain._client._client, DefaultAioHttpClient)


def test_an_unknown_transport_is_a_clear_error(server: LoopbackServer) -> None:
    with pytest.raises(InvalidValue, match=r"http_transport.*aiohttp, httpx.*'h3'"):
        make_provider(
            PipelineConfig(
                model="openai:gpt-test", base_url=server.url, extra={"http_transport": "h3"}
            )
        )
    with pytest.raises(ConfigError, match="http_transport"):
        OpenAIProvider(model="m", base_url=server.url, http_transport="h3")  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_completion_is_the_same_over_either_transport(
    server: LoopbackServer, transport: Any
) -> None:
    provider = OpenAIProvider(
        model="gpt-test", base_url=server.url, api_key="sk-test", http_transport=transport
    )
    completion = call(provider)
    assert completion.text == '{"entities": [], "relationships": []}'
    assert completion.model == "gpt-test" and completion.usage.tokens_in
    (request,) = server.chat_requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["response_format"]["json_schema"]["strict"] is True


FAULTS: dict[str, tuple[Fault | None, tuple[str, bool, float | None, str]]] = {
    "429 with Retry-After": (
        rate_limited(retry_after=2),
        ("ProviderError", True, 2.0, "OpenAI API error 429: Error code: 429"),
    ),
    "500": (
        server_error(500),
        ("ProviderError", True, None, "OpenAI API error 500: Error code: 500"),
    ),
    "400": (
        server_error(400),
        ("ProviderError", False, None, "OpenAI API error 400: Error code: 400"),
    ),
    "slow beyond the timeout": (
        slow(3.0),
        ("ProviderTimeout", True, None, "OpenAI request timed out"),
    ),
    "malformed body": (malformed_body(), ("ProviderError", True, None, "malformed response")),
    "disconnect": (
        disconnect(),
        ("ProviderError", True, None, "cannot connect to the OpenAI endpoint"),
    ),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_failures_map_to_the_same_error_over_either_transport(
    server: LoopbackServer, fault: str
) -> None:
    injected, (kind, retryable, retry_after, message) = FAULTS[fault]
    seen = {}
    for transport in TRANSPORTS:
        if injected is not None:
            server.inject(Fault(**{**injected.__dict__}))
        provider = OpenAIProvider(
            model="gpt-test", base_url=server.url, api_key="sk-test", http_transport=transport
        )
        request = REQUEST if fault != "slow beyond the timeout" else _with_timeout(0.3)
        seen[transport] = outcome(call(provider, request))
    assert seen["aiohttp"][:3] == seen["httpx"][:3] == (kind, retryable, retry_after)
    assert seen["aiohttp"][3].startswith(message) and seen["httpx"][3].startswith(message)
    if fault != "malformed body":  # (the JSON decoder's own words differ: aiohttp reads it)
        assert seen["aiohttp"][3] == seen["httpx"][3]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nothing_listening_is_a_retryable_connection_error(transport: Any) -> None:
    provider = OpenAIProvider(
        model="gpt-test",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        api_key="sk-test",
        http_transport=transport,
    )
    assert outcome(call(provider)) == (
        "ProviderError",
        True,
        None,
        "cannot connect to the OpenAI endpoint: Connection error.",
    )


def _with_timeout(seconds: float) -> CompletionRequest:
    return CompletionRequest(
        messages=REQUEST.messages,
        model=REQUEST.model,
        json_schema=REQUEST.json_schema,
        timeout_s=seconds,
    )


@pytest.mark.parametrize("response_format", ["json_schema", "json_object", "text"])
def test_the_request_on_the_wire_is_what_chat_completions_create_sends(
    server: LoopbackServer, response_format: Any
) -> None:
    """The provider sends its body without the SDK's typed-dict transform (CPU): the same
    path, headers and JSON as the SDK's own ``chat.completions.create`` with the same
    arguments."""
    from openai import AsyncOpenAI

    provider = OpenAIProvider(
        model="gpt-test", base_url=server.url, api_key="sk-test", response_format=response_format
    )
    call(provider)
    kwargs: dict[str, Any] = {}
    fmt = provider._response_format(REQUEST)
    if fmt is not None:
        kwargs["response_format"] = fmt

    async def through_create() -> None:
        client = AsyncOpenAI(api_key="sk-test", base_url=server.url, max_retries=0)
        try:
            await client.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": REQUEST.messages[0].content}],
                temperature=0.0,
                timeout=5.0,
                **kwargs,
            )
        finally:
            await client.close()

    asyncio.run(through_create())
    ours, sdk = server.chat_requests
    assert ours.path == sdk.path == "/v1/chat/completions"
    assert ours.body == sdk.body and ours.raw == sdk.raw
    volatile = {"x-stainless-async", "user-agent", "content-length", "host", "connection"}
    volatile |= {"accept-encoding", "x-stainless-read-timeout"}
    assert {k: v for k, v in ours.headers.items() if k not in volatile} == {
        k: v for k, v in sdk.headers.items() if k not in volatile
    }
    assert ours.headers["authorization"] == "Bearer sk-test"
    assert ours.headers["x-stainless-read-timeout"] == sdk.headers["x-stainless-read-timeout"]


def test_without_aiohttp_installed_the_client_falls_back_to_httpx(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from openai import DefaultAioHttpClient

    monkeypatch.setitem(sys.modules, "aiohttp", None)  # ``import aiohttp`` now fails
    provider = OpenAIProvider(model="gpt-test", base_url=server.url, api_key="sk-test")
    assert not isinstance(provider._client._client, DefaultAioHttpClient)
    assert call(provider).text and len(server.chat_requests) == 1
