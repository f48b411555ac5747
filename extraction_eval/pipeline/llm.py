"""The model-backed pipeline: prompt -> provider (shared retry policy) -> parsed extraction.

Schema failures are not retried: at the temperatures used for evaluation a second call mostly
repeats the first answer, costs another call, and would hide exactly the failure rate the
run is measuring. Only answers that can be read (leniently) are cached, so a re-run retries
failures. Every path (a model call, the Batch API's answers, a cache hit) reads the raw reply
with the same function (``read_extraction``): a repaired reply (fence, prose, wrapper) is
recorded as such, and ``strict_json`` refuses it, fresh or from the cache alike.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from extraction_eval.errors import OverLimit, SchemaFailure, one_line
from extraction_eval.limits import MAX_REPLY_CHARS
from extraction_eval.llm.base import Completion, CompletionRequest, Provider, ResponseCache
from extraction_eval.llm.context import item_context
from extraction_eval.llm.retry import RetryPolicy, call_with_retry
from extraction_eval.llm.tracing import CallTracer, GenerationHandle, NullTracer
from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.pipeline.pricing import Pricer, batch_cost, estimated_usage
from extraction_eval.prompts.contract import extraction_json_schema, read_extraction
from extraction_eval.prompts.replies import strict_refusal
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.redact import redact
from extraction_eval.types import DatasetItem, Extraction, Schema, Usage

if TYPE_CHECKING:
    from extraction_eval.llm.formats import FormatChoice


def _sha256(payload: Any) -> str:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(**fields: Any) -> str:
    """The response-cache key: a hash of the fields, those whose value is None left out.

    Leaving out None keeps the keys of configs that do not set a field as they were before
    the field existed, so adding a field never empties existing caches for nobody's benefit.
    The fields themselves are chosen in one place, :meth:`LLMPipeline.answer_fields`."""
    return _sha256({k: v for k, v in fields.items() if v is not None})


def input_hash(text: str, schema: Schema | None) -> str:
    return _sha256({"text": text, "schema": schema.model_dump() if schema else None})


def _format_key(provider: Provider) -> str | None:
    """The response format for the cache key; json_schema (the format before there was a
    choice, and ``auto`` before detection) leaves the key as it was."""
    fmt = getattr(provider, "response_format", None)
    return None if fmt in (None, "json_schema", "auto") else str(fmt)


_SchemaKey = str  # the schema's canonical JSON (types and attribute declarations)
# The response-format probe's document: short, so a probe costs little (llm/formats.py)
PROBE_TEXT = "Ada Lovelace worked with Charles Babbage in London."


def _usage_details(usage: Usage) -> dict[str, int] | None:
    details = {
        k: v for k, v in (("input", usage.tokens_in), ("output", usage.tokens_out)) if v is not None
    }
    return details or None


@dataclass
class LLMPipeline:
    """Implements ``Pipeline`` on any ``Provider``."""

    provider: Provider
    prompt: PromptTemplate
    config: PipelineConfig
    cache: ResponseCache | None = None
    tracer: CallTracer | None = None
    retry: RetryPolicy | None = None

    def __post_init__(self) -> None:
        # The JSON schema depends only on the item schema: build and hash it once per schema.
        self._contracts: dict[_SchemaKey, tuple[dict[str, Any], str]] = {}
        self._tracer: CallTracer = self.tracer if self.tracer is not None else NullTracer()
        # a tracer that records nothing (local mode) is handed no input or output: building
        # them (the messages, a redacted copy of the answer dumped) was per-item work for none
        self._records = getattr(self._tracer, "records", True) is not False
        self._pricer = Pricer.for_config(self.config)
        self._retry: RetryPolicy = (
            self.retry
            if self.retry is not None
            else RetryPolicy.from_config(
                max_attempts=self.config.max_attempts,
                timeout_s=self.config.timeout_s,
                extra=self.config.extra,
            )
        )

    async def aclose(self) -> None:
        """Release the provider's connections, if it holds any. The runner calls this once,
        after the last item, on the loop that made the calls."""
        close = getattr(self.provider, "aclose", None)
        if close is not None:
            await close()

    def _contract(self, schema: Schema | None) -> tuple[dict[str, Any], str]:
        key: _SchemaKey = json.dumps(schema.model_dump(mode="json")) if schema else ""
        found = self._contracts.get(key)
        if found is None:
            json_schema = extraction_json_schema(schema)
            found = self._contracts[key] = (json_schema, _sha256(json_schema))
        return found

    def request_for(self, item: DatasetItem) -> CompletionRequest:
        schema = item.schema_
        return CompletionRequest(
            messages=self.prompt.compile(item.text, schema),
            model=self.config.model_name,
            temperature=self.config.temperature,
            json_schema=self._contract(schema)[0],
            timeout_s=self.config.timeout_s,
        )

    def key_for(self, item: DatasetItem) -> str:
        return cache_key(**self.answer_fields(item))

    def answer_fields(self, item: DatasetItem) -> dict[str, Any]:
        """Everything that changes the answer to ``item``: the response-cache key's fields.

        The ONE place the key is derived from. To make something else part of the key, add
        one line here (``"name": value``); a value of None is left out of the key (see
        :func:`cache_key`), so give a new field None when it is unset. Not in the key: the
        item id, the prompt's label and version (its content hash is), the HTTP transport.
        """
        return {
            "provider": self.provider.name,
            "model": self.config.model_name,
            "prompt": self.prompt.content_hash,
            "temperature": float(self.config.temperature),
            "input": input_hash(item.text, item.schema_),
            "contract": self._contract(item.schema_)[1],
            "repeat": self.config.repeat or None,  # > 0: another independent answer
            # the server answering (--base-url / OPENAI_BASE_URL): B never gets A's answers
            "endpoint": getattr(self.provider, "endpoint", None),
            "response_format": _format_key(self.provider),  # what the server was asked for
        }

    def keys_any_format(self, item: DatasetItem) -> list[str]:
        """The cache keys ``item``'s answer may have once the response format is settled:
        before a probe, the least a run can cost counts an answer cached under any."""
        from extraction_eval.llm.openai_provider import RESPONSE_FORMATS

        fields = self.answer_fields(item)
        return [
            cache_key(**(fields | {"response_format": None if f == "json_schema" else f}))
            for f in RESPONSE_FORMATS
        ]

    def resolve_format(
        self, sample: DatasetItem, meanwhile: Callable[[], None] | None = None
    ) -> FormatChoice | None:
        """Settle how the server is asked for JSON, once per run before the items
        (``llm/formats.py``): ``sample``'s prompt and schema, on a one-sentence text, are the
        probe (``meanwhile`` runs while it waits). None for a provider that has no such
        choice (Gemini, fake). Anthropic's choice is the forced tool call or text."""
        from extraction_eval.llm.anthropic_provider import AnthropicProvider
        from extraction_eval.llm.formats import resolve
        from extraction_eval.llm.openai_provider import OpenAIProvider

        if not isinstance(self.provider, (OpenAIProvider, AnthropicProvider)):
            return None
        probe = sample.model_copy(update={"id": "format-probe", "text": PROBE_TEXT})

        def conforms(text: str) -> bool:
            try:
                read_extraction(text, strict=self.config.strict_json)
            except SchemaFailure:
                return False
            return True

        recalled = self._recalled_format()
        if recalled is not None:  # this server answered the probe before: no call
            self.provider.response_format = recalled.used  # type: ignore[assignment]
            self.provider.format_choice = recalled
            if meanwhile is not None:
                with contextlib.suppress(Exception):  # only work the run would do later
                    meanwhile()
            return recalled
        choice = resolve(
            self.provider,
            self.request_for(probe),
            self._retry,
            conforms=conforms,
            meanwhile=meanwhile,
        )
        if choice.how == "detected" and self.cache is not None:
            answer = json.dumps(choice.to_json(), sort_keys=True)
            self.cache.put(self._format_key(), Completion(text=answer, model=choice.used))
        return choice

    def _format_key(self) -> str:
        """The response cache's key of a probe's answer: the server's identity (provider,
        endpoint, model; never the key), so an unchanged re-run calls nothing."""
        return cache_key(
            kind="response-format-probe",
            provider=self.provider.name,
            model=self.config.model_name,
            endpoint=getattr(self.provider, "endpoint", None),
        )

    def _recalled_format(self) -> FormatChoice | None:
        """The format a probe of this server detected before, from the response cache (None:
        nothing to recall, a format that is pinned or known, or the cache off / refreshed)."""
        from extraction_eval.llm.anthropic_provider import AnthropicProvider
        from extraction_eval.llm.formats import FormatChoice
        from extraction_eval.llm.openai_provider import AUTO, OpenAIProvider

        provider = self.provider
        if (
            self.cache is None
            or not isinstance(provider, (OpenAIProvider, AnthropicProvider))
            or provider.response_format != AUTO
            or provider.format_choice is not None
            or provider.official_api
        ):
            return None
        found = self.cache.get(self._format_key())
        if found is None:
            return None
        try:
            choice = FormatChoice.from_json(json.loads(found.text))
        except ValueError:
            return None  # an entry that does not read: probe again
        return choice if choice is not None and choice.how == "detected" else None

    async def extract(self, item: DatasetItem) -> PipelineOutput:
        request = self.request_for(item)
        key = self.key_for(item)
        with (
            item_context(item.id),
            self._tracer.generation(
                name="extract",
                model=self.config.model_name,
                model_parameters={"temperature": self.config.temperature},
                input=[{"role": m.role, "content": m.content} for m in request.messages]
                if self._records
                else None,
                prompt=self.prompt.client,
                metadata={"item_id": item.id, "provider": self.provider.name},
            ) as generation,
        ):
            cached = self._from_cache(key)
            if cached is not None:
                completion, extraction, repairs = cached
                if self.config.strict_json and repairs:  # read as a fresh reply would be
                    message = strict_refusal(repairs)
                    generation.update(
                        output=completion.text,
                        level="ERROR",
                        status_message=f"schema failure: {message}",
                        metadata={"cache_hit": True},
                    )
                    raise SchemaFailure(
                        message, raw=completion.text, attempts=0, usage=Usage(cost_usd=0.0)
                    )
                generation.update(
                    output=extraction.model_dump() if self._records else None,
                    metadata={"cache_hit": True} | ({"repairs": list(repairs)} if repairs else {}),
                )
                return self._output(completion, extraction, repairs, attempts=0, spent=None)
            return await self._call(request, key, generation)

    def _from_cache(self, key: str) -> tuple[Completion, Extraction, tuple[str, ...]] | None:
        if self.cache is None:
            return None
        completion = self.cache.get(key)
        if completion is None:
            return None
        try:
            return completion, *read_extraction(completion.text)
        except SchemaFailure:
            return None  # only readable answers are cached; anything else is stale: call again

    async def _call(
        self, request: CompletionRequest, key: str, generation: GenerationHandle
    ) -> PipelineOutput:
        try:
            completion, attempts = await call_with_retry(
                lambda: self.provider.complete(request), self._retry
            )
        except Exception as exc:
            generation.update(
                level="ERROR",
                status_message=one_line(exc),
                metadata={"attempts": getattr(exc, "attempts", None)},
            )
            raise
        reported = completion.usage
        if reported.problem is not None:  # missing or cannot be true: priced by the estimate
            reported = estimated_usage(
                (m.content for m in request.messages),
                request.json_schema,
                completion.text,
                reported.problem,
            )
        usage = _usage_details(reported)
        # the model the provider reports it ran, else the one asked for
        cost = self._pricer.cost(reported, completion.model or self.config.model_name)
        if completion.batch:
            cost = batch_cost(cost)
        spent = reported.model_copy(update={"cost_usd": cost.usd})
        if len(completion.text) > MAX_REPLY_CHARS:  # paid for, but neither parsed nor kept
            problem = (
                f"the reply has {len(completion.text):,} characters, over the limit of"
                f" {MAX_REPLY_CHARS:,} per reply; not parsed"
            )
            generation.update(
                usage_details=usage,
                cost_details=cost.details(),
                level="ERROR",
                status_message=problem,
                metadata={"attempts": attempts},
            )
            raise OverLimit(problem, usage=spent, attempts=attempts)
        try:
            extraction, repairs = read_extraction(completion.text)
        except SchemaFailure as exc:
            failure: SchemaFailure | None = exc
        else:
            # cached when readable at all: a strict run re-reads the same raw reply the same way;
            # a key a proxy put into the answer is masked before it is cached (the runner masks
            # what is stored, and marks the item)
            if self.cache is not None:
                self.cache.put(key, replace(completion, text=redact(completion.text)))
            strict = self.config.strict_json and repairs
            failure = SchemaFailure(strict_refusal(repairs)) if strict else None
        if failure is not None:
            generation.update(
                output=redact(completion.text),
                usage_details=usage,
                cost_details=cost.details(),
                level="ERROR",
                status_message=f"schema failure: {one_line(failure)}",
                metadata={"attempts": attempts},
            )
            raise SchemaFailure(
                str(failure), raw=completion.text, attempts=attempts, usage=spent
            ) from None
        generation.update(
            output=extraction.redacted()[0].model_dump() if self._records else None,
            usage_details=usage,
            cost_details=cost.details(),
            metadata={"attempts": attempts}
            | ({"cost": cost.reason} if cost.reason else {})
            | ({"repairs": list(repairs)} if repairs else {})
            | ({"usage_estimated": reported.problem} if reported.problem else {}),
        )
        return self._output(completion, extraction, repairs, attempts=attempts, spent=spent)

    def _output(
        self,
        completion: Completion,
        extraction: Extraction,
        repairs: tuple[str, ...],
        *,
        attempts: int,
        spent: Usage | None,
    ) -> PipelineOutput:
        """``spent`` is the priced usage of a model call; None for a cache hit, which spent no
        tokens and nothing (reporting the cached usage would count tokens and cost twice)."""
        return PipelineOutput(
            extraction=extraction,
            raw=completion.text,
            usage=Usage(cost_usd=0.0) if spent is None else spent,
            attempts=attempts,
            cache_hit=spent is None,
            model=completion.model,
            prompt=self.prompt,
            repairs=repairs,
        )
