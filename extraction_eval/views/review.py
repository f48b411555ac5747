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


def render_candidates(rows: Sequence[tuple[Candidate, str | None]], out: Console) -> None:
    """One row per candidate: the item, the kind, the question, and its state (if given)."""
    if not rows:
        return
    stated = any(state is not None for _, state in rows)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("item", "kind", "question", *(("state",) if stated else ())):
        table.add_column(col)
    for c, state in rows:
        cells = [escape(c.item_id), c.kind, escape(c.question)]
        table.add_row(*cells, *((escape(state or ""),) if stated else ()))
    print_table(out, table)


def render_triage(report: TriageReport, out: Console, err: Console) -> None:
    found = ", ".join(f"{n} {k}" for k, n in sorted(report.found.items())) or "none"
    where = (
        f"LangFuse annotation queue {report.queue!r}"
        + (" (created, with score config gold_verdict)" if report.queue_created else "")
        if report.mode == "langfuse"
        else f"review file {report.file} (queue {report.queue!r})"
    )
    render_candidates([(c, None) for c in report.sent], out)
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
    for n in report.notes:
        err.print(f"[yellow]note:[/] {escape(n)}", highlight=False, soft_wrap=True)
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


_GOLD_METRICS = (
    "entity_precision",
    "entity_recall",
    "entity_f1",
    "relationship_precision",
    "relationship_recall",
    "relationship_f1",
)


def render_gold_change(
    old_name: str,
    old: dict[str, Any] | None,
    new_name: str,
    new: dict[str, Any] | None,
    out: Console,
) -> None:
    """The same outputs on two gold versions: every change in this table is the gold's."""
    if not old or not new:
        return
    _say(out, f"what the gold change did (same outputs): {old_name} -> {new_name}")
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("", "old gold", "new gold", "change"):
        table.add_column(col, justify="right" if col else "left")
    ov, nv = old.get("values", {}), new.get("values", {})
    for name in _GOLD_METRICS:
        a, b = ov.get(name), nv.get(name)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            table.add_row(name, f"{a:.4f}", f"{b:.4f}", f"{b - a:+.4f}")
    ot = old.get("report", {}).get("taxonomy", {})
    nt = new.get("report", {}).get("taxonomy", {})
    for name in ("spurious", "missed"):
        a, b = ot.get(name), nt.get(name)
        if isinstance(a, int) and isinstance(b, int):
            table.add_row(f"{name} objects", str(a), str(b), f"{b - a:+d}")
    print_table(out, table)
