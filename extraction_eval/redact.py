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
  (``sk-…``) and LangFuse (``sk-lf-…``, ``pk-lf-…``) keys, and ``user:password@`` in any URL.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

MASK = "***"

# Variables holding a secret by name; and name endings that mark one (``MY_PROXY_API_KEY``).
SECRET_ENVS = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_PUBLIC_KEY",
)
SECRET_SUFFIXES = ("_API_KEY", "_SECRET_KEY", "_SECRET", "_TOKEN", "_PASSWORD")
# Variables holding a URL whose user name, password or query values may be credentials.
URL_ENVS = ("OPENAI_BASE_URL", "LANGFUSE_BASE_URL", "LANGFUSE_HOST")

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
    with _lock:
        _registered.update(v for v in found if len(v) >= _MIN_SECRET)


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


def url_has_credentials(url: str) -> bool:
    return bool(url_secrets(url))


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


def configured_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value known now, longest first (so a key containing another is masked
    whole)."""
    env = os.environ if env is None else env
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
    """``text`` with every configured secret and token-shaped string replaced by ``***``."""
    if not text:
        return text
    for secret in configured_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return _TOKENS.sub(_mask_token, text)


def _mask_token(match: re.Match[str]) -> str:
    scheme = match.group(1)
    return f"{scheme} {MASK}" if scheme else MASK
