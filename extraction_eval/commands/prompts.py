"""``prompts push|show``: the extraction prompt in LangFuse prompt management."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from extraction_eval.backends.langfuse import (
    close_client,
    connect,
    fetch_prompt,
    langfuse_configured,
    push_prompt,
)
from extraction_eval.commands.common import console, err_console, handle_errors
from extraction_eval.errors import ConfigError, UsageError
from extraction_eval.prompts.template import PROMPT_NAME, PromptTemplate, load_local_prompt

prompts_app = typer.Typer(
    no_args_is_help=True,
    help="The extraction prompt: push the local template to LangFuse, show what a run uses.",
)

NameOpt = Annotated[str, typer.Option("--name", help="Prompt name in LangFuse.")]


def _require_langfuse(what: str) -> None:
    if not langfuse_configured():
        raise ConfigError(
            f"{what} needs LangFuse: set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY"
            " and LANGFUSE_BASE_URL"
        )


def _require_text(*options: tuple[str, str | None]) -> None:
    for option, value in options:
        if value is not None and not value.strip():
            raise UsageError(f"{option} must not be empty")


@prompts_app.command("push")
@handle_errors
def push_cmd(
    name: NameOpt = PROMPT_NAME,
    label: Annotated[str, typer.Option(help="Label to give the pushed version.")] = "staging",
    force: Annotated[
        bool, typer.Option("--force", help="Make a new version even if nothing changed.")
    ] = False,
) -> None:
    """Create the local template as a LangFuse chat prompt (a new project starts from ours)."""
    _require_text(("--name", name), ("--label", label))
    _require_langfuse("prompts push")
    lf = connect()
    try:
        version = push_prompt(lf, name, label, force=force)
    finally:
        close_client(lf)
    console.print(
        f"prompt {escape(repr(name))} version {version} has label {escape(repr(label))}"
        " in LangFuse",
        highlight=False,
        soft_wrap=True,
    )


@prompts_app.command("show")
@handle_errors
def show_cmd(
    name: NameOpt = PROMPT_NAME,
    label: Annotated[str | None, typer.Option(help="LangFuse label to fetch.")] = None,
    version: Annotated[int | None, typer.Option(help="LangFuse version to fetch.")] = None,
    local: Annotated[
        bool, typer.Option("--local", help="Show the bundled template, not LangFuse's.")
    ] = False,
) -> None:
    """Print the prompt a run would use: from LangFuse when configured, else the local one."""
    _require_text(("--name", name), ("--label", label))
    if version is not None and version < 1:
        raise UsageError(f"--version must be at least 1, got {version}")
    warnings: list[str] = []
    template: PromptTemplate
    if local or not langfuse_configured():
        if label is not None or version is not None:
            _require_langfuse("--label/--version")
        template = load_local_prompt()
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
