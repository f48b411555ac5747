"""Domain errors. The CLI prints each as one line and exits with its ``exit_code``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from extraction_eval.redact import redact


class ExtractionEvalError(Exception):
    """Base class: a problem a user can act on, shown without a traceback.

    Its message is redacted as it is built (``redact``): error text often quotes a server's
    body, and from here it reaches the store, the terminal, exports and LangFuse."""

    exit_code = 1

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


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
        invalid_request: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.attempts = attempts  # model calls made before giving up (set by the retry policy)
        # the server refused the request itself (400/422, or a 500 saying the body is invalid):
        # sending it again cannot help; a response-format probe moves on to the next format
        self.invalid_request = invalid_request


class OverLimit(ExtractionEvalError):
    """An item went past a bound of ``limits`` (too many objects, a reply too long): that
    item's error (kind "limit"), carrying what the model call returned (``raw``, ``usage``,
    ``attempts``) so its row keeps them; a paid call stays counted."""

    def __init__(
        self, message: str, *, raw: str | None = None, usage: Any = None, attempts: int = 1
    ) -> None:
        super().__init__(message)
        self.raw = raw
        self.usage = usage
        self.attempts = attempts


class SchemaFailure(ExtractionEvalError):
    """The model answered, but not with valid JSON in the extraction schema."""

    def __init__(
        self, message: str, *, raw: str | None = None, attempts: int = 1, usage: Any = None
    ) -> None:
        super().__init__(message)
        self.raw = redact(raw) if raw else raw  # stored and shown: redacted like error text
        self.attempts = attempts  # model calls made for the answer that failed to parse
        self.usage = usage  # the tokens (and cost) that answer took: a failed call is paid too


class InvalidValue(UsageError, ValueError):
    """A configuration field has a value that cannot work (``field`` names it; the CLI shows
    the matching ``--flag``). A ``ValueError`` too, so ``except ValueError`` callers still work.

    A problem that points at other fields writes each as ``{field}`` and lists it in
    ``mentions``: the message names it as the API does (``price_in``), the CLI as its flag
    (``problem_as(flag)``), so the library never spells a CLI flag."""

    def __init__(self, field: str, problem: str, *, mentions: Sequence[str] = ()) -> None:
        self.field = field
        self.mentions = tuple(mentions)
        self._template = problem
        self.problem = self.problem_as(str)
        super().__init__(f"{field} {self.problem}")

    def problem_as(self, name: Callable[[str], str]) -> str:
        """The problem with each mentioned field spelled by ``name`` (the CLI: its flag)."""
        text = self._template
        for mentioned in self.mentions:
            text = text.replace("{" + mentioned + "}", name(mentioned))
        return redact(text)


def one_line(error: object, *, limit: int = 300, with_type: bool = False) -> str:
    """What a user sees of an error: one line, whitespace folded, capped at ``limit``.

    A pydantic ``ValidationError`` becomes its first three problems (``loc: msg``); an
    exception with no message becomes its type name; ``with_type`` puts the type first
    (``TimeoutError: ...``), for rows where the kind of failure matters. Configured secrets
    and token-shaped strings are masked (``redact``) before the line is capped.
    """
    errors = getattr(error, "errors", None)
    if isinstance(error, BaseException) and callable(errors) and hasattr(error, "error_count"):
        parts = []
        for err in errors()[:3]:
            loc = ".".join(str(p) for p in err["loc"] if p != "expected")
            parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
        more = int(error.error_count()) - len(parts)
        text = "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
    else:
        text = " ".join(_text_of(error).split())
    if isinstance(error, BaseException):
        name = type(error).__name__
        if not text:
            text = name
        elif with_type:
            text = f"{name}: {text}"
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_of(error: object) -> str:
    """``str(error)``, or a note when it raises (an exception's own ``__str__`` may be hostile:
    its item must still get a row with an error)."""
    try:
        text = str(error)
    except Exception as exc:
        return f"<str() of {type(error).__name__} raised {type(exc).__name__}>"
    return text if isinstance(text, str) else ""
