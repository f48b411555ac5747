"""OpenAI and any OpenAI-compatible server (vLLM, Ollama, llama.cpp) via the official client.

The SDK's own retries are off (``max_retries=0``): retrying happens once, in ``llm.retry``,
and this module only says what is retryable. ``openai`` is imported when a provider is built,
so ``--help`` and offline runs never pay for it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from extraction_eval.errors import ConfigError, ProviderError
from extraction_eval.llm.base import Completion, CompletionRequest, reported_usage
from extraction_eval.llm.retry import ProviderTimeout, status_error
from extraction_eval.redact import register_secret

if TYPE_CHECKING:
    from openai import AsyncOpenAI

# How the answer is constrained, strongest first (``llm/formats.py`` detects which a server
# takes): OpenAI's strict ``json_schema``; ``json_object_schema``, JSON mode plus the schema the
# way the server family constrains decoding with it (see ``schema_fields``); plain JSON mode
# (the contract is still in the prompt); ``text``, no constraint at all.
ResponseFormat = Literal["json_schema", "json_object_schema", "json_object", "text"]
RESPONSE_FORMATS: tuple[str, ...] = ("json_schema", "json_object_schema", "json_object", "text")
# ``auto``: detected once per run (``llm/formats.py``); sent as ``json_schema`` until then
AUTO = "auto"
# Server families that take a schema outside ``json_schema`` each in their own way; any other
# name (openai-compatible, a custom prefix) gets llama.cpp's, the one inside response_format.
SERVER_FAMILIES: tuple[str, ...] = ("llamacpp", "vllm", "ollama")
# How the client talks HTTP. aiohttp (the SDK's own ``DefaultAioHttpClient``, the
# ``openai[aiohttp]`` extra) costs ~0.6 ms less CPU per request than the default httpx
# transport, whose connection pool re-checks every pooled connection on each request; at high
# concurrency that CPU is what limits a run (benchmarks/bench_vs_peers.py). Same errors either
# way: the SDK maps both transports' failures to the same ``openai`` exceptions.
HttpTransport = Literal["aiohttp", "httpx"]
HTTP_TRANSPORTS: tuple[str, ...] = ("aiohttp", "httpx")

# Compatible servers usually ignore the key, but the client refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"
SCHEMA_NAME = "extraction"


def _cached_tokens(usage: Any) -> int | None:
    """Prompt tokens served from OpenAI's prompt cache (part of ``prompt_tokens``)."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    return cached if isinstance(cached, int) else None


# What a server says when it refuses the request body itself. llama-cpp-python answers 500 to
# a response_format it does not know ("Input should be 'text' or 'json_object'", pydantic's);
# FastAPI-style servers say 422; vLLM and OpenAI 400 with an ``invalid_request_error``.
_INVALID_BODY_MARKERS = (
    "input should be",
    "validation error",
    "extra inputs are not permitted",
    "field required",
    "invalid_request_error",
    "unrecognized request argument",
)


def _invalid_request(status: int, message: str, body: Any) -> bool:
    """Whether the server refused the request as invalid (so sending it again cannot help)."""
    if status in (400, 422):
        return True
    if status != 500:
        return False
    text = f"{message} {body!r}"[:4000].casefold()
    return any(marker in text for marker in _INVALID_BODY_MARKERS)


def _aiohttp_connection_failure(exc: BaseException) -> bool:
    """A "timeout" that is really a refused or dropped connection under the aiohttp transport.

    The SDK's aiohttp adapter maps every ``aiohttp.ClientConnectionError`` (refused, reset,
    server disconnected) to ``httpx.ConnectTimeout``, which the SDK then raises as
    ``APITimeoutError``; httpx raises ``APIConnectionError`` for the same failures. The cause
    chain still holds aiohttp's own exception: only its timeouts are ``TimeoutError``s.
    """
    cause = exc.__cause__
    while cause is not None:
        if type(cause).__module__.startswith("aiohttp"):
            return not isinstance(cause, TimeoutError)
        cause = cause.__cause__
    return False


