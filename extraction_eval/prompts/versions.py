"""Prompt versions and labels with LangFuse prompt management's rules, for the local store.

Versions count from 1 per prompt name and never change; a label points at exactly one version
of its prompt (pushing with a label, or re-labelling, moves it); ``latest`` always means the
newest version and cannot be set by hand; with neither label nor version, ``production`` is
asked for. So ``prompts push --label staging`` and ``run-experiment --prompt-label staging``
mean the same in both modes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.prompts.template import PromptTemplate, load_local_prompt


class PromptRequest(Protocol):
    """What a run asks of the prompt (``PipelineConfig`` fits): pipelines import prompts, not
    the other way round."""

    @property
    def model(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def pipeline(self) -> str | None: ...
    @property
    def prompt_name(self) -> str: ...
    @property
    def prompt_label(self) -> str | None: ...
    @property
    def prompt_version(self) -> int | None: ...


LATEST = "latest"
DEFAULT_LABEL = "production"  # what LangFuse serves when neither label nor version is given
CHAT_ROLES = ("system", "user", "assistant")
# LangFuse's own rule for labels (lowercase letters, digits, '_', '-', '.').
_LABEL_RE = re.compile(r"^[a-z0-9_.\-]+$")


@dataclass(frozen=True)
class PromptPush:
    """What a push did: the version that now carries ``labels`` and whether it is new."""

    name: str
    version: int
    created: bool
    labels: tuple[str, ...]


@dataclass(frozen=True)
class PromptVersion:
    """One stored version; ``labels`` includes ``latest`` on the newest."""

    name: str
    version: int
    messages: list[dict[str, str]]
    content_hash: str
    labels: tuple[str, ...]
    config: dict[str, Any] = field(default_factory=dict)
    commit_message: str | None = None
    created_at: str = ""


@dataclass(frozen=True)
class PromptInfo:
    """One prompt name: how many versions, the newest, and where each label points."""

    name: str
    versions: int
    latest: int
    labels: dict[str, int]
    updated_at: str


class PromptStore(Protocol):
    def get_prompt(
        self, name: str, *, label: str | None = None, version: int | None = None
    ) -> PromptTemplate: ...


def check_prompt_name(name: str) -> str:
    cleaned = name.strip()
    if not cleaned:
        raise UsageError("prompt name must not be empty")
    return cleaned


def check_label(label: str) -> str:
    """A label a user may set: LangFuse's format, and never ``latest`` (it is implied)."""
    if label == LATEST:
        raise UsageError(
            "label 'latest' always means the newest version and cannot be set; use another label"
        )
    if not _LABEL_RE.match(label):
        raise UsageError(
            f"invalid prompt label {label!r}: use lowercase letters, digits, '_', '-' or '.'"
        )
    return label


def check_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """A chat prompt as LangFuse stores it; one the model would not see the text in is refused."""
    out: list[dict[str, str]] = []
    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in CHAT_ROLES or not isinstance(content, str):
            raise UsageError(
                f"prompt message {index + 1}: expected a role ({', '.join(CHAT_ROLES)})"
                " and text content"
            )
        out.append({"role": str(role), "content": content})
    if not out:
        raise UsageError("a prompt needs at least one message")
    if "text" not in PromptTemplate(name="check", messages=out).variables:
        raise UsageError(
            "the prompt has no {{text}} variable: the model would never see the item's text"
        )
    return out


def select_run_prompt(store: PromptStore, pipeline: PromptRequest) -> PromptTemplate:
    """Local mode's prompt: the stored version asked for by label or version, else the bundled
    template. Anything asked for that does not exist, or that the pipeline would not send,
    is an error before the run starts, never a silent fallback."""
    if not prompt_requested(pipeline):
        return load_local_prompt()
    return store.get_prompt(
        pipeline.prompt_name, label=pipeline.prompt_label, version=pipeline.prompt_version
    )


def prompt_requested(pipeline: PromptRequest) -> bool:
    """Whether a run asks for a managed prompt version (both modes ask this). Asking for one
    that the pipeline would not send is refused: the run record must never name a prompt that
    did not run."""
    label, version = pipeline.prompt_label, pipeline.prompt_version
    if label is None and version is None:
        return False
    field = "prompt_label" if label is not None else "prompt_version"
    if pipeline.pipeline:
        raise InvalidValue(field, "has no effect: your own pipeline function sends no prompt")
    if pipeline.provider == "offline":
        raise InvalidValue(field, f"has no effect: {pipeline.model} sends no prompt")
    return True
