"""Seeding for people: what ``seed-from-trace`` created, updated or skipped, and the counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # annotations only: importing a view loads no LangFuse code
    from extraction_eval.seeds.from_trace import SeedReport


def _say(out: Console, message: str) -> None:
    out.print(escape(message), highlight=False, soft_wrap=True)


def render_seed_report(report: SeedReport, out: Console, err: Console) -> None:
    """Each seeded item with its trace, the skipped traces on ``err``, then the counts."""
    verbs = (
        {"create": "would create", "update": "would update", "unchanged": "unchanged"}
        if report.dry_run
        else {"create": "created", "update": "updated", "unchanged": "unchanged"}
    )
    for it in report.items:
        action = verbs[it.action]
        _say(out, f"{action} {it.item.id} (trace {it.trace_id}, from its {it.source})")
    for line in report.skipped:
        err.print(f"[yellow]skipped[/] {escape(line)}", highlight=False, soft_wrap=True)
    counts = (
        f"{report.count('create')} new, {report.count('update')} changed,"
        f" {report.count('unchanged')} unchanged, {len(report.skipped)} skipped"
    )
    if report.not_selected:
        counts += f", {report.not_selected} filtered out"
    if report.dry_run:
        _say(out, f"dry run on dataset {report.dataset!r}: {counts}; nothing was written")
    elif not report.items and not report.skipped:
        _say(out, f"no traces matched; dataset {report.dataset!r} unchanged")
    else:
        _say(out, f"dataset {report.dataset!r}: {counts}")
