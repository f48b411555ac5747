"""Datasets for people: the datasets list, one dataset's items, and the upload summary line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from extraction_eval.views.tables import print_table

if TYPE_CHECKING:  # annotations only: importing a view loads no backend
    from extraction_eval.backends.base import DatasetInfo, DatasetVersions, UploadReport
    from extraction_eval.datasets.importers import Imported
    from extraction_eval.types import DatasetItem, Schema


def render_upload(
    report: UploadReport, skipped_lines: int, out: Console, *, unit: str = "line(s)"
) -> None:
    """One line: what the upload created, updated and left alone, and the version it made."""
    version = "unchanged" if not report.new_version else f"now version {report.version}"
    out.print(
        f"{escape(report.dataset)}: {report.created} created, {report.updated} updated, "
        f"{report.unchanged} unchanged ({version})"
        + (f"; {skipped_lines} {unit} skipped" if skipped_lines else "")
        + ("; dataset schema set" if report.schema_changed else ""),
        highlight=False,
        soft_wrap=True,
    )


def render_import(imported: Imported, fmt: str, out: Console) -> None:
    """One line: how many records became items, and how many were skipped."""
    entities = sum(len(i.expected.entities) for i in imported.items)
    relationships = sum(len(i.expected.relationships) for i in imported.items)
    skipped = imported.records - len(imported.items)
    out.print(
        f"imported {len(imported.items)} of {imported.records} {fmt} records"
        f" ({entities} entities, {relationships} relationships)"
        + (f"; {skipped} skipped" if skipped else ""),
        highlight=False,
        soft_wrap=True,
    )


def schema_line(schema: Schema) -> str:
    """A schema in one line: its types and, when it maps labels, the mapping."""
    parts = [
        f"entity types: {', '.join(schema.entity_types) or 'any'}",
        f"relationship types: {', '.join(schema.relationship_types) or 'any'}",
    ]
    if schema.labels:
        parts.append("labels: " + ", ".join(f"{k} -> {v}" for k, v in schema.labels.items()))
    return "; ".join(parts)


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


def render_dataset_versions(versions: DatasetVersions, out: Console) -> None:
    """``datasets versions``: one row per version, oldest first, and what the backend can
    tell of versions (LangFuse keeps no list)."""
    table = Table(title=f"versions of {escape(versions.dataset)}", title_justify="left", box=None)
    table.add_column("version", justify="right", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("items", justify="right")
    table.add_column("note", overflow="fold", ratio=1)
    for v in versions.versions:
        table.add_row(
            str(v.version),
            (v.created_at or "")[:19].replace("T", " "),
            "" if v.items is None else str(v.items),
            escape(v.note),
        )
    print_table(out, table)
    if not versions.versions:
        out.print("no versions yet", highlight=False)
    if versions.about:
        out.print(escape(versions.about), style="dim", highlight=False)


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
    if info.schema is not None:
        out.print(
            f"dataset schema (items without their own): {escape(schema_line(info.schema))}",
            highlight=False,
            soft_wrap=True,
        )
