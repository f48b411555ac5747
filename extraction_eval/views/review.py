"""Review queues for people: the candidates triage picked, and what apply-reviews did."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from extraction_eval.views.tables import print_table

if TYPE_CHECKING:  # annotations only
    from extraction_eval.evaluators.review import Candidate
    from extraction_eval.seeds.review.apply import ApplyReport
    from extraction_eval.seeds.review.triage import TriageReport


def _say(out: Console, message: str) -> None:
    out.print(escape(message), highlight=False, soft_wrap=True)


def render_candidates(rows: Sequence[tuple[Candidate, str]], out: Console) -> None:
    """One row per candidate: the item, the kind, the question, and its state."""
    if not rows:
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("item", "kind", "question", "state"):
        table.add_column(col)
    for c, state in rows:
        table.add_row(escape(c.item_id), c.kind, escape(c.question), escape(state))
    print_table(out, table)


def render_triage(report: TriageReport, out: Console, err: Console) -> None:
    found = ", ".join(f"{n} {k}" for k, n in sorted(report.found.items())) or "none"
    where = (
        f"LangFuse annotation queue {report.queue!r}"
        + (" (created, with score config gold_verdict)" if report.queue_created else "")
        if report.mode == "langfuse"
        else f"review file {report.file} (queue {report.queue!r})"
    )
    render_candidates([(c, "sent") for c in report.sent], out)
    _say(out, f"candidates found: {found}")
    held = []
    if report.already:
        held.append(f"{report.already} already in the queue")
    if report.held_back_limit:
        held.append(f"{report.held_back_limit} over --limit")
    if report.held_back_trace:
        held.append(f"{report.held_back_trace} on a trace that already has a queue item")
    _say(
        out,
        f"sent {len(report.sent)} to {where}" + (f"; {', '.join(held)}" if held else ""),
    )
    for p in report.problems:
        err.print(f"[yellow]warning:[/] {escape(p)}", highlight=False, soft_wrap=True)


def render_apply(report: ApplyReport, out: Console, err: Console) -> None:
    for line in report.notes:
        err.print(f"[yellow]note:[/] {escape(line)}", highlight=False, soft_wrap=True)
    for line in report.problems:
        err.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)
    by_verdict: dict[str, int] = {}
    for d in report.applied:
        by_verdict[d.verdict] = by_verdict.get(d.verdict, 0) + 1
    applied = ", ".join(f"{n} {v}" for v, n in sorted(by_verdict.items())) or "none"
    versions = "; ".join(f"dataset {ds!r} version {v}" for ds, v in report.versions.items())
    _say(
        out,
        f"queue {report.queue!r}: applied {applied}"
        + (f" -> {versions} (human-verified)" if versions else "")
        + f"; {report.unchanged} already applied, {report.unsure} unsure,"
        f" {report.pending} awaiting a verdict, {len(report.problems)} not applied (above)",
    )


def candidate_state(applied: Any, version: Any) -> str:
    return "awaiting a verdict" if applied is None else f"{applied} (version {version})"
