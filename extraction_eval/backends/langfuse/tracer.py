"""``LangfuseTracer``: the ``CallTracer`` seam as a LangFuse ``generation`` observation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from extraction_eval.errors import one_line
from extraction_eval.llm.tracing import GenerationHandle
from extraction_eval.prompts.template import PromptTemplate

if TYPE_CHECKING:
    from langfuse import Langfuse


# A run of 16+ digits not part of a decimal or exponent: perhaps an integer beyond
# JavaScript's safe range, which the SDK's serializer writes as a string (so does ``wire_json``
# then, by leaving the value to it). Digits inside a string match too: the SDK's path, no harm.
_LONG_INTEGER = re.compile(r"(?<![\d.])\d{16,}(?![\d.eE])")
# the same, first looked for fast (the regex takes ~0.3 ms on a 5 KB prompt, this ~10 us)
_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")
_SIXTEEN_DIGITS = "0" * 16


def wire_json(value: Any) -> Any:
    """``value`` as the JSON text the SDK would put on the span, made in C by ``json.dumps``.

    The SDK serializes an observation's input, output, usage and cost with a JSON encoder
    that first walks the whole value in Python (``EventSerializer.default``, for types JSON
    lacks) and then passes a string through as it is; on plain JSON data (dicts, lists,
    strings, finite floats, safe integers) that walk changes nothing, so the text made here
    is byte for byte the attribute the SDK would have sent, at a fraction of the CPU. What
    is not plain (a NaN, an integer past 2**53, an object) is left to the SDK, as is a
    string (the SDK sends a string as the string, not JSON-quoted)."""
    if value is None or isinstance(value, str):
        return value
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return value
    if _SIXTEEN_DIGITS in text.translate(_DIGITS_AS_ZERO) and _LONG_INTEGER.search(text):
        return value
    return text


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
            output=wire_json(output),
            usage_details=wire_json(usage_details),
            cost_details=wire_json(cost_details),
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
            model_parameters=wire_json(model_parameters),
            input=wire_json(input),
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
