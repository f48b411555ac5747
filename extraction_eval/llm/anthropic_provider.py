"""Claude through the official ``anthropic`` SDK (the Messages API).

The structured-output contract rides in a forced tool call: one tool whose ``input_schema``
is the extraction JSON schema, and ``tool_choice`` naming it, so the model's answer is the
tool's input (a JSON object the API has already parsed). A server that refuses tools (a
gateway speaking only part of the Messages API) is asked for plain text instead, found once
per run by the format probe (``llm/formats.py``); its reply is then read by the same lenient
reader as every other (``prompts/replies.py``).

The SDK's own retries are off (``max_retries=0``): retrying happens once, in ``llm.retry``, and
this module only says what is retryable. ``anthropic`` is imported when a provider is built.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Literal

from extraction_eval.errors import ConfigError, InvalidValue, ProviderError
from extraction_eval.llm.base import Completion, CompletionRequest, reported_usage
from extraction_eval.llm.retry import ProviderTimeout, status_error
from extraction_eval.redact import register_secret

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
OFFICIAL_HOST = "api.anthropic.com"
# How the answer is constrained, strongest first: ``json_schema`` is the forced tool call
# carrying the schema; ``text`` is no constraint (the contract is still in the prompt).
AnthropicFormat = Literal["json_schema", "text"]
FORMATS: tuple[str, ...] = ("json_schema", "text")
AUTO = "auto"
# The Messages API requires ``max_tokens``. An extraction answer of one document is far
# below this; a reply cut here ends with stop_reason "max_tokens" (recorded as "length").
DEFAULT_MAX_TOKENS = 8192
TOOL_NAME = "record_extraction"
TOOL_DESCRIPTION = "Record the entities and relationships extracted from the text."
# The Messages API refuses every sampling parameter (temperature, top_p, top_k; 400 "Extra
# inputs are not permitted", whatever the value) since API version 2026-10-21, the one the
# SDK 2.x sends, and the SDK has no such parameter any more. The temperature of a run still
# keys the response cache (an answer asked for at 0.7 is not reused for 0).
SAMPLING_NOTE = (
    "temperature {t:g} is not sent to Anthropic: its Messages API takes no sampling"
    " parameters (API version 2026-10-21); Claude samples at its own setting"
)
# A gateway that ignores the key still needs one for the client to start.
PLACEHOLDER_API_KEY = "not-needed"


def map_anthropic_error(exc: BaseException) -> ProviderError:
    """SDK exception -> ``ProviderError`` with ``retryable`` / ``retry_after`` filled in.

    The message names the status, the error type and the server's own message, never the
    request headers (``ProviderError`` redacts it anyway: a proxy may echo the key)."""
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderTimeout("Anthropic request timed out", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError(f"cannot connect to the Anthropic endpoint: {exc}", retryable=True)
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind = exc.type if isinstance(exc.type, str) else None
        detail = exc.api_message if isinstance(exc.api_message, str) else None
        if detail is None:  # not the Messages API's error shape: whatever the SDK read
            detail = exc.message if isinstance(exc.message, str) else ""
        invalid = status in (400, 422) or kind == "invalid_request_error"
        label = f"Anthropic API error {status}" + (f" {kind}" if kind else "")
        return status_error(label, status, exc.response.headers, detail, invalid=invalid)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(f"unexpected response from the Anthropic endpoint: {exc.message}")
    if isinstance(exc, anthropic.APIError):
        # a 200 whose body is not a message (a proxy's broken JSON): often a one-off glitch
        return ProviderError(
            f"bad response from the Anthropic endpoint: {exc.message}", retryable=True
        )
    return ProviderError(f"Anthropic client error: {type(exc).__name__}: {exc}")


def _tokens_in(usage: Any) -> Any:
    """Every input token of the call: the API counts cache reads and cache writes apart
    from ``input_tokens``. A part that is not a whole number >= 0 is handed on as it is,
    for ``reported_usage`` to refuse."""
    parts: list[Any] = [_get(usage, "input_tokens")]
    parts += [
        _get(usage, k) or 0 for k in ("cache_read_input_tokens", "cache_creation_input_tokens")
    ]
    for count in parts:
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return count
    return sum(parts)


def _get(obj: Any, name: str) -> Any:
    """A field of an SDK object or of the same thing as a JSON dict (a batch result line)."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def completion_from_message(
    message: Any, fallback_model: str, *, batch: bool = False
) -> Completion:
    """A Messages API ``message`` (SDK object or JSON dict) as a Completion: the forced
    tool's input as JSON text, else the text blocks joined (a text-format answer)."""
    blocks = _get(message, "content")
    if not isinstance(blocks, list):
        raise ValueError("no message content in the response")
    text = None
    for block in blocks:
        if _get(block, "type") == "tool_use" and _get(block, "name") == TOOL_NAME:
            text = json.dumps(_get(block, "input"), ensure_ascii=False)
            break
    if text is None:
        text = "".join(str(_get(b, "text") or "") for b in blocks if _get(b, "type") == "text")
    usage = _get(message, "usage")
    stop = _get(message, "stop_reason")
    return Completion(
        text=text,
        model=str(_get(message, "model") or fallback_model),
        finish_reason="length" if stop == "max_tokens" else stop,
        batch=batch,
        usage=reported_usage(  # a count that cannot be true is priced by the estimate
            _tokens_in(usage) if usage is not None else None,
            _get(usage, "output_tokens") if usage is not None else None,
            _get(usage, "cache_read_input_tokens") if usage is not None else None,
            names=("input_tokens", "output_tokens"),
        ),
    )


