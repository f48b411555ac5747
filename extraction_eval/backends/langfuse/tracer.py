"""``LangfuseTracer``: the ``CallTracer`` seam as a LangFuse ``generation`` observation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from extraction_eval.errors import one_line
from extraction_eval.llm.tracing import GenerationHandle
from extraction_eval.prompts.template import PromptTemplate

if TYPE_CHECKING:
    from langfuse import Langfuse


def _prompt_client(prompt: Any) -> Any:
    """A LangFuse prompt client to link, from a client or a ``PromptTemplate`` (else None)."""
    if prompt is None:
        return None
    if isinstance(prompt, PromptTemplate):
        return prompt.client
    if hasattr(prompt, "is_fallback") and hasattr(prompt, "version"):
        return prompt
    return None


class _Generation:
    def __init__(self, observation: Any, error_level: str) -> None:
        self._observation = observation
        self._error_level = error_level
        self.level_set = False

    def update(
        self,
        *,
        output: Any = None,
        usage_details: dict[str, int] | None = None,
        cost_details: dict[str, float] | None = None,
        level: str | None = None,
        status_message: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if level is not None:
            self.level_set = True
            level = self._error_level if level == "ERROR" else level
        self._observation.update(
            output=output,
            usage_details=usage_details,
            cost_details=cost_details,
            level=level,
            status_message=status_message,
            metadata=metadata,
        )


class LangfuseTracer:
    """``CallTracer`` as a LangFuse ``generation`` observation under the current span (so in
    an experiment it lands in the item's trace), linked to the prompt version when a LangFuse
    prompt client is given. An exception escaping the block marks it level ERROR.

    ``error_level="WARNING"`` (LangFuse mode's experiments) marks a failed call WARNING
    instead: there the item's task span carries the item's one ERROR, since LangFuse counts
    an experiment's errors as its ERROR observations."""

    def __init__(self, lf: Langfuse, *, error_level: str = "ERROR") -> None:
        self._lf = lf
        self._error_level = error_level

    @contextmanager
    def generation(
        self,
        *,
        name: str,
        model: str,
        model_parameters: dict[str, Any],
        input: Any,
        prompt: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> Iterator[GenerationHandle]:
        failure: BaseException | None = None
        with self._lf.start_as_current_observation(
            as_type="generation",
            name=name,
            model=model,
            model_parameters=model_parameters,
            input=input,
            prompt=_prompt_client(prompt),
            metadata=metadata,
        ) as observation:
            handle = _Generation(observation, self._error_level)
            try:
                yield handle
            except BaseException as exc:
                if not handle.level_set:
                    level: Any = self._error_level
                    observation.update(level=level, status_message=one_line(exc))
                failure = exc
        # Re-raised outside the SDK's block: an exception escaping it is recorded on the span
        # with its whole traceback, whose chained causes hold the raw, unredacted error body
        # of the provider (an echoing proxy's copy of the API key). The redacted one-line
        # status message above is what LangFuse gets.
        if failure is not None:
            raise failure