def _has_aiohttp() -> bool:
    """aiohttp comes with ``openai[aiohttp]`` (our dependency); an environment installed
    without it still runs, over the SDK's default httpx transport."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


def map_openai_error(exc: BaseException) -> ProviderError:
    """SDK exception -> ``ProviderError`` with ``retryable`` / ``retry_after`` filled in.

    The message names the status and the server's own message, never the request headers,
    so API keys cannot leak into logs or the store.
    """
    import openai

    if isinstance(exc, openai.APITimeoutError) and not _aiohttp_connection_failure(exc):
        return ProviderTimeout("OpenAI request timed out", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        # (an aiohttp "timeout" that was a connection failure: said the way httpx says it)
        detail = "Connection error." if isinstance(exc, openai.APITimeoutError) else exc
        return ProviderError(f"cannot connect to the OpenAI endpoint: {detail}", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = exc.message if isinstance(exc.message, str) else ""
        invalid = _invalid_request(status, detail, exc.body)
        return status_error(
            f"OpenAI API error {status}", status, exc.response.headers, detail, invalid=invalid
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(f"unexpected response from the OpenAI endpoint: {exc.message}")
    if isinstance(exc, openai.APIError):
        # A 200 whose body is not a chat completion (e.g. a proxy's broken JSON): a one-off
        # glitch as often as not, so it is worth another attempt.
        return ProviderError(
            f"bad response from the OpenAI endpoint: {exc.message}", retryable=True
        )
    return ProviderError(f"OpenAI client error: {type(exc).__name__}: {exc}")


def _check_env_url(url: str) -> None:
    """``OPENAI_BASE_URL`` (read by the SDK) held to the same rule as ``base_url``."""
    from extraction_eval.errors import InvalidValue
    from extraction_eval.validation import check_url

    try:
        check_url("OPENAI_BASE_URL", url)
    except InvalidValue as exc:
        raise ConfigError(str(exc)) from None


class OpenAIProvider:
    """Chat completions with structured outputs (strict JSON schema) where the server has them.

    ``response_format`` degrades for servers that lack json_schema (see ``RESPONSE_FORMATS``);
    ``"auto"`` is sent as json_schema until ``llm/formats.py`` has detected the server's.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        response_format: ResponseFormat | Literal["auto"] = "json_schema",
        name: str = "openai",
        client: AsyncOpenAI | None = None,
        http_transport: HttpTransport = "aiohttp",
    ) -> None:
        if response_format not in (AUTO, *RESPONSE_FORMATS):
            raise ConfigError(
                f"response_format must be one of {AUTO}, {', '.join(RESPONSE_FORMATS)}, "
                f"got {response_format!r}"
            )
        if http_transport not in HTTP_TRANSPORTS:
            raise ConfigError(
                f"http_transport must be one of {', '.join(HTTP_TRANSPORTS)}, "
                f"got {http_transport!r}"
            )
        self.name = name
        self.model = model
        self.base_url = base_url
        self.response_format: ResponseFormat | Literal["auto"] = response_format
        # how json_object_schema carries the schema: by the model's prefix (vllm:, ollama:,
        # llamacpp:); any other name gets llama.cpp's way
        self.server_family = name if name in SERVER_FAMILIES else "llamacpp"
        self.http_transport: HttpTransport = http_transport
        self.format_choice: Any = None  # the detection's record (``llm/formats.py``), once made
        self._client = client or self._make_client(base_url, api_key, http_transport)
        self._endpoint: str | None = None

    @property
    def official_api(self) -> bool:
        """Talking to OpenAI's own API (which has strict json_schema): nothing to detect."""
        return self._client.base_url.host == "api.openai.com"

    def clone(self, *, response_format: ResponseFormat) -> OpenAIProvider:
        """The same endpoint, model and key on a fresh client (e.g. for probes on another
        event loop: a client belongs to the loop that first used it)."""
        twin = OpenAIProvider(
            model=self.model,
            base_url=str(self._client.base_url),
            api_key=self._client.api_key,
            response_format=response_format,
            name=self.name,
            http_transport="httpx",
        )
        twin.server_family = self.server_family
        return twin

    @staticmethod
    def _make_client(
        base_url: str | None, api_key: str | None, http_transport: HttpTransport
    ) -> AsyncOpenAI:
        from openai import AsyncOpenAI, DefaultAioHttpClient

        env_url = os.environ.get("OPENAI_BASE_URL", "").strip()
        if base_url is None and env_url:
            _check_env_url(env_url)
        if api_key != PLACEHOLDER_API_KEY:  # a clone's keyless gateway: no secret to mask
            register_secret(api_key)  # a key given as an argument is redacted like the env's
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if base_url is None and not os.environ.get("OPENAI_BASE_URL"):
                raise ConfigError(
                    "OPENAI_API_KEY is not set; put it in the environment or .env "
                    "(or give a base URL for an OpenAI-compatible server)"
                )
            key = PLACEHOLDER_API_KEY
        http_client = (
            DefaultAioHttpClient() if http_transport == "aiohttp" and _has_aiohttp() else None
        )
        return AsyncOpenAI(api_key=key, base_url=base_url, max_retries=0, http_client=http_client)

    def _response_format(self, request: CompletionRequest) -> dict[str, Any] | None:
        fmt, schema = self.response_format, request.json_schema
        if fmt in ("json_schema", AUTO) and schema is not None:
            return {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True},
            }
        if fmt == "json_object_schema" and schema is not None and self.server_family == "llamacpp":
            # llama.cpp (its server and llama-cpp-python's): the schema becomes a grammar
            return {"type": "json_object", "schema": schema}
        if fmt == "json_object_schema" and schema is not None and self.server_family == "ollama":
            # Ollama's OpenAI endpoint reads a schema only from json_schema (into its own
            # ``format``); a top-level ``format`` is not a field it decodes there
            return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema}}
        if fmt != "text":
            return {"type": "json_object"}
        return None

    def _schema_fields(self, request: CompletionRequest) -> dict[str, Any]:
        """Body fields beside response_format that carry the schema: vLLM's structured
        outputs (``structured_outputs.json``; ``guided_json`` before vLLM 0.12)."""
        if (
            self.response_format == "json_object_schema"
            and self.server_family == "vllm"
            and request.json_schema is not None
        ):
            return {"structured_outputs": {"json": request.json_schema}}
        return {}

    @property
    def client(self) -> AsyncOpenAI:
        return self._client

    @property
    def endpoint(self) -> str:
        """Where the answers come from: the client's base URL (``base_url``, else
        ``OPENAI_BASE_URL``, else OpenAI's), as the SDK resolved it (read once: the SDK
        builds the URL's text anew on every read, part of every item's cache key)."""
        if self._endpoint is None:
            self._endpoint = str(self._client.base_url).rstrip("/")
        return self._endpoint

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The chat-completions body of ``request``: what ``complete`` sends, and what a
        Batch API line carries (in ``create``'s order, so even the bytes are the same)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        response_format = self._response_format(request)
        if response_format is not None:
            body["response_format"] = response_format
        body.update(self._schema_fields(request))
        body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        return body

    async def complete(self, request: CompletionRequest) -> Completion:
        from openai.types.chat import ChatCompletion

        body = self.request_body(request)
        try:
            # ``chat.completions.create`` minus its typed-dict transform of the request (a walk
            # of every parameter, message and the whole JSON schema: 0.5 ms of CPU per call,
            # a quarter of the client's cost; see bench_vs_peers.py). Our body is plain JSON
            # the transform leaves as it is, so the same bytes go out (a test compares them);
            # sending, auth, errors and the parsed ``ChatCompletion`` are the SDK's own.
            response = await self._client.post(
                "/chat/completions",
                cast_to=ChatCompletion,
                body=body,
                options={"timeout": request.timeout_s, "security": {"bearer_auth": True}},
            )
        except Exception as exc:
            import openai

            if isinstance(exc, openai.OpenAIError):
                raise map_openai_error(exc) from exc
            if isinstance(exc, ValueError):  # a 200 whose JSON body does not decode
                raise ProviderError(
                    f"malformed response body from the OpenAI endpoint: {exc}", retryable=True
                ) from exc
            raise
        if not getattr(response, "choices", None):
            raise ProviderError("OpenAI endpoint returned no chat completion", retryable=True)
        message = response.choices[0].message
        usage = response.usage
        return Completion(
            text=message.content or "",
            model=response.model or self.model,
            finish_reason=response.choices[0].finish_reason,
            usage=reported_usage(  # a count that cannot be true is priced by the estimate
                getattr(usage, "prompt_tokens", None),
                getattr(usage, "completion_tokens", None),  # reasoning included
                _cached_tokens(usage),
            ),
        )

    async def aclose(self) -> None:
        """Close the HTTP connections (call once, at the end of a run, on the same loop)."""
        await self._client.close()