def _check_env_url(url: str) -> None:
    """``ANTHROPIC_BASE_URL`` (read by the SDK) held to the same rule as ``base_url``."""
    from extraction_eval.validation import check_url

    try:
        check_url(BASE_URL_ENV, url, key_env=API_KEY_ENV)
    except InvalidValue as exc:
        raise ConfigError(str(exc)) from None


class AnthropicProvider:
    """Messages API calls whose answer is a forced tool call (or plain text, see module doc).

    ``response_format`` is ``auto`` (the tool call, unless the probe finds it refused),
    ``json_schema`` (the tool call) or ``text``."""

    formats = FORMATS  # what the format probe tries, strongest first
    server_family = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        response_format: str = AUTO,
        name: str = "anthropic",
        client: AsyncAnthropic | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
    ) -> None:
        if response_format not in (AUTO, *FORMATS):
            raise InvalidValue(
                "response_format",
                f"for an anthropic: model must be {AUTO}, json_schema (a forced tool call) or"
                f" text, got {response_format!r}",
            )
        self.name = name
        self.model = model
        self.base_url = base_url
        self.response_format = response_format
        self.max_tokens = max_tokens
        self.format_choice: Any = None  # the probe's record (``llm/formats.py``), once made
        # what the run should say before its results (``experiments/prepare.py``)
        self.warnings = [SAMPLING_NOTE.format(t=temperature)] if temperature else []
        self._client = client or self._make_client(base_url, api_key)

    @staticmethod
    def _make_client(base_url: str | None, api_key: str | None) -> AsyncAnthropic:
        from anthropic import AsyncAnthropic

        env_url = os.environ.get(BASE_URL_ENV, "").strip()
        if base_url is None and env_url:
            _check_env_url(env_url)
        if api_key != PLACEHOLDER_API_KEY:  # a clone's keyless gateway: no secret to mask
            register_secret(api_key)  # a key given as an argument is redacted like the env's
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            if base_url is None and not env_url:
                raise ConfigError(
                    f"{API_KEY_ENV} is not set; put it in the environment or .env"
                    " (or give a base URL for an Anthropic-compatible gateway)"
                )
            key = PLACEHOLDER_API_KEY
        # An explicit key: the SDK then reads no credential files or other variables. SDK 2.x
        # sends it as ``Authorization: Bearer``; gateways written for the 1.x SDK read only
        # ``x-api-key`` (the API takes either, and x-api-key when both come), so both go.
        return AsyncAnthropic(
            api_key=key,
            base_url=base_url or env_url or None,
            max_retries=0,
            default_headers={"x-api-key": key},
        )

    @property
    def client(self) -> AsyncAnthropic:
        return self._client

    @property
    def endpoint(self) -> str:
        """Where the answers come from (part of the response-cache key)."""
        return str(self._client.base_url).rstrip("/")

    @property
    def official_api(self) -> bool:
        """Anthropic's own API takes the forced tool call: nothing to probe."""
        return self._client.base_url.host == OFFICIAL_HOST

    def clone(self, *, response_format: str) -> AnthropicProvider:
        """The same endpoint, model and key on a fresh client (probes run on another loop)."""
        return AnthropicProvider(
            model=self.model,
            base_url=str(self._client.base_url),
            api_key=self._client.api_key,
            response_format=response_format,
            name=self.name,
            max_tokens=self.max_tokens,
        )

    def request_body(self, request: CompletionRequest) -> dict[str, Any]:
        """The Messages API parameters of ``request``: what ``complete`` sends, and what a
        Message Batches request carries as its ``params``. No temperature: see
        ``SAMPLING_NOTE``."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": [
                {"role": "assistant" if m.role == "assistant" else "user", "content": m.content}
                for m in request.messages
                if m.role != "system"
            ],
        }
        if system:
            body["system"] = system
        if self.response_format != "text" and request.json_schema is not None:
            body["tools"] = [
                {
                    "name": TOOL_NAME,
                    "description": TOOL_DESCRIPTION,
                    "input_schema": request.json_schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        return body

    async def complete(self, request: CompletionRequest) -> Completion:
        body = self.request_body(request)
        try:
            message = await self._client.messages.create(**body, timeout=request.timeout_s)
        except Exception as exc:
            import anthropic

            if isinstance(exc, anthropic.AnthropicError):
                raise map_anthropic_error(exc) from exc
            if isinstance(exc, ValueError):  # a 200 whose JSON body does not decode
                raise ProviderError(
                    f"malformed response body from the Anthropic endpoint: {exc}", retryable=True
                ) from exc
            raise
        try:
            return completion_from_message(message, self.model)
        except ValueError as exc:
            raise ProviderError(
                f"Anthropic endpoint returned no message: {exc}", retryable=True
            ) from exc

    async def aclose(self) -> None:
        """Close the HTTP connections (call once, at the end of a run, on the same loop)."""
        await self._client.close()
