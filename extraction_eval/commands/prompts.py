"""``prompts push|list|show``: prompt versions and labels, in LangFuse or in the local store.

The same commands work in both modes: LangFuse prompt management when its keys are set
(``--local`` forces the local store), else the local store, which keeps versions and labels
with LangFuse's rules (``extraction_eval.prompts.versions``). Store, LangFuse and view modules
are imported inside each command, so ``--help`` loads none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from extraction_eval.commands.common import console, err_console, handle_errors
from extraction_eval.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from extraction_eval.prompts.template import PromptTemplate

# The --name default, shown in --help without importing the prompt module (and the types it
# builds); a test holds it equal to prompts.template.PROMPT_NAME.
PROMPT_NAME = "extraction"

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
    from extraction_eval.backends.langfuse import langfuse_configured

    return local or not langfuse_configured()


def _read_message(option: str, path: Path) -> str:
    from extraction_eval.limits import MAX_PROMPT_BYTES

    try:
        if path.stat().st_size > MAX_PROMPT_BYTES:
            raise UsageError(f"{option} {path}: larger than {MAX_PROMPT_BYTES:,} bytes")
        # stripped like the bundled files, so pushing those gives the bundled content hash
        return path.read_text(encoding="utf-8").rstrip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{option} {path}: cannot read ({reason})") from None


def _template(name: str, system: Path | None, user: Path | None) -> PromptTemplate:
    """The files given (system first), else the bundled template."""
    from extraction_eval.prompts.template import PromptTemplate, load_local_prompt
    from extraction_eval.prompts.versions import check_messages

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
    from extraction_eval.backends.langfuse import close_client, connect, push_prompt
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.views.prompts import render_langfuse_push, render_local_push

    _require_text(("--name", name), *(("--label", x) for x in label or []))
    labels = label or ["staging"]
    template = _template(name, system, user)
    if _use_local(local):
        with LocalStore() as store:
            pushed = store.push_prompt(
                name, template.messages, labels=labels, commit_message=message, force=force
            )
        render_local_push(pushed, console)
        return
    if len(labels) > 1:
        raise ConfigError("prompts push to LangFuse takes one --label at a time")
    lf = connect()
    try:
        version = push_prompt(lf, name, labels[0], template=template, force=force)
    finally:
        close_client(lf)
    render_langfuse_push(name, version, labels[0], console)


@prompts_app.command("list")
@handle_errors
def list_cmd(
    name: Annotated[
        str | None, typer.Option("--name", help="Only this prompt, one row per version.")
    ] = None,
    local: LocalOpt = False,
) -> None:
    """The local store's prompts and where each label points (``latest`` is the newest)."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.views.prompts import render_prompt_list, render_prompt_versions

    if not _use_local(local):
        raise ConfigError(
            "prompts list reads the local store: pass --local (LangFuse's prompts are on its"
            " Prompts page)"
        )
    with LocalStore() as store:
        if name is not None:
            render_prompt_versions(store.prompt_versions(name), console)
            return
        infos = store.list_prompts()
    render_prompt_list(infos, console)


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
    from extraction_eval.backends.langfuse import close_client, connect, fetch_prompt
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.prompts.template import load_local_prompt
    from extraction_eval.views.prompts import render_prompt

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
    render_prompt(template, console)
