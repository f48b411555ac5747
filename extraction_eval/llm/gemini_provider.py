"""Gemini through the official ``google-genai`` SDK (``google-generativeai`` is deprecated).

JSON mode with a response schema; the SDK's own retries stay off (its default) so the shared
policy in ``llm.retry`` is the only one. ``google.genai`` is imported when a provider is built.
"""

from __future__ import annotations

import copy
import os
import re
from typing import TYPE_CHECKING, Any

from extraction_eval.errors import ConfigError, ProviderError
from extraction_eval.llm.base import Completion, CompletionRequest, reported_usage
from extraction_eval.llm.retry import ProviderTimeout, retry_after_from_headers

if TYPE_CHECKING:
    from google import genai

API_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _output_tokens(usage: Any) -> Any:
    """Answer plus thinking tokens: Gemini bills both as output but counts them apart. A
    count that is not a whole number >= 0 is handed on as it is, for ``reported_usage`` to
    refuse (a negative thinking count must not shrink the answer's)."""
    answer: Any = getattr(usage, "candidates_token_count", None)
    thoughts: Any = getattr(usage, "thoughts_token_count", None) or 0
    for count in (answer, thoughts):
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return count
    return answer + thoughts


def to_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Our strict JSON schema -> Gemini's OpenAPI-subset ``response_schema``.

    Gemini has no ``additionalProperties``, spells optionality ``nullable`` and answers in
    schema order only when ``propertyOrdering`` says so.
    """

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(x) for x in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("additionalProperties", "$schema", "title"):
                continue
            if key == "type" and isinstance(value, list):
                kinds = [v for v in value if v != "null"]
                out["type"] = kinds[0] if kinds else "string"
                if "null" in value:
                    out["nullable"] = True
            elif key == "properties" and isinstance(value, dict):
                out["properties"] = {k: convert(v) for k, v in value.items()}
                out["propertyOrdering"] = list(value)
            else:
                out[key] = convert(value)
        return out

    converted: dict[str, Any] = convert(copy.deepcopy(schema))
    return converted


def _retry_delay(details: Any) -> float | None:
    """``google.rpc.RetryInfo.retryDelay`` ("17s") from an error body, when the API sent one."""
    error = details.get("error", details) if isinstance(details, dict) else None
    items = error.get("details") if isinstance(error, dict) else None
    if not isinstance(items, list):
        return None
    for item in items:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION.match(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _transport_classes() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeout classes, transport-error classes) of whichever httpx flavours are installed."""
    timeouts: list[type[BaseException]] = []
    transport: list[type[BaseException]] = []
    for module_name in ("httpx", "httpx2"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        transport.append(module.TransportError)
    return tuple(timeouts), tuple(transport)


def map_gemini_error(exc: BaseException) -> ProviderError:
    """SDK / transport exception -> ``ProviderError`` with ``retryable`` and ``retry_after``."""
    from google.genai import errors

    if isinstance(exc, errors.APIError):
        code = int(exc.code or 0)
        retryable = code in (408, 429) or code >= 500
        retry_after = None
        if retryable:
            headers = getattr(exc.response, "headers", None)
            retry_after = retry_after_from_headers(headers) if headers is not None else None
            if retry_after is None:
                retry_after = _retry_delay(exc.details)
        status = f" {exc.status}" if exc.status else ""
        message = f": {exc.message}" if exc.message else ""
        return ProviderError(
            f"Gemini API error {code}{status}{message}",
            retryable=retryable,
            retry_after=retry_after,
        )
    timeouts, transport = _transport_classes()
    if isinstance(exc, timeouts):
        return ProviderTimeout("Gemini request timed out", retryable=True)
    if isinstance(exc, transport):
        return ProviderError(f"cannot connect to the Gemini API: {exc}", retryable=True)
    return ProviderError(f"Gemini client error: {type(exc).__name__}: {exc}")


def _api_key() -> str | None:
    for env in API_KEY_ENVS:
        value = os.environ.get(env)
        if value:
            return value
    return None


class GeminiProvider:
    """``generate_content`` with ``response_mime_type="application/json"`` + response schema."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        client: genai.Client | None = None,
        name: str = "gemini",
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url
        self._client = client or self._make_client(api_key, base_url)

    @staticmethod
    def _make_client(api_key: str | None, base_url: str | None) -> genai.Client:
        from google import genai
        from google.genai import types

        key = api_key or _api_key()
        if not key:
            raise ConfigError(
                "GEMINI_API_KEY (or GOOGLE_API_KEY) is not set; put it in the environment or .env"
            )
        options = types.HttpOptions(base_url=base_url) if base_url else None
        return genai.Client(api_key=key, vertexai=False, http_options=options)

    def _config(self, request: CompletionRequest) -> Any:
        from google.genai import types

        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        return types.GenerateContentConfig(
            system_instruction=system or None,
            temperature=request.temperature,
            response_mime_type="application/json",
            response_schema=to_gemini_schema(request.json_schema) if request.json_schema else None,
            http_options=types.HttpOptions(timeout=max(1, int(request.timeout_s * 1000))),
        )

    @staticmethod
    def _contents(request: CompletionRequest) -> list[dict[str, Any]]:
        return [
            {"role": "model" if m.role == "assistant" else "user", "parts": [{"text": m.content}]}
            for m in request.messages
            if m.role != "system"
        ]

    async def complete(self, request: CompletionRequest) -> Completion:
        try:
            response = await self._client.aio.models.generate_content(
                model=self.model, contents=self._contents(request), config=self._config(request)
            )
        except Exception as exc:
            raise map_gemini_error(exc) from exc
        usage = response.usage_metadata
        return Completion(
            text=response.text or "",
            model=response.model_version or self.model,
            usage=reported_usage(  # a count that cannot be true is priced by the estimate
                getattr(usage, "prompt_token_count", None),
                _output_tokens(usage),
                getattr(usage, "cached_content_token_count", None),
                names=("promptTokenCount", "candidatesTokenCount"),
            ),
        )

    async def aclose(self) -> None:
        """Close the HTTP connections (call once, at the end of a run, on the same loop)."""
        await self._client.aio.aclose()
