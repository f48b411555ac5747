"""``datasets upload|list|show|export``: parse, call the dataset backend, render."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from extraction_eval.backends import DatasetBackend, get_dataset_backend
from extraction_eval.backends.base import DatasetInfo
from extraction_eval.commands.common import (
    check_readable,
    check_writable,
    console,
    err_console,
    handle_errors,
)
from extraction_eval.datasets.bundled import JOURNAL_DATASET, journal_items, sample_items
from extraction_eval.datasets.gold import read_items, write_items
from extraction_eval.errors import UsageError
from extraction_eval.tables import print_table
from extraction_eval.types import DatasetItem

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
            f"(the bundled journal example when NAME is {JOURNAL_DATASET})."
        ),
    ] = None,
    description: Annotated[str | None, typer.Option(help="Dataset description.")] = None,
) -> None:
    """Upload (or update) items by id; changed content makes a new dataset version."""
    if not name.strip():
        raise UsageError("NAME must not be empty")
    if file is not None:
        check_readable("FILE", file)
        items, warnings = read_items(file)
    else:  # the bundled journal example under its own name, else the bundled sample
        items, warnings = (journal_items() if name == JOURNAL_DATASET else sample_items()), []
    for warning in warnings:
        _warn(warning)
    if not items:
        raise UsageError(f"no valid items in {file}")
    with _backend() as backend:
        report = backend.upload_items(name, items, description=description)
    version = "unchanged" if not report.new_version else f"now version {report.version}"
    console.print(
        f"{escape(report.dataset)}: {report.created} created, {report.updated} updated, "
        f"{report.unchanged} unchanged ({version})"
        + (f"; {len(warnings)} line(s) skipped" if warnings else ""),
        highlight=False,
        soft_wrap=True,
    )


@datasets_app.command("list")
@handle_errors
def list_cmd() -> None:
    """Every dataset with its latest version and item count."""
    with _backend() as backend:
        infos = backend.list_datasets()
    render_dataset_list(infos, console)


def render_dataset_list(infos: Sequence[DatasetInfo], out: Console) -> None:
    """Names never shortened; a long description wraps instead of being cut."""
    table = Table(box=None)
    table.add_column("name", no_wrap=True, min_width=max([4, *(len(i.name) for i in infos)]))
    table.add_column("version", justify="right")
    table.add_column("items", justify="right")
    table.add_column("updated", no_wrap=True)
    table.add_column("description", overflow="fold", ratio=1)
    for info in infos:
        table.add_row(
            escape(info.name),
            "" if info.version is None else str(info.version),
            str(info.item_count),
            (info.updated_at or "")[:10],
            escape(" ".join((info.description or "").split())),
        )
    print_table(out, table)


@datasets_app.command("show")
@handle_errors
def show_cmd(
    name: str,
    version: VersionOpt = None,
    limit: Annotated[int, typer.Option(min=0, help="Rows to show (0: all).")] = 20,
) -> None:
    """A dataset's items: id, text preview, number of gold entities and relationships."""
    with _backend() as backend:
        info = backend.get_dataset(name)
        items = backend.get_items(name, version=version)
    render_dataset_items(info, items, console, version=version, limit=limit)


_PREVIEW_LINES = 3


def _preview(text: str, width: int) -> str:
    """At most ``width`` characters, cut at a word and saying how much is left out."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width) if " " in text[:width] else width
    return f"{text[:cut]} [+{len(text) - cut} chars]"


def render_dataset_items(
    info: DatasetInfo,
    items: Sequence[DatasetItem],
    out: Console,
    *,
    version: str | None = None,
    limit: int = 20,
) -> None:
    """Ids never shortened; the text wraps, a long one shown in its first lines with the
    number of characters left out (``datasets export`` has it whole)."""
    shown = items if limit == 0 else items[:limit]
    shown_version = info.version if version is None else version
    title = f"{info.name} · version {shown_version} · {len(items)} items"
    table = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD)
    id_width = max((len(item.id) for item in shown), default=2)
    table.add_column("id", no_wrap=True, min_width=id_width)
    table.add_column("text", ratio=1)
    table.add_column("#ent", justify="right")
    table.add_column("#rel", justify="right")
    text_width = max(20, out.width - id_width - 16)  # padding and the count columns
    for item in shown:
        table.add_row(
            escape(item.id),
            escape(_preview(item.text, text_width * _PREVIEW_LINES - 20)),
            str(len(item.expected.entities)),
            str(len(item.expected.relationships)),
        )
    print_table(out, table)
    if len(shown) < len(items):
        out.print(f"{len(items) - len(shown)} more (--limit 0 shows all)", highlight=False)


@datasets_app.command("export")
@handle_errors
def export_cmd(
    name: str,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    version: VersionOpt = None,
) -> None:
    """The dataset as JSONL (the upload format), byte-stable: same items, same bytes."""
    if out is not None:
        check_writable("--out", out)
    with _backend() as backend:
        items = backend.get_items(name, version=version)
    if out is None:
        write_items(items, sys.stdout)
        sys.stdout.flush()
        return
    try:
        with out.open("w", encoding="utf-8", newline="\n") as fh:
            n = write_items(items, fh)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write: {exc.strerror or exc}") from None
    err_console.print(f"wrote {n} items to {escape(str(out))}", highlight=False, soft_wrap=True)
