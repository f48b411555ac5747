"""Prompts via LangFuse prompt management: the extraction prompt (``fetch_prompt``, falling
back to the local template visibly; ``push_prompt``), and the judge's (``ensure_chat_prompt``:
fetched, or created from the built-in text when missing)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import httpx

from extraction_eval.backends.langfuse.client import base_url_of
from extraction_eval.backends.langfuse.errors import (
    _install_sdk_filter,
    _translating,
    api_errors,
)
from extraction_eval.errors import BackendError, UsageError, one_line
from extraction_eval.prompts.template import (
    PROMPT_NAME,
    PromptTemplate,
    load_local_prompt,
    messages_hash,
)

if TYPE_CHECKING:
    from langfuse import Langfuse


log = logging.getLogger(__name__)


def _client_messages(client: Any) -> list[dict[str, str]]:
    """A LangFuse prompt client's raw templates as chat messages (text prompt -> one user msg)."""
    raw = getattr(client, "prompt", None)
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    out: list[dict[str, str]] = []
    for message in raw or []:
        if message.get("type", "message") == "message":
            out.append({"role": str(message["role"]), "content": str(message["content"])})
    return out


def _selector(label: str | None, version: int | None) -> str:
    if version is not None:
        return f"version {version}"
    return f"label {label!r}" if label else "label 'production'"


def fetch_prompt(
    lf: Langfuse,
    name: str = PROMPT_NAME,
    label: str | None = None,
    version: int | None = None,
    *,
    cache_ttl_seconds: int | None = None,
    max_retries: int | None = None,
    fetch_timeout_s: int | None = None,
    warnings: list[str] | None = None,
) -> PromptTemplate:
    """The extraction prompt from LangFuse prompt management (``source="langfuse"``, with the
    version and the prompt client for linking generations).

    When the fetch fails the local template comes back with ``source="fallback"`` and a
    warning is logged and appended to ``warnings``: the run goes on, visibly. Caching and
    retries are the SDK's (``cache_ttl_seconds``, ``max_retries``).
    """
    if label is not None and version is not None:
        raise UsageError("pass a prompt label or a prompt version, not both")
    _install_sdk_filter()
    token = _translating.set(True)
    try:
        client = lf.get_prompt(
            name,
            label=label,
            version=version,
            type="chat",
            cache_ttl_seconds=cache_ttl_seconds,
            max_retries=max_retries,
            fetch_timeout_seconds=fetch_timeout_s,
        )
    except Exception as exc:
        reason = _fetch_failure(exc)
        message = (
            f"prompt {name!r} ({_selector(label, version)}) could not be fetched from LangFuse"
            f" ({reason}); using the local template (prompt_source=fallback)"
        )
        log.warning(message)
        if warnings is not None:
            warnings.append(message)
        local = load_local_prompt()
        return replace(local, label=label, version=None, source="fallback", client=None)
    finally:
        _translating.reset(token)

    messages = _client_messages(client)
    if "text" not in PromptTemplate(name=name, messages=messages).variables:
        message = f"LangFuse prompt {name!r} v{client.version} has no {{{{text}}}} variable"
        log.warning(message)
        if warnings is not None:
            warnings.append(message)
    return PromptTemplate(
        name=name,
        messages=messages,
        version=int(client.version),
        label=label,
        source="langfuse",
        client=client,
    )


def _fetch_failure(exc: BaseException) -> str:
    from langfuse.api import NotFoundError as LangfuseNotFound
    from langfuse.api import UnauthorizedError
    from langfuse.api.core import ApiError

    if isinstance(exc, LangfuseNotFound):
        return "not found"
    if isinstance(exc, UnauthorizedError):
        return "keys rejected (401)"
    if isinstance(exc, ApiError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, httpx.TransportError):
        return f"unreachable: {one_line(exc)}"
    return one_line(exc)


def push_prompt(
    lf: Langfuse,
    name: str = PROMPT_NAME,
    label: str = "staging",
    *,
    template: PromptTemplate | None = None,
    force: bool = False,
) -> int:
    """Create the local template (or ``template``) as a LangFuse chat prompt with ``label``;
    returns the version that carries the label.

    If the prompt at ``label`` already has exactly these messages, no new version is made
    (``force=True`` makes one anyway).
    """
    template = template or load_local_prompt()
    if not force:
        current = _chat_prompt_or_none(lf, name, label, max_retries=0)
        if current is not None and messages_hash(_client_messages(current)) == (
            template.content_hash
        ):
            return int(current.version)
    with api_errors(lf, f"creating prompt {name!r}"):
        created = lf.create_prompt(
            name=name,
            prompt=cast(Any, template.messages),
            labels=[label],
            type="chat",
            config={"source": "extraction-eval", "content_hash": template.content_hash},
            commit_message=f"extraction-eval prompts push (sha256 {template.content_hash[:12]})",
        )
    return int(created.version)


def _chat_prompt_or_none(lf: Langfuse, name: str, label: str, *, max_retries: int) -> Any:
    """The chat prompt ``name`` at ``label``, uncached (whoever asks is about to compare or
    create it), or None when LangFuse has no such prompt: that answer is the caller's to act
    on, while any other failure is one ``BackendError`` line."""
    from langfuse.api import NotFoundError as LangfuseNotFound

    _install_sdk_filter()
    token = _translating.set(True)
    try:
        return lf.get_prompt(
            name, label=label, type="chat", cache_ttl_seconds=0, max_retries=max_retries
        )
    except LangfuseNotFound:
        return None
    except Exception as exc:
        raise BackendError(
            f"LangFuse at {base_url_of(lf)}: reading prompt {name!r} (label {label!r}) failed"
            f" ({_fetch_failure(exc)})"
        ) from None
    finally:
        _translating.reset(token)


def ensure_chat_prompt(
    lf: Langfuse,
    name: str,
    label: str,
    messages: Sequence[Mapping[str, str]],
    *,
    commit_message: str,
) -> tuple[list[dict[str, str]], int, bool]:
    """The chat prompt ``name`` at ``label`` from LangFuse prompt management, created from
    ``messages`` with that label when the name does not exist yet. Returns its messages, its
    version and whether this call created it. Raises ``BackendError`` (one line) when
    LangFuse cannot be read or written."""
    client = _chat_prompt_or_none(lf, name, label, max_retries=1)
    if client is not None:
        return _client_messages(client), int(client.version), False
    own = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    with api_errors(lf, f"creating prompt {name!r}"):
        created = lf.create_prompt(
            name=name,
            prompt=cast(Any, own),
            labels=[label],
            type="chat",
            config={"source": "extraction-eval", "content_hash": messages_hash(own)},
            commit_message=commit_message,
        )
    return own, int(created.version), True
