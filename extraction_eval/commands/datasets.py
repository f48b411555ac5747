"""``datasets upload|list|show|export``: parse, call the dataset backend, render."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from extraction_eval.backends import DatasetBackend, get_dataset_backend
from extraction_eval.commands.common import (
    check_readable,
    check_writable,
    console,
    err_console,
    handle_errors,
)
from extraction_eval.errors import UsageError
from extraction_eval.seeds.jsonl import read_items, sample_items, write_items

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


def _preview(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _warn(message: str) -> None:
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


@datasets_app.command("upload")
@handle_errors
def upload_cmd(
    name: Annotated[str, typer.Argument(help="Dataset name (created if new).")],
    file: Annotated[
        Path | None,
        typer.Argument(
            help="JSONL file: id, text, entities, relationships. Omitted: the bundled sample."
        ),
    ] = None,
    description: Annotated[str | None, typer.Option(help="Dataset description.")] = None,
) -> None:
    """Upload (or update) items by id; changed content makes a new dataset version."""
    if not name.strip():
        raise UsageError("NAME must not be empty")
    if file is not None:
        check_readable("FILE", file)
    items, warnings = read_items(file) if file is not None else (sample_items(), [])
    for warning in warnings:
        _warn(f"{warning}; line skipped")
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
    rows = [
        [
            info.name,
            "" if info.version is None else str(info.version),
            str(info.item_count),
            (info.updated_at or "")[:10],
            " ".join((info.description or "").split()),
        ]
        for info in infos
    ]
    headers = ("name", "version", "items", "updated", "description")
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers[:-1])]
    room = max(10, console.width - sum(widths) - 2 * len(headers) - 1)  # one line per dataset
    table = Table(*headers, box=None)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row[:-1]), escape(_preview(row[-1], room)))
    console.print(table)


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
    shown = items if limit == 0 else items[:limit]
    shown_version = info.version if version is None else version
    title = f"{info.name} · version {shown_version} · {len(items)} items"
    table = Table(title=escape(title))
    for column in ("id", "text", "#ent", "#rel"):
        table.add_column(column, no_wrap=True, justify="right" if column[0] == "#" else "left")
    id_width = max((len(item.id) for item in shown), default=2)
    width = max(20, console.width - id_width - 22)  # borders, padding and the count columns
    for item in shown:
        table.add_row(
            escape(item.id),
            escape(_preview(item.text, width)),
            str(len(item.expected.entities)),
            str(len(item.expected.relationships)),
        )
    console.print(table)
    if len(shown) < len(items):
        console.print(f"… {len(items) - len(shown)} more (--limit 0 shows all)", highlight=False)


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
