"""The observability seam: one generation per model-backed extraction.

The shape follows LangFuse's ``start_as_current_observation(as_type="generation", ...)`` so a
LangFuse tracer is a thin adapter, while local runs use ``NullTracer`` and pay nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol


class GenerationHandle(Protocol):
    def update(
        self,
        *,
        output: Any = None,
        usage_details: dict[str, int] | None = None,
        cost_details: dict[str, float] | None = None,
        level: str | None = None,
        status_message: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None: ...


class CallTracer(Protocol):
    def generation(
        self,
        *,
        name: str,
        model: str,
        model_parameters: dict[str, Any],
        input: Any,
        prompt: Any = None,
        metadata: dict[str, Any] | None = None,
    ) -> AbstractContextManager[GenerationHandle]: ...


class _NullGeneration:
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
        return None


class NullTracer:
    """Records nothing."""

    # callers may skip building what a generation would record (``pipeline/llm.py``)
    records = False

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
        yield _NullGeneration()
