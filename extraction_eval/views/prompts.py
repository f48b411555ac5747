"""Prompts for people: what a push did, the local store's prompts and versions, one prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:  # annotations only: importing a view loads no store
    from extraction_eval.prompts.template import PromptTemplate
    from extraction_eval.prompts.versions import PromptInfo, PromptPush, PromptVersion


def render_local_push(pushed: PromptPush, out: Console) -> None:
    what = "new version" if pushed.created else "unchanged, version"
    out.print(
        f"prompt {escape(repr(pushed.name))} {what} {pushed.version} has label(s)"
        f" {escape(', '.join(pushed.labels))} in the local store",
        highlight=False,
        soft_wrap=True,
    )


def render_langfuse_push(name: str, version: int, label: str, out: Console) -> None:
    out.print(
        f"prompt {escape(repr(name))} version {version} has label {escape(repr(label))}"
        " in LangFuse",
        highlight=False,
        soft_wrap=True,
    )


def render_prompt_versions(versions: Sequence[PromptVersion], out: Console) -> None:
    """One row per version of one prompt, with the labels pointing at it."""
    table = Table("version", "labels", "sha256", "created", "message", box=None)
    for v in versions:
        table.add_row(
            str(v.version),
            escape(", ".join(v.labels)),
            v.content_hash[:12],
            v.created_at[:19],
            escape(v.commit_message or ""),
        )
    out.print(table)


def render_prompt_list(infos: Sequence[PromptInfo], out: Console) -> None:
    """One row per prompt name and where each of its labels points."""
    if not infos:
        out.print("no prompts in the local store yet (add one with prompts push)")
        return
    table = Table("name", "versions", "labels", "updated", box=None)
    for info in infos:
        labels = ", ".join(f"{lab}={v}" for lab, v in info.labels.items())
        table.add_row(escape(info.name), str(info.versions), escape(labels), info.updated_at[:19])
    out.print(table)


def render_prompt(template: PromptTemplate, out: Console) -> None:
    """Where the prompt came from (source, version, label, hash), then each message whole."""
    header = (
        f"prompt {template.name!r} source={template.source} version={template.version}"
        f" label={template.label} sha256={template.content_hash[:12]}"
    )
    out.print(escape(header), highlight=False, soft_wrap=True)
    for message in template.messages:
        out.print(f"--- {escape(message['role'])}", highlight=False)
        out.print(escape(message["content"]), highlight=False, soft_wrap=True)
