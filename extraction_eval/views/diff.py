"""``compare``'s extraction-aware diff: the items with the most broken objects, counts per
type, and one item's gold, A and B objects side by side (``--item``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from extraction_eval.views.tables import print_table

if TYPE_CHECKING:  # annotations only: importing a view loads no store and no scorer
    from extraction_eval.analysis.compare.run_diff import ItemComparison, RunDiff
    from extraction_eval.evaluators.diff import GoldObjectDiff, SideObject
    from extraction_eval.evaluators.diff_counts import DiffCounts
    from extraction_eval.types import ItemResult

# One mark per state of a prediction, one per change: the legend prints them.
STATE_MARKS = {"right": "✓", "wrong_type": "≠", "reversed": "⇄", "missed": "—", "ignored": "○"}
STATE_NAMES = {"right": "right", "wrong_type": "wrong type", "reversed": "reversed"}
LEGEND = (
    "✓ right  ≠ wrong type  ⇄ reversed  — missed  ○ ignored (gold below the confidence floor)"
    " · + fixed  − broken  ~ retyped  ⇄ flipped"
    " · ev+ / ev− evidence now grounded / ungrounded · FP: stands for no gold object"
)

# the per-type columns: counter name -> header
COLUMNS = {
    "fixed": "fixed",
    "broken": "broken",
    "retyped": "retyped",
    "flipped": "flipped",
    "evidence_grounded": "ev+",
    "evidence_ungrounded": "ev−",
    "new_false_positives": "+FP",
    "gone_false_positives": "−FP",
}


def _legend_ab(a: str, b: str) -> Text:
    return Text.assemble(("A", "bold"), f" = {a}   ", ("B", "bold"), f" = {b}")


def render_run_diff(diff: RunDiff, console: Console) -> None:
    """The changed items, most regressions first, then the counts per type."""
    c = diff.counts
    if diff.scoring_differs:
        console.print(
            f"note: the runs were scored with different settings; the diff uses A's"
            f" (match {diff.config.match})",
            highlight=False,
        )
    if diff.gold_missing:
        console.print(f"no diff: {diff.gold_missing}", highlight=False, markup=False)
        return
    if diff.no_gold:
        console.print(
            f"{len(diff.no_gold)} paired items not in the dataset (not diffed)", highlight=False
        )
    if not diff.items:
        console.print(f"no item changed between A and B ({c.items} items paired)")
    else:
        table = Table(
            title="items with the most broken objects (B vs A)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        table.add_column("item", no_wrap=True, min_width=max(len(d.item_id) for d in diff.items))
        for head in ("broken", "fixed", "retyped", "new FP", "gone FP"):
            table.add_column(head, justify="right")
        table.add_column("also")
        for d in diff.items:
            also = []
            if d.flipped:
                also.append(f"{d.flipped} flipped")
            if d.evidence_grounded or d.evidence_ungrounded:
                also.append(f"ev +{d.evidence_grounded}/−{d.evidence_ungrounded}")
            if d.a_failed != d.b_failed:
                also.append("B errored" if d.b_failed else "A errored")
            if d.gold_empty:
                also.append("gold-empty")
            table.add_row(
                d.item_id,
                Text(str(d.broken), style="red" if d.broken else ""),
                Text(str(d.fixed), style="green" if d.fixed else ""),
                str(d.retyped),
                Text(str(d.new_false_positives), style="red" if d.new_false_positives else ""),
                str(d.gone_false_positives),
                ", ".join(also),
            )
        print_table(console, table)
    render_diff_counts(c, console)


def render_diff_counts(c: DiffCounts, console: Console) -> None:
    """Totals, then fixed / broken / retyped (and the rest) per entity and relationship type."""
    t = c.totals
    console.print(
        f"diff over {c.items} paired items: {c.changed_items} changed,"
        f" {c.items_with_regressions} with a regression; fixed {t['fixed']}, broken"
        f" {t['broken']}, retyped {t['retyped']}, flipped {t['flipped']}; evidence grounded"
        f" +{t['evidence_grounded']} / −{t['evidence_ungrounded']}; false positives new"
        f" {t['new_false_positives']}, gone {t['gone_false_positives']} (on gold-empty items:"
        f" {c.new_hallucinations} new, {c.gone_hallucinations} gone hallucinations); errored"
        f" items A {c.a_failed}, B {c.b_failed}",
        highlight=False,
    )
    for kind, title in (("entity", "entities"), ("relationship", "relationships")):
        rows = c.by_type(kind)  # type: ignore[arg-type]
        if not rows:
            continue
        table = Table(
            title=f"{title} by type (new / gone FP: +FP / −FP)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        table.add_column("type", no_wrap=True, min_width=max(len(t) for t in rows))
        for head in COLUMNS.values():
            table.add_column(head, justify="right", no_wrap=True)
        for type_, counts in rows.items():
            table.add_row(type_, *(str(counts[name]) for name in COLUMNS))
        print_table(console, table)


def _side_cell(state: str, side: SideObject | None, gold_label: str, gold_type: str) -> Text:
    """The prediction standing for a gold object: only what differs from the gold is spelt
    out (its label when not the gold's, its type when not the gold's)."""
    if side is None:
        word = "ignored" if state == "ignored" else "missed"
        return Text(f"{STATE_MARKS[state]} {word}", style="dim")
    text = Text(STATE_MARKS[state])
    if side.label != gold_label:
        text.append(f" {side.label}")
        if side.via is not None and side.via != side.label:
            text.append(f" (as {side.via!r})", style="dim")
        elif side.via is not None:
            text.append(" (a mention)", style="dim")
    if side.type.casefold() != gold_type.casefold():
        text.append(f" ({side.type})", style="yellow")
    if not side.grounded:
        text.append(" [ungrounded]", style="dim")
    return text


def _marks(o: GoldObjectDiff) -> Text:
    out = Text()
    for on, mark, style in (
        (o.change == "fixed", "+ fixed", "green"),
        (o.change == "broken", "− broken", "red"),
        (o.retyped, "~ retyped", "yellow"),
        (o.flipped, "⇄ flipped", "yellow"),
        (o.evidence == "grounded", "ev+", "green"),
        (o.evidence == "ungrounded", "ev−", "red"),
    ):
        if on:
            if out:
                out.append(" ")
            out.append(mark, style=style)
    return out


def _error_line(side: str, result: ItemResult) -> str | None:
    if result.ok:
        return None
    return f"{side} errored ({result.error_kind or 'error'}): {result.error}"


def render_item_comparison(cmp: ItemComparison, console: Console) -> None:
    """The item's text once, then every gold object with what A and B predicted for it, then
    the predictions that stand for no gold object."""
    d = cmp.diff
    console.print(
        Text.assemble(("item ", "bold"), (cmp.item.id, "bold"), "   ", _legend_ab(cmp.a, cmp.b)),
        soft_wrap=True,
    )
    console.print(Text(cmp.item.text))
    for line in (_error_line("A", cmp.result_a), _error_line("B", cmp.result_b)):
        if line:
            console.print(line, highlight=False, markup=False)
    console.print(
        f"fixed {d.fixed}, broken {d.broken}, retyped {d.retyped}, flipped {d.flipped},"
        f" new FP {d.new_false_positives}, gone FP {d.gone_false_positives}"
        + ("  (gold-empty item)" if d.gold_empty else ""),
        highlight=False,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, show_lines=False)
    for head in ("gold", "A", "B", "change"):
        table.add_column(head, overflow="fold")
    kind_shown = None
    for o in d.objects:
        if o.kind != kind_shown:
            if kind_shown is not None:
                table.add_section()
            kind_shown = o.kind
        gold = Text(o.label)
        if o.kind == "entity":  # a relationship's label already names its type
            gold.append(f" ({o.type})", style="cyan")
        table.add_row(
            gold,
            _side_cell(o.a, o.a_pred, o.label, o.type),
            _side_cell(o.b, o.b_pred, o.label, o.type),
            _marks(o),
        )
    if d.extras:
        table.add_section()
    for x in d.extras:
        cells = []
        for side in (x.a_pred, x.b_pred):
            if side is None:
                cells.append(Text(""))
            else:
                cell = Text(f"FP {side.label} ({side.type})")
                if not side.grounded:
                    cell.append(" [ungrounded]", style="dim")
                cells.append(cell)
        what = {"new": "new FP", "gone": "gone FP", "kept": "FP in both"}[x.status]
        if x.status != "kept" and d.gold_empty:
            what = f"{x.status} hallucination"
        mark = Text(what, style={"new": "red", "gone": "green"}.get(x.status, ""))
        if x.evidence:
            mark.append(" ev+" if x.evidence == "grounded" else " ev−")
        table.add_row(Text("—", style="dim"), cells[0], cells[1], mark)
    if table.row_count:
        print_table(console, table)
    else:
        console.print("no gold object and no prediction in A or B")
    console.print(LEGEND, style="dim", highlight=False)
    if cmp.judged_a or cmp.judged_b:  # beside the string diff above, never folded into it
        from extraction_eval.views.judge import render_judged_matches

        render_judged_matches(cmp.judged_a, console, side="in A")
        render_judged_matches(cmp.judged_b, console, side="in B")
