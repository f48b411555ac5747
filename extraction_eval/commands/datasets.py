"""``datasets upload|list|show|versions|export``: parse, call the dataset backend, render.

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
    FormatOpt,
    check_readable,
    check_writable,
    console,
    err_console,
    handle_errors,
    output_format,
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
    schema: Annotated[
        Path | None,
        typer.Option(
            "--schema",
            help="JSON schema file (entity_types, relationship_types, attributes, labels): the "
            "dataset's, given to every item without its own.",
        ),
    ] = None,
) -> None:
    """Upload (or update) items by id; changed content makes a new dataset version."""
    from itertools import chain

    from extraction_eval.datasets.bundled import JOURNAL_DATASET, journal_items, sample_items
    from extraction_eval.datasets.jsonl import stream_items
    from extraction_eval.datasets.schema import read_schema
    from extraction_eval.views.datasets import render_upload

    if not name.strip():
        raise UsageError("NAME must not be empty")
    if schema is not None:
        check_readable("--schema", schema)
    dataset_schema = None if schema is None else read_schema(schema)
    if file is None:  # the bundled journal example under its own name, else the bundled sample
        with _backend() as backend:
            bundled = journal_items() if name == JOURNAL_DATASET else sample_items()
            report = backend.upload_items(
                name, bundled, description=description, schema=dataset_schema
            )
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
                report = backend.upload_items(
                    name, chain([first], items), description=description, schema=dataset_schema
                )
        finally:
            for warning in lines.warnings:
                _warn(warning)
    render_upload(report, lines.skipped, console)


@datasets_app.command("import")
@handle_errors
def import_cmd(
    name: Annotated[str, typer.Argument(help="Dataset name (created if new).")],
    file: Annotated[
        Path, typer.Argument(help="The tool's export (a folder of .txt + .ann for brat).")
    ],
    fmt: Annotated[
        str, typer.Option("--format", help="label-studio | doccano | brat | conll.")
    ] = "",
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write our JSONL to FILE instead of uploading."),
    ] = None,
    description: Annotated[str | None, typer.Option(help="Dataset description.")] = None,
    schema: Annotated[
        Path | None,
        typer.Option("--schema", help="JSON schema file: the dataset's (see upload)."),
    ] = None,
) -> None:
    """Import an annotation tool's export: spans keep their offsets (start/end) and their
    text as name and evidence. A bad record is one warning line; the rest is imported."""
    from extraction_eval.datasets.importers import FORMATS, import_dataset
    from extraction_eval.datasets.jsonl import write_items
    from extraction_eval.datasets.schema import read_schema, with_dataset_schema
    from extraction_eval.views.datasets import render_import, render_upload

    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not name.strip():
        raise UsageError("NAME must not be empty")
    if not file.exists():
        raise UsageError(f"FILE {file}: no such file or folder")
    if out is not None:
        check_writable("--out", out)
    if schema is not None:
        check_readable("--schema", schema)
    dataset_schema = None if schema is None else read_schema(schema)
    imported = import_dataset(file, fmt)
    for warning in imported.warnings:
        _warn(warning)
    render_import(imported, fmt, err_console)
    if not imported.items:
        raise UsageError(f"no record of {file} could be imported")
    if out is not None:
        items = list(with_dataset_schema(imported.items, dataset_schema))
        try:
            with out.open("w", encoding="utf-8", newline="\n") as fh:
                write_items(items, fh)
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write: {exc.strerror or exc}") from None
        console.print(f"wrote {len(items)} items to {escape(str(out))}", highlight=False)
        return
    with _backend() as backend:
        report = backend.upload_items(
            name, imported.items, description=description, schema=dataset_schema
        )
    render_upload(report, imported.records - len(imported.items), console, unit="record(s)")


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


@datasets_app.command("versions")
@handle_errors
def versions_cmd(name: str, fmt: FormatOpt = "table") -> None:
    """A dataset's versions, oldest first: version, created, items, note (what changed). In
    LangFuse mode: what LangFuse offers (it keeps no list; any timestamp is a version)."""
    from extraction_eval.views.datasets import render_dataset_versions

    fmt = output_format(fmt)
    with _backend() as backend:
        versions = backend.dataset_versions(name)
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps(versions.to_json(), ensure_ascii=False, indent=2) + "\n")
        return
    render_dataset_versions(versions, console)


@datasets_app.command("export")
@handle_errors
def export_cmd(
    name: str,
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    version: VersionOpt = None,
) -> None:
    """The dataset as JSONL (the upload format), byte-stable: same items, same bytes. Items
    without a schema of their own carry the dataset's, if it has one."""
    from extraction_eval.datasets.jsonl import write_items
    from extraction_eval.datasets.schema import with_dataset_schema

    if out is not None:
        check_writable("--out", out)
    with _backend() as backend:
        schema = backend.get_dataset(name).schema
        items = list(with_dataset_schema(backend.get_items(name, version=version), schema))
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
