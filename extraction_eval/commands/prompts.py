"""``prompts push|list|show``: prompt versions and labels, in LangFuse or in the local store.

The same commands work in both modes: LangFuse prompt management when its keys are set
(``--local`` forces the local store), else the local store, which keeps versions and labels
with LangFuse's rules (``extraction_eval.prompts.versions``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from extraction_eval.backends.langfuse import (
    close_client,
    connect,
    fetch_prompt,
    langfuse_configured,
    push_prompt,
)
from extraction_eval.backends.local import LocalStore
from extraction_eval.commands.common import console, err_console, handle_errors
from extraction_eval.errors import ConfigError, UsageError
from extraction_eval.prompts.template import PROMPT_NAME, PromptTemplate, load_local_prompt
from extraction_eval.prompts.versions import check_messages

prompts_app = typer.Typer(
    no_args_is_help=True,
    help="The extraction prompt: push versions with labels (LangFuse or the local store),"
    " list them, show what a run uses.",
)

NameOpt = Annotated[str, typer.Option("--name", help="Prompt name.")]
LocalOpt = Annotated[
    bool,
    typer.Option("--local", help="Use the local store even when LangFuse is configured."),
]


def _use_local(local: bool) -> bool:
    return local or not langfuse_configured()


def _read_message(option: str, path: Path) -> str:
    try:
        # stripped like the bundled files, so pushing those gives the bundled content hash
        return path.read_text(encoding="utf-8").rstrip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{option} {path}: cannot read ({reason})") from None


def _template(name: str, system: Path | None, user: Path | None) -> PromptTemplate:
    """The files given (system first), else the bundled template."""
    if system is None and user is None:
        return load_local_prompt()
    messages = []
    if system is not None:
        messages.append({"role": "system", "content": _read_message("--system", system)})
    if user is not None:
        messages.append({"role": "user", "content": _read_message("--user", user)})
    return PromptTemplate(name=name, messages=check_messages(messages))


def _require_text(*options: tuple[str, str | None]) -> None:
    for option, value in options:
        if value is not None and not value.strip():
            raise UsageError(f"{option} must not be empty")


@prompts_app.command("push")
@handle_errors
def push_cmd(
    name: NameOpt = PROMPT_NAME,
    label: Annotated[
        list[str] | None,
        typer.Option(help="Label to point at the pushed version (repeatable; default staging)."),
    ] = None,
    system: Annotated[
        Path | None, typer.Option(help="File with the system message (default: ours).")
    ] = None,
    user: Annotated[
        Path | None,
        typer.Option(help="File with the user message; must contain {{text}} (default: ours)."),
    ] = None,
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="Commit message (local store).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Make a new version even if nothing changed.")
    ] = False,
    local: LocalOpt = False,
) -> None:
    """Store a new prompt version with labels; unchanged content makes no new version."""
    _require_text(("--name", name), *(("--label", x) for x in label or []))
    labels = label or ["staging"]
    template = _template(name, system, user)
    if _use_local(local):
        with LocalStore() as store:
            pushed = store.push_prompt(
                name, template.messages, labels=labels, commit_message=message, force=force
            )
        what = "new version" if pushed.created else "unchanged, version"
        console.print(
            f"prompt {escape(repr(pushed.name))} {what} {pushed.version} has label(s)"
            f" {escape(', '.join(pushed.labels))} in the local store",
            highlight=False,
            soft_wrap=True,
        )
        return
    if len(labels) > 1:
        raise ConfigError("prompts push to LangFuse takes one --label at a time")
    lf = connect()
    try:
        version = push_prompt(lf, name, labels[0], template=template, force=force)
    finally:
        close_client(lf)
    console.print(
        f"prompt {escape(repr(name))} version {version} has label {escape(repr(labels[0]))}"
        " in LangFuse",
        highlight=False,
        soft_wrap=True,
    )


@prompts_app.command("list")
@handle_errors
def list_cmd(
    name: Annotated[
        str | None, typer.Option("--name", help="Only this prompt, one row per version.")
    ] = None,
    local: LocalOpt = False,
) -> None:
    """The local store's prompts and where each label points (``latest`` is the newest)."""
    if not _use_local(local):
        raise ConfigError(
            "prompts list reads the local store: pass --local (LangFuse's prompts are on its"
            " Prompts page)"
        )
    with LocalStore() as store:
        if name is not None:
            versions = store.prompt_versions(name)
            table = Table("version", "labels", "sha256", "created", "message", box=None)
            for v in versions:
                table.add_row(
                    str(v.version),
                    escape(", ".join(v.labels)),
                    v.content_hash[:12],
                    v.created_at[:19],
                    escape(v.commit_message or ""),
                )
            console.print(table)
            return
        infos = store.list_prompts()
    if not infos:
        console.print("no prompts in the local store yet (add one with prompts push)")
        return
    table = Table("name", "versions", "labels", "updated", box=None)
    for info in infos:
        labels = ", ".join(f"{lab}={v}" for lab, v in info.labels.items())
        table.add_row(escape(info.name), str(info.versions), escape(labels), info.updated_at[:19])
    console.print(table)


@prompts_app.command("show")
@handle_errors
def show_cmd(
    name: NameOpt = PROMPT_NAME,
    label: Annotated[str | None, typer.Option(help="Label to fetch ('latest': newest).")] = None,
    version: Annotated[int | None, typer.Option(help="Version to fetch.")] = None,
    local: LocalOpt = False,
) -> None:
    """Print a prompt version; without --label/--version locally, the bundled template (what a
    run without --prompt-label uses)."""
    _require_text(("--name", name), ("--label", label))
    if version is not None and version < 1:
        raise UsageError(f"--version must be at least 1, got {version}")
    warnings: list[str] = []
    template: PromptTemplate
    if _use_local(local):
        if label is None and version is None:
            template = load_local_prompt()
        else:
            with LocalStore() as store:
                template = store.get_prompt(name, label=label, version=version)
    else:
        lf = connect()
        try:
            template = fetch_prompt(lf, name, label, version, warnings=warnings)
        finally:
            close_client(lf)
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    header = (
        f"prompt {template.name!r} source={template.source} version={template.version}"
        f" label={template.label} sha256={template.content_hash[:12]}"
    )
    console.print(escape(header), highlight=False, soft_wrap=True)
    for message in template.messages:
        console.print(f"--- {escape(message['role'])}", highlight=False)
        console.print(escape(message["content"]), highlight=False, soft_wrap=True)
