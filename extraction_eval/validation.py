"""Checks shared by the config objects, so a notebook gets the same refusals as the CLI.

Each raises :class:`~extraction_eval.errors.InvalidValue` naming the field and the problem.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from urllib.parse import urlsplit

from extraction_eval.errors import InvalidValue
from extraction_eval.redact import safe_url


def check_int(field: str, value: object, *, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(field, f"must be a whole number, got {value!r}")
    if value < minimum:
        raise InvalidValue(field, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InvalidValue(field, f"must be at most {maximum:,}, got {value:,}")
    return value


def check_number(
    field: str,
    value: object,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> float:
    """A finite number within the bounds (``above``: strictly greater than)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValue(field, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidValue(field, f"must be a finite number, got {value}")
    if minimum is not None and maximum is not None and not minimum <= value <= maximum:
        raise InvalidValue(field, f"must be between {minimum:g} and {maximum:g}, got {value:g}")
    if minimum is not None and value < minimum:
        raise InvalidValue(field, f"must be at least {minimum:g}, got {value:g}")
    if maximum is not None and value > maximum:
        raise InvalidValue(field, f"must be at most {maximum:g}, got {value:g}")
    if above is not None and value <= above:
        raise InvalidValue(field, f"must be greater than {above:g}, got {value:g}")
    return float(value)


def check_choice(field: str, value: object, allowed: Iterable[str]) -> str:
    options = tuple(allowed)
    if not isinstance(value, str) or value not in options:
        raise InvalidValue(field, f"must be one of {', '.join(options)}, got {value!r}")
    return value


def check_text(field: str, value: object) -> str:
    """A non-blank string (names, labels)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidValue(field, f"must not be empty, got {value!r}")
    return value


def check_url(field: str, value: str, *, key_env: str = "OPENAI_API_KEY") -> str:
    """An http(s) URL with a host and no credentials (a typo here would fail every item, not
    the run). Refusals show the URL with ``***`` for what may be a secret.

    A ``user:password@`` or a query string (``?api_key=``) is refused rather than half
    supported. With user info, the OpenAI client's aiohttp transport fails every call
    ("cannot combine AUTHORIZATION header with ... credentials encoded in URL") and its httpx
    transport sends HTTP basic auth in place of the API key; a query string is glued into the
    path (``/v1/?api_key=...chat/completions``), so every call fails after its retries while
    the key is logged with each request. Keys belong in the provider's variable
    (``key_env``, named in the refusal)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        raise InvalidValue(field, f"is not a valid URL: {safe_url(value)!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidValue(field, f"must be an http:// or https:// URL, got {safe_url(value)!r}")
    if "@" in parts.netloc or parts.query:
        raise InvalidValue(
            field,
            f"must not carry credentials or a query string, got {safe_url(value)!r}:"
            f" give the key in the provider's variable ({key_env}), not in the URL",
        )
    return value


def web_url(value: object) -> str | None:
    """``value`` when it is an http(s) URL, else None: what may become a link in a page (a
    ``javascript:`` or ``data:`` URL from a hostile store would run on click)."""
    if not isinstance(value, str):
        return None
    try:
        scheme = urlsplit(value.strip()).scheme.lower()
    except ValueError:
        return None
    return value if scheme in ("http", "https") else None
