"""One place that turns a run's ``PipelineConfig`` into the pipeline to run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extraction_eval.llm.base import Provider, ResponseCache
from extraction_eval.llm.tracing import CallTracer
from extraction_eval.pipeline.base import Pipeline, PipelineConfig
from extraction_eval.prompts.template import PromptTemplate, load_local_prompt

if TYPE_CHECKING:  # tenacity loads only when a model-backed pipeline is built
    from extraction_eval.llm.retry import RetryPolicy


def make_pipeline(
    config: PipelineConfig,
    *,
    cache: ResponseCache | None = None,
    prompt: PromptTemplate | None = None,
    tracer: CallTracer | None = None,
    retry: RetryPolicy | None = None,
    provider: Provider | None = None,
) -> Pipeline:
    """A user's function (``config.pipeline``), the offline baseline, or a model + prompt.

    ``provider``: an existing provider for ``config.model`` to reuse (a matrix shares one
    client between the cells of one model instead of opening one per cell)."""
    if config.pipeline:
        from extraction_eval.pipeline.user import UserPipeline

        return UserPipeline.from_spec(config.pipeline, config)
    if config.provider == "offline":
        from extraction_eval.errors import ConfigError
        from extraction_eval.pipeline.baseline import BASELINE_MODEL, BaselinePipeline

        if config.model != BASELINE_MODEL:
            raise ConfigError(f"unknown offline model {config.model!r}; use {BASELINE_MODEL}")
        return BaselinePipeline(config)
    from extraction_eval.llm.registry import make_provider
    from extraction_eval.pipeline.cache import with_cache_mode
    from extraction_eval.pipeline.llm import LLMPipeline

    return LLMPipeline(
        provider=provider or make_provider(config),
        prompt=prompt or load_local_prompt(),
        config=config,
        cache=with_cache_mode(cache, config.cache),
        tracer=tracer,
        retry=retry,
    )
