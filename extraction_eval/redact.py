"""Secrets out of text that came from elsewhere: the one redaction every error passes through.

A provider or LangFuse error body may echo what we sent (a proxy that repeats the
``Authorization`` header, a server that quotes the URL with its password). That text ends up in
the store, ``runs show``, exports, the report and the trace's status message, so it is redacted
where it enters our objects: :class:`~extraction_eval.errors.ExtractionEvalError` redacts its
message when it is built, :func:`~extraction_eval.errors.one_line` (what every row, log and
status message shows of an error) redacts its result.

What is replaced by ``***``:

- the value of every configured secret: the environment variables in :data:`SECRET_ENVS`, any
  variable whose name ends in one of :data:`SECRET_SUFFIXES`, the user name and password of the
  URLs in :data:`URL_ENVS`, and values handed to :func:`register_secret` (a key or URL given as
  an argument rather than in the environment);
- token-shaped strings whatever their source: ``Bearer <token>``, ``Basic <token>``, OpenAI
  (``sk-…``) and Anthropic (``sk-ant-…``) keys, LangFuse (``sk-lf-…``, ``pk-lf-…``) keys, and
  ``user:password@`` in any URL.

A configured secret is masked whole also when whitespace or a JSON escape (``\\n``) breaks it
(an error body wrapped at 80 columns): otherwise its shape rule would mask the first half and
leave the rest. A model's *valid* answer passes here too (:func:`redact_value`, its parsed
strings one by one, so the answer stays valid JSON): a proxy or a pipeline may put a key
into it, and it is stored, cached, exported and sent to LangFuse like error text.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

MASK = "***"

# Variables holding a secret by name; and name endings that mark one (``MY_PROXY_API_KEY``).
SECRET_ENVS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_PUBLIC_KEY",
)
SECRET_SUFFIXES = ("_API_KEY", "_SECRET_KEY", "_SECRET", "_TOKEN", "_PASSWORD")
# Variables holding a URL whose user name, password or query values may be credentials.
URL_ENVS = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "LANGFUSE_BASE_URL", "LANGFUSE_HOST")

# Values shorter than this are not treated as secrets: masking "a" everywhere hides text and
# protects nothing.
_MIN_SECRET = 4

_TOKENS = re.compile(
    r"\b((?i:bearer)|Basic)\s+[A-Za-z0-9._~+/=-]{4,}"  # an Authorization header's value
    r"|\b(?:sk|pk)-lf-[A-Za-z0-9-]{4,}"  # LangFuse keys
    r"|\bsk-[A-Za-z0-9_-]{8,}"  # OpenAI-style keys (sk-proj-…, sk-…)
    r"|(?<=://)[^/\s:@]*:[^/\s@]*(?=@)"  # user:password@ in a URL
)
# Query parameters that carry a credential (``?api_key=``, ``?sig=``); their values are masked.
CREDENTIAL_PARAM = re.compile(r"key|token|secret|pass|auth|sig|credential", re.IGNORECASE)

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret from now on (a key or URL passed as an argument); a URL
    registers its user name, password and credential-looking query values."""
    if not value:
        return
    found = url_secrets(value) if "://" in value else [value]
    global _registrations
    with _lock:
        _registered.update(v for v in found if len(v) >= _MIN_SECRET)
        _registrations += 1


def url_secrets(url: str) -> list[str]:
    """The credentials a URL carries: user name, password, values of credential parameters."""
    try:
        parts = urlsplit(url)
        found = [parts.username or "", parts.password or ""]
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return []
    found += [value for name, value in query if CREDENTIAL_PARAM.search(name)]
    return [unquote(v) for v in found if v] + [v for v in found if v]


def safe_url(url: str) -> str:
    """``url`` fit to show: ``***@`` for a user name or password, ``***`` for a query string
    (it may hold a key: some proxies and Azure take ``?api-key=``), no fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, MASK if parts.query else "", ""))


class _Known:
    """The last answer for the process environment, with the environment it was read from:
    every item asks four times, and each ask read and decoded every variable; a raw copy of
    the environment compares in C. ``registered`` counts ``register_secret`` calls."""

    raw: ClassVar[dict[Any, Any] | None] = None
    registered = -1
    secrets: ClassVar[list[str]] = []


_registrations = 0


def _raw_environ() -> dict[Any, Any] | None:
    """The process environment as os keeps it (bytes on POSIX), without decoding; None where
    os keeps it otherwise."""
    raw = getattr(os.environ, "_data", None)
    return raw if isinstance(raw, dict) else None


def configured_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value known now, longest first (so a key containing another is masked
    whole)."""
    if env is None:
        raw = _raw_environ()
        if raw is not None and _Known.raw == raw and _Known.registered == _registrations:
            return list(_Known.secrets)
        with _lock:
            registered = _registrations
        secrets = _configured(os.environ)
        if raw is not None:
            _Known.raw, _Known.registered, _Known.secrets = dict(raw), registered, secrets
        return list(secrets)
    return _configured(env)


