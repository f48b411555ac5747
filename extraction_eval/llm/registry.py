"""``provider:model`` -> a Provider. SDKs are imported only for the provider asked for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from extraction_eval.errors import ConfigError, InvalidValue
from extraction_eval.llm.base import Provider

if TYPE_CHECKING:
    from extraction_eval.llm.openai_provider import HttpTransport, ResponseFormat

OPENAI_COMPATIBLE = ("openai-compatible", "openai_compatible", "compatible")

KNOWN = (
    "openai:<model>, anthropic:<model>, gemini:<model>, fake:<name>, offline:baseline,"
    " or any name with a base URL"
)


class ProviderSettings(Protocol):
    """What choosing a provider reads from a run's settings (``PipelineConfig`` has it), so
    ``llm`` stays below ``pipeline`` in the import order."""

    @property
    def model(self) -> str: ...  # "provider:model"

    @property
    def provider(self) -> str: ...

    @property
    def model_name(self) -> str: ...

    @property
    def base_url(self) -> str | None: ...

    @property
    def extra(self) -> Mapping[str, Any]: ...


def make_provider(config: ProviderSettings) -> Provider:
    """The provider for ``config.model``; a ``base_url`` makes any other name OpenAI-compatible
    (``anthropic:`` stays the Messages API: its base URL is a gateway that speaks it).

    ``config.response_format`` (auto | json_schema | json_object_schema | json_object | text;
    ``extra["response_format"]`` is the older spelling) picks how strictly an OpenAI-compatible
    server is asked for JSON; ``config.extra["http_transport"]`` (aiohttp | httpx) how the
    OpenAI client talks HTTP.
    """
    provider, model = config.provider, config.model_name
    if provider == "fake":
        from extraction_eval.llm.fake import get_fake

        return get_fake(model)
    if provider == "gemini":
        from extraction_eval.llm.gemini_provider import GeminiProvider

        return GeminiProvider(model=_require_model(config), base_url=config.base_url)
    if provider == "anthropic":  # a base URL is an Anthropic-compatible gateway here
        from extraction_eval.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(
            model=_require_model(config),
            base_url=config.base_url,
            response_format=_anthropic_format(config),
            temperature=getattr(config, "temperature", 0.0),
            max_tokens=_max_tokens(config.extra),
        )
    if provider == "offline":
        raise ConfigError(
            f"{config.model!r} is the built-in offline baseline, not a model provider; "
            "build it with make_pipeline"
        )
    if provider == "openai" or provider in OPENAI_COMPATIBLE or config.base_url:
        if provider in OPENAI_COMPATIBLE and not config.base_url:
            raise InvalidValue(
                "base_url", f"is required for {config.model!r} (the server's /v1 URL)"
            )
        from extraction_eval.llm.openai_provider import OpenAIProvider

        if ":" not in config.model and config.base_url:  # --model llama3 --base-url ...
            provider, model = "openai-compatible", config.model
        else:
            model = _require_model(config)
        return OpenAIProvider(
            model=model,
            base_url=config.base_url,
            response_format=_response_format(config),
            name=provider,
            http_transport=_http_transport(config.extra),
        )
    raise ConfigError(f"unknown model provider {provider!r} in {config.model!r}; use {KNOWN}")


def _require_model(config: ProviderSettings) -> str:
    if ":" not in config.model or not config.model_name.strip():
        raise InvalidValue("model", f"{config.model!r} names no model; write provider:model")
    return config.model_name


def _response_format(config: ProviderSettings) -> ResponseFormat | Literal["auto"]:
    from extraction_eval.llm.openai_provider import AUTO, RESPONSE_FORMATS

    value = getattr(config, "response_format", AUTO)
    if value == AUTO:  # the field's default: the older ``extra`` spelling may pin one
        value = config.extra.get("response_format", AUTO)
    if value not in (AUTO, *RESPONSE_FORMATS):
        raise ConfigError(
            f"response_format must be one of {AUTO}, {', '.join(RESPONSE_FORMATS)}, got {value!r}"
        )
    return cast("ResponseFormat", value)


def _anthropic_format(config: ProviderSettings) -> str:
    """auto, json_schema (the forced tool call) or text; the OpenAI-only JSON modes are
    refused by the provider with one line."""
    value = getattr(config, "response_format", "auto")
    if value == "auto":
        value = config.extra.get("response_format", "auto")
    return str(value)


def _max_tokens(extra: Mapping[str, Any]) -> int:
    """``extra["max_tokens"]``: the answer's token ceiling the Messages API requires (a
    model whose output limit is lower than the default needs it)."""
    from extraction_eval.llm.anthropic_provider import DEFAULT_MAX_TOKENS
    from extraction_eval.validation import check_int

    return check_int("max_tokens", extra.get("max_tokens", DEFAULT_MAX_TOKENS), minimum=1)


def _http_transport(extra: Mapping[str, Any]) -> HttpTransport:
    from extraction_eval.llm.openai_provider import HTTP_TRANSPORTS

    value = extra.get("http_transport", "aiohttp")
    if value not in HTTP_TRANSPORTS:
        raise InvalidValue(
            "http_transport", f"must be one of {', '.join(HTTP_TRANSPORTS)}, got {value!r}"
        )
    return cast("HttpTransport", value)
