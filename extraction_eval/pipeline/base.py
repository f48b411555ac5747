"""What the runner needs from any pipeline: one item in, one extraction (or an error) out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from extraction_eval.limits import MAX_ATTEMPTS
from extraction_eval.types import DatasetItem, Extraction, Usage
from extraction_eval.validation import check_choice, check_int, check_number, check_text, check_url

# mirrors llm/openai_provider.py (a test keeps them equal; the config stays free of the SDK)
RESPONSE_FORMAT_CHOICES = ("auto", "json_schema", "json_object_schema", "json_object", "text")


@dataclass(frozen=True)
class PipelineConfig:
    """The run's parameters, recorded with the run so it describes itself."""

    model: str = "offline:baseline"  # "provider:model"
    base_url: str | None = None
    temperature: float = 0.0
    prompt_name: str = "extraction"
    prompt_label: str | None = None
    prompt_version: int | None = None
    pipeline: str | None = None  # "package.module:function" for a user's own pipeline
    timeout_s: float = 60.0
    max_attempts: int = 4
    extra: dict[str, Any] = field(default_factory=dict)
    # USD per 1M tokens, both or neither: replace the genai-prices database (self-hosted models)
    price_in: float | None = None
    price_out: float | None = None
    # > 0: another independent answer to the same request (a new response-cache key)
    repeat: int = 0
    # how an OpenAI-compatible server is asked for JSON: auto (detected once per run, before
    # the items) | json_schema | json_object_schema | json_object | text (llm/formats.py)
    response_format: str = "auto"
    # the response cache: "use" (read and write), "refresh" (write only), "off" (neither)
    cache: str = "use"
    # a reply that needs a repair to be read (a Markdown fence, text around the JSON, a
    # single-key wrapper: prompts/replies.py) is a schema failure instead of a repaired answer
    strict_json: bool = False

    def __post_init__(self) -> None:
        """Refuse values that cannot work before a run exists (a notebook gets this too)."""
        check_text("model", self.model)
        if self.base_url is not None:
            key_env = "ANTHROPIC_API_KEY" if self.provider == "anthropic" else "OPENAI_API_KEY"
            check_url("base_url", self.base_url, key_env=key_env)
        check_number("temperature", self.temperature, minimum=0.0)
        check_text("prompt_name", self.prompt_name)
        if self.prompt_label is not None:
            check_text("prompt_label", self.prompt_label)
        if self.prompt_version is not None:
            check_int("prompt_version", self.prompt_version, minimum=1)
        check_number("timeout_s", self.timeout_s, above=0.0)
        check_int("max_attempts", self.max_attempts, minimum=1, maximum=MAX_ATTEMPTS)
        check_int("repeat", self.repeat, minimum=0)
        check_choice("response_format", self.response_format, RESPONSE_FORMAT_CHOICES)
        check_choice("cache", self.cache, ("use", "refresh", "off"))
        from extraction_eval.pipeline.pricing import check_prices

        check_prices(self.price_in, self.price_out)

    @property
    def provider(self) -> str:
        return self.model.split(":", 1)[0] if ":" in self.model else self.model

    @property
    def model_name(self) -> str:
        return self.model.split(":", 1)[1] if ":" in self.model else self.model


@dataclass(frozen=True)
class PipelineOutput:
    extraction: Extraction
    raw: str | None = None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    cache_hit: bool = False
    model: str | None = None
    prompt: Any = None  # the prompt object used (e.g. a LangFuse prompt client), for linking
    # what reading the reply repaired (prompts/replies.py: fence, prose, wrapper); () if bare
    repairs: tuple[str, ...] = ()


class Pipeline(Protocol):
    """Async so many items overlap. Failures raise ``SchemaFailure`` or ``ProviderError``
    carrying ``attempts`` (attribute) so the runner can record them on the item's row."""

    async def extract(self, item: DatasetItem) -> PipelineOutput: ...