def _configured(env: Mapping[str, str]) -> list[str]:
    found: set[str] = set()
    for name, value in env.items():
        value = value.strip()
        if not value:
            continue
        upper = name.upper()
        if upper in SECRET_ENVS or upper.endswith(SECRET_SUFFIXES):
            found.add(value)
        elif upper in URL_ENVS:
            found.update(url_secrets(value))
    with _lock:
        found |= _registered
    return sorted((v for v in found if len(v) >= _MIN_SECRET), key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every configured secret (also one broken by whitespace) and every
    token-shaped string replaced by ``***``."""
    if not text:
        return text
    found = tuple(configured_secrets() if secrets is None else secrets)
    for secret in found:
        if secret in text:
            text = text.replace(secret, MASK)
    if found:
        squeezed = _squeezed(text)  # fast; the slower pattern only when a secret is there
        if any(_squeezed(s) in squeezed for s in found):
            text = _broken_pattern(found).sub(MASK, text)
    return _TOKENS.sub(_mask_token, text) if _may_hold_token(text) else text


def _squeezed(text: str) -> str:
    """``text`` without what may break a secret inside it: whitespace (a line wrapped in an
    error body) and the escape of one in quoted JSON or Python (``\\n``, ``\\t``, ``\\r``)."""
    joined = "".join(text.split())
    if "\\" in joined:
        joined = joined.replace("\\n", "").replace("\\r", "").replace("\\t", "")
    return joined


@functools.lru_cache(maxsize=16)
def _broken_pattern(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """Each secret with any run of breaks allowed between two of its characters."""
    between = r"(?:\s|\\[nrt])*"
    return re.compile("|".join(between.join(map(re.escape, s)) for s in secrets))


def may_need_redaction(json_text: str, secrets: Sequence[str] | None = None) -> bool:
    """Whether any string of this JSON text may hold what :func:`redact` masks: the fast
    test on every answer before it is walked string by string. It errs towards yes (a match
    across two strings only costs the walk); a secret is looked for as JSON writes it too."""
    found = configured_secrets() if secrets is None else secrets
    if _may_hold_token(json_text):
        spaced = json_text.replace("\\n", " ").replace("\\t", " ").replace("\\r", " ")
        if _TOKENS.search(spaced):
            return True
    squeezed = _squeezed(json_text)
    return any(form in squeezed for secret in found for form in _json_forms(secret))


@functools.lru_cache(maxsize=256)
def _json_forms(secret: str) -> tuple[str, ...]:
    """A secret as it may stand in JSON text (as is, escaped, ASCII-escaped), squeezed: made
    once per secret, not per answer (every answer is scanned)."""
    quoted = (json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1])
    return tuple(dict.fromkeys(_squeezed(form) for form in (secret, *quoted)))


def _may_hold_token(text: str) -> bool:
    """A literal every token shape starts with is there: ``_TOKENS`` itself takes ~2 ms on a
    6 KB answer, these substring tests microseconds."""
    return (
        "://" in text
        or "sk-" in text
        or "pk-lf-" in text
        or "Basic" in text
        or ("bearer" in text.lower())
    )


def redact_value(value: object, secrets: Sequence[str] | None = None) -> tuple[object, bool]:
    """A JSON-like value (dicts, lists, strings, numbers) with every string redacted, and
    whether any changed: a parsed answer is masked string by string, never as JSON text (a
    mask spanning two strings would break the answer)."""
    found = configured_secrets() if secrets is None else secrets
    if isinstance(value, str):
        cleaned = redact(value, found)
        return cleaned, cleaned != value
    if isinstance(value, dict):
        pairs = [(redact_value(k, found), redact_value(v, found)) for k, v in value.items()]
        changed = any(k[1] or v[1] for k, v in pairs)
        return ({k[0]: v[0] for k, v in pairs} if changed else value), changed
    if isinstance(value, (list, tuple)):
        items = [redact_value(v, found) for v in value]
        changed = any(c for _, c in items)
        return ([v for v, _ in items] if changed else value), changed
    return value, False


def _mask_token(match: re.Match[str]) -> str:
    scheme = match.group(1)
    return f"{scheme} {MASK}" if scheme else MASK
