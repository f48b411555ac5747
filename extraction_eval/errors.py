"""Domain errors. The CLI prints each as one line and exits with its ``exit_code``."""

from __future__ import annotations

from typing import Any


class ExtractionEvalError(Exception):
    """Base class: a problem a user can act on, shown without a traceback."""

    exit_code = 1


class UsageError(ExtractionEvalError):
    """Unusable input (missing file, bad option, malformed data that stops everything)."""

    exit_code = 2


class NotFoundError(ExtractionEvalError):
    """A named dataset, run or trace does not exist."""

    exit_code = 2


class ConfigError(ExtractionEvalError):
    """Missing or wrong configuration (keys, provider, model)."""

    exit_code = 2


class BackendError(ExtractionEvalError):
    """The store or LangFuse could not be reached or refused a request."""

    exit_code = 3


class ProviderError(ExtractionEvalError):
    """A model call failed; ``retryable`` tells the shared retry policy what to do."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = attempts  # model calls made before giving up (set by the retry policy)


class SchemaFailure(ExtractionEvalError):
    """The model answered, but not with valid JSON in the extraction schema."""

    def __init__(
        self, message: str, *, raw: str | None = None, attempts: int = 1, usage: Any = None
    ) -> None:
        super().__init__(message)
        self.raw = raw
        self.attempts = attempts  # model calls made for the answer that failed to parse
        self.usage = usage  # the tokens (and cost) that answer took: a failed call is paid too


class InvalidValue(UsageError, ValueError):
    """A configuration field has a value that cannot work (``field`` names it; the CLI shows
    the matching ``--flag``). A ``ValueError`` too, so ``except ValueError`` callers still work."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem
