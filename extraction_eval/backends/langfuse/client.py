"""Connecting to LangFuse: a client from the arguments or the LANGFUSE_* environment, and a
fail-fast key check that turns bad keys or an unreachable server into one-line
``BackendError``\\ s. Secrets never appear in messages: errors name the server URL and the
status, not the keys.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from extraction_eval.errors import ConfigError
from extraction_eval.redact import register_secret, safe_url

if TYPE_CHECKING:
    from langfuse import Langfuse


ENV_PUBLIC_KEY = "LANGFUSE_PUBLIC_KEY"
ENV_SECRET_KEY = "LANGFUSE_SECRET_KEY"
ENV_BASE_URL = "LANGFUSE_BASE_URL"
ENV_HOST = "LANGFUSE_HOST"  # deprecated by the SDK, still honoured
DEFAULT_BASE_URL = "https://cloud.langfuse.com"


def langfuse_configured(env: Mapping[str, str] | None = None) -> bool:
    """True when keys and a server are set: LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and
    LANGFUSE_BASE_URL (or the deprecated LANGFUSE_HOST).

    A server URL that carries credentials is refused here, keys or not: this is where every
    command first reads it, and a password in it is a secret in the environment that the
    run would otherwise ignore silently (it did: no keys meant local mode, and no word)."""
    env = os.environ if env is None else env
    for name in (ENV_BASE_URL, ENV_HOST):
        _refuse_credentials(env.get(name, "").strip())
    return bool(
        env.get(ENV_PUBLIC_KEY, "").strip()
        and env.get(ENV_SECRET_KEY, "").strip()
        and (env.get(ENV_BASE_URL, "").strip() or env.get(ENV_HOST, "").strip())
    )


def _refuse_credentials(url: str) -> None:
    """A ``user:password@`` or a query string in a LangFuse URL: one ``ConfigError`` line."""
    if not url:
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return  # not a URL at all: check_base_url says so when the URL is used
    if "@" in parts.netloc or parts.query:
        raise ConfigError(
            f"LangFuse base URL must not carry a user name, password or query string,"
            f" got {safe_url(url)!r}: the keys go in {ENV_PUBLIC_KEY} and {ENV_SECRET_KEY}"
        )


def resolve_base_url(base_url: str | None = None) -> str:
    """The server the SDK will talk to: the argument, LANGFUSE_BASE_URL, LANGFUSE_HOST, cloud."""
    url = (
        base_url
        or os.environ.get(ENV_BASE_URL, "").strip()
        or os.environ.get(ENV_HOST, "").strip()
        or DEFAULT_BASE_URL
    )
    return url.rstrip("/")


# Variables the SDK parses itself with a bare int()/float() (a traceback on "abc"): checked
# first, each with its bounds. name -> (whole number?, minimum, maximum)
SDK_NUMBER_ENVS: dict[str, tuple[bool, float, float]] = {
    "LANGFUSE_TIMEOUT": (True, 1, 600),  # seconds per request
    "LANGFUSE_FLUSH_AT": (True, 1, 100_000),
    "LANGFUSE_FLUSH_INTERVAL": (False, 0.01, 3600),
    "LANGFUSE_SAMPLE_RATE": (False, 0, 1),
    "LANGFUSE_MEDIA_UPLOAD_THREAD_COUNT": (True, 1, 64),
}


def check_sdk_env(env: Mapping[str, str] | None = None) -> None:
    """Each of :data:`SDK_NUMBER_ENVS` that is set is a number within its bounds, else one
    ``ConfigError`` line naming it."""
    env = os.environ if env is None else env
    for name, (whole, low, high) in SDK_NUMBER_ENVS.items():
        raw = env.get(name)
        if raw is None:
            continue
        kind = "a whole number" if whole else "a number"
        try:
            value = int(raw) if whole else float(raw)
            ok = low <= value <= high  # NaN compares False
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"{name} must be {kind} from {low:g} to {high:g}, got {raw!r}")


def check_base_url(url: str) -> None:
    """An http(s) URL with no credentials in it, refused in one line that shows no secret:
    the SDK authenticates with the keys (HTTP basic auth), so a ``user:password@`` in the
    URL is never what the server expects, and a query string would be sent in every call."""
    from urllib.parse import urlsplit

    shown = safe_url(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ConfigError(f"LangFuse base URL is not a valid URL: {shown!r}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"LangFuse base URL must start with http:// or https://, got {shown!r}")
    _refuse_credentials(url)


# Read by the SDK once, when it builds a client's media manager (one per public key)
MEDIA_ENV = "LANGFUSE_MEDIA_UPLOAD_ENABLED"


@contextmanager
def _media_detection(on: bool) -> Iterator[None]:
    """Around building a client: its media detection off unless ``on`` or the user set
    :data:`MEDIA_ENV` (which wins)."""
    if on or MEDIA_ENV in os.environ:
        yield
        return
    os.environ[MEDIA_ENV] = "false"
    try:
        yield
    finally:
        os.environ.pop(MEDIA_ENV, None)


def connect(
    *,
    public_key: str | None = None,
    secret_key: str | None = None,
    base_url: str | None = None,
    check: bool = True,
    flush_at: int | None = None,
    flush_interval: float | None = None,
    timeout_s: int | None = None,
    detect_media: bool = True,
) -> Langfuse:
    """A LangFuse client from the arguments or the environment, key-checked unless
    ``check=False``.

    ``detect_media=False`` (a run's client) turns off the SDK's search for base64 data URIs
    in every input, output and metadata value, which it walks recursively on each span
    update (about a tenth of a run's CPU on the event loop); a run sends text, and a text
    that is a data URI then stays text instead of becoming an uploaded attachment.
    ``LANGFUSE_MEDIA_UPLOAD_ENABLED``, when set, wins.

    Missing keys are a ``ConfigError``; wrong keys or an unreachable server a ``BackendError``
    (see ``check_auth``). Note the SDK keeps one client per public key per process: a second
    ``connect`` with the same key reuses the first one's server and flush settings.
    """
    public_key = public_key or os.environ.get(ENV_PUBLIC_KEY, "").strip() or None
    secret_key = secret_key or os.environ.get(ENV_SECRET_KEY, "").strip() or None
    missing = [
        name
        for name, value in ((ENV_PUBLIC_KEY, public_key), (ENV_SECRET_KEY, secret_key))
        if not value
    ]
    if missing:
        raise ConfigError(f"LangFuse keys missing: set {' and '.join(missing)}")
    register_secret(public_key)  # keys given as arguments are redacted like the env's
    register_secret(secret_key)
    url = resolve_base_url(base_url)
    check_base_url(url)
    check_sdk_env()

    from langfuse import Langfuse  # deferred: keeps `--help` and local mode fast

    with _media_detection(detect_media):
        lf = Langfuse(
            public_key=public_key,
            secret_key=secret_key,
            base_url=url,
            flush_at=flush_at,
            flush_interval=flush_interval,
            timeout=timeout_s,
        )
    from extraction_eval.backends.langfuse.score_batches import register_target

    assert public_key is not None and secret_key is not None  # (missing ones raised above)
    register_target(
        lf,
        base_url=url,
        public_key=public_key,
        secret_key=secret_key,
        flush_at=flush_at,
        flush_interval=flush_interval,
        timeout_s=timeout_s,
    )
    if check:
        check_auth(lf)  # on failure the client is left as is: see close_client
    return lf


def close_client(lf: Langfuse) -> None:
    """Deliver everything queued (spans, scores) and return; use in ``finally``.

    Deliberately ``flush()``, not ``shutdown()``: the SDK keeps one client per public key for
    the whole process, and after ``shutdown()`` every later client with that key silently
    drops its scores ("Score dropped: Langfuse client has been shut down"). The SDK's own
    atexit hook shuts down at interpreter exit.
    """
    lf.flush()


def base_url_of(lf: Langfuse) -> str:
    return safe_url(str(getattr(lf, "_base_url", None) or "LangFuse")).rstrip("/")


def check_auth(lf: Langfuse) -> None:
    """Fail fast before spending anything: ``BackendError`` (one line, no secret) when the
    keys are refused or the server cannot be reached; ``ConfigError`` without keys."""
    # deferred: the errors module names this module's settings in its messages
    from extraction_eval.backends.langfuse.errors import api_errors

    with api_errors(lf, "checking the API keys"):
        ok = lf.auth_check()
    if not ok:
        raise ConfigError(f"LangFuse keys missing: set {ENV_PUBLIC_KEY} and {ENV_SECRET_KEY}")


# --- server version preflight ---------------------------------------------------------------

MIN_SERVER_VERSION = (4, 59, 0)
ALLOW_OLD_ENV = "EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD"
_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def _version_text(version: tuple[int, ...]) -> str:
    return "v" + ".".join(map(str, version))


def parse_server_version(text: str) -> tuple[int, int, int] | None:
    """``"4.16.0"`` / ``"v4.59.1-rc"`` -> (4, 16, 0); None when it is no version."""
    match = _VERSION_RE.match(text.strip())
    if not match:
        return None
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def server_version(lf: Langfuse) -> str:
    """The server's version as ``GET /api/public/health`` reports it."""
    from extraction_eval.backends.langfuse.errors import api_errors

    with api_errors(lf, "reading the server version"):
        return str(lf.api.health.health().version)


def check_server_version(lf: Langfuse, env: Mapping[str, str] | None = None) -> str | None:
    """Refuse (``ConfigError``, one line) a server older than v4.59.0, the first whose score
    endpoint takes the batches SDK 5 posts (an older one answers 400 to every batch, and the
    loss shows only in the read-back). ``EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD=1`` (a patched
    server, e.g. the local recipe's) turns the refusal into the returned warning line; so
    does a version that cannot be read."""
    env = os.environ if env is None else env
    url = base_url_of(lf)
    host = urlsplit(url).hostname or ""
    if host == "langfuse.com" or host.endswith(".langfuse.com"):
        return None  # LangFuse Cloud runs the current server (its own version numbering)
    text = server_version(lf)
    version = parse_server_version(text)
    if version is None:
        return f"LangFuse at {url} reports version {text[:40]!r}: not checked"
    if version >= MIN_SERVER_VERSION:
        return None
    problem = (
        f"LangFuse at {url} is {_version_text(version)}; SDK 5 needs"
        f" {_version_text(MIN_SERVER_VERSION)} or later (older servers refuse its score"
        " batches)"
    )
    if env.get(ALLOW_OLD_ENV, "").strip() in ("1", "true", "yes"):
        return f"{problem}: going on because {ALLOW_OLD_ENV}=1"
    raise ConfigError(f"{problem}; set {ALLOW_OLD_ENV}=1 for a server patched to accept them")
