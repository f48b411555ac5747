"""``datasets upload|list|show|export``: parse, call the dataset backend, render.

Library modules are imported inside each command, so ``--help`` loads none of them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from extraction_eval.commands.common import (
    check_readable,
    check_writable,
    console,
    err_console,
    handle_errors,
)
from extraction_eval.errors import UsageError

if TYPE_CHECKING:
    from extraction_eval.backends import DatasetBackend

# Named in the help text without importing the gold reader; a test holds it equal to
# datasets.bundled.JOURNAL_DATASET.
JOURNAL_DATASET_NAME = "journal-example"

datasets_app = typer.Typer(
    no_args_is_help=True, help="Evaluation datasets (local store, or LangFuse when configured)."
)

VersionOpt = Annotated[
    str | None,
    typer.Option(
        "--version",
        help="Dataset version: a number locally, a timestamp in LangFuse (default: the latest).",
    ),
]


@contextmanager
def _backend() -> Iterator[DatasetBackend]:
    from extraction_eval.backends import get_dataset_backend

    backend = get_dataset_backend()
    try:
        yield backend
    finally:
        backend.close()


def _warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


@datasets_app.command("upload")
@handle_errors
def upload_cmd(
    name: Annotated[str, typer.Argument(help="Dataset name (created if new).")],
    file: Annotated[
        Path | None,
        typer.Argument(
            help="JSONL file: id, text, entities, relationships. Omitted: the bundled sample "
            f"(the bundled journal example when NAME is {JOURNAL_DATASET_NAME})."
        ),
    ] = None,
    description: Annotated[str | None, typer.Option(help="Dataset description.")] = None,
) -> None:
    """Upload (or update) items by id; changed content makes a new dataset version."""
    from itertools import chain

    from extraction_eval.datasets.bundled import JOURNAL_DATASET, journal_items, sample_items
    from extraction_eval.datasets.jsonl import stream_items
    from extraction_eval.views.datasets import render_upload

    if not name.strip():
        raise UsageError("NAME must not be empty")
    if file is None:  # the bundled journal example under its own name, else the bundled sample
        with _backend() as backend:
            bundled = journal_items() if name == JOURNAL_DATASET else sample_items()
            report = backend.upload_items(name, bundled, description=description)
        render_upload(report, 0, console)
        return
    check_readable("FILE", file)
    # streamed: the file is read one line at a time as the store writes it
    with stream_items(file) as lines:
        try:
            items = iter(lines)
            first = next(items, None)
            if first is None:
                raise UsageError(f"no valid items in {file}")
            with _backend() as backend:
                report = backend.upload_items(name, chain([first], items), description=description)
        finally:
            for warning in lines.warnings:
                _warn(warning)
    render_upload(report, lines.skipped, console)


@datasets_app.command("list")
@handle_errors
def list_cmd() -> None:
    """Every dataset with its latest version and item count."""
    from extraction_eval.views.datasets import render_dataset_list

    with _backend() as backend:
        infos = backend.list_datasets()
    render_dataset_list(infos, console)


@datasets_app.command("show")
@handle_errors
def show_cmd(
    name: str,
    version: VersionOpt = None,
    limit: Annotated[int, typer.Option(min=0, help="Rows to show (0: all).")] = 20,
) -> None:
    """A dataset's items: id, text preview, number of gold entities and relationships."""
    from extraction_eval.views.datasets import render_dataset_items

    with _backend() as backend:
        info = backend.get_dataset(name)
        items = backend.get_items(name, version=version)
    render_dataset_items(info, items, console, version=version, limit=limit)


@datasets_app.command("export")
@handle_errors
def export_cmd(
    name: str,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    version: VersionOpt = None,
) -> None:
    """The dataset as JSONL (the upload format), byte-stable: same items, same bytes."""
    from extraction_eval.datasets.jsonl import write_items

    if out is not None:
        check_writable("--out", out)
    with _backend() as backend:
        items = backend.get_items(name, version=version)
    if out is None:
        write_items(items, sys.stdout)
        sys.stdout.flush()
        return
    from extraction_eval.atomic import WriteFailed, atomic_text

    try:
        with atomic_text(out, newline="\n") as fh:  # whole or not at all
            n = write_items(items, fh)
    except WriteFailed as exc:
        raise UsageError(f"--out {exc}") from None
    err_console.print(f"wrote {n} items to {escape(str(out))}", highlight=False, soft_wrap=True)
