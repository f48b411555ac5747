"""One item of a run, whole (``runs show NAME --item ID``): what the model was given, what it
answered word for word, what was read from that, and how it was scored.

Everything from outside (the text, the raw reply, the error) is printed as plain text with its
control characters written as escapes (``\\x1b``): shown whole, never acting on the terminal.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from extraction_eval.textsafe import escape_controls as escape_control
from extraction_eval.views.score_report import fmt_number
from extraction_eval.views.tables import print_table

if TYPE_CHECKING:  # annotations only: importing a view loads no store
    from extraction_eval.analysis.item_detail import ItemDetail
    from extraction_eval.types import Score

_RAW_NONE = "(none stored: the pipeline gave no raw reply, or the row predates it)"


def _section(console: Console, title: str, body: str, *, dim: bool = False) -> None:
    console.print(Text(title, style="bold"))
    console.print(Text(escape_control(body), style="dim" if dim else ""), soft_wrap=True)


def _score_value(score: Score) -> str:
    value = score.value
    if isinstance(value, (bool, str)):
        return str(value)
    return fmt_number(value, 4)


def render_item_detail(detail: ItemDetail, console: Console) -> None:
    """Input, raw reply, parsed output, error, repairs, scores and taxonomy of one item."""
    r = detail.result
    status = "ok" if r.ok else f"failed ({r.error_kind or 'error'})"
    head = Text.assemble(
        ("item ", "bold"),
        escape_control(r.item_id),
        f" of run {escape_control(detail.run.name)!r} on {escape_control(detail.run.dataset)!r}"
        f" — {status}",
    )
    console.print(head, soft_wrap=True)
    facts = [
        ("attempts", str(r.attempts)),
        ("cache hit", "yes" if r.cache_hit else "no"),
        ("latency ms", fmt_number(r.latency_ms, 1)),
        ("tokens in / out", f"{fmt_number(r.usage.tokens_in)} / {fmt_number(r.usage.tokens_out)}"),
        ("cost USD", fmt_number(r.usage.cost_usd, 6)),
    ]
    if r.trace_url or r.trace_id:
        facts.append(("trace", escape_control(r.trace_url or r.trace_id or "")))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in facts:
        grid.add_row(name, Text(value))
    console.print(grid)
    if detail.item is not None:
        _section(console, "input", detail.item.text)
    else:
        _section(console, "input", detail.input_note or "not available", dim=True)
    raw = r.raw_output
    _section(console, "raw reply", raw if raw is not None else _RAW_NONE, dim=raw is None)
    repairs = ", ".join(r.repairs) if r.repairs else "none (bare JSON, or not read)"
    _section(console, "repairs", repairs, dim=not r.repairs)
    if r.output is not None:
        text = json.dumps(r.output.model_dump(mode="json"), indent=2, ensure_ascii=False)
        _section(console, "parsed output", text)
    else:
        _section(console, "parsed output", "none", dim=True)
    if r.error is not None:
        _section(console, "error", r.error)
    scores = Table(title="scores", title_justify="left")
    for column in ("name", "value", "comment"):
        scores.add_column(column, overflow="fold")
    for s in r.scores:
        scores.add_row(
            Text(escape_control(s.name)),
            Text(escape_control(_score_value(s))),
            Text(escape_control(s.comment or "")),
        )
    print_table(console, scores)
    if detail.judged:  # --judge kept the run's judged matches: this item's, with reasons
        from extraction_eval.views.judge import render_judged_matches

        render_judged_matches(detail.judged, console)
    if r.taxonomy is None:
        _section(console, "failure taxonomy", "not recorded (stored before it was kept)", dim=True)
        return
    if not r.taxonomy:
        _section(console, "failure taxonomy", "none: a clean item", dim=True)
        return
    tags = Table(title="failure taxonomy", title_justify="left")
    for column in ("category", "kind", "side", "object"):
        tags.add_column(column, overflow="fold")
    for t in r.taxonomy:
        cells = (t.category, t.kind, t.side, t.label)  # from a store: text, never markup
        tags.add_row(*(Text(escape_control(str(c))) for c in cells))
    print_table(console, tags)
