"""``compare``: two runs' run-level values with their CIs side by side (the items that changed
are ``views.diff``)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from extraction_eval.views.score_report import fmt_number
from extraction_eval.views.tables import print_table


def _fmt(value: Any, digits: int = 4) -> str:
    return fmt_number(value, digits)


def _ci_span(lo: Any, hi: Any) -> str:
    return f"{lo:.3f}–{hi:.3f}" if lo is not None and hi is not None else ""


def render_compare(comparison: dict[str, Any], console: Console) -> None:
    """Run-level values with their CIs side by side (bounds folded into their metric's row).

    The runs are called A and B in the headers (with a legend), so long run names cannot
    squeeze the metric names out of an 80-column table."""
    a, b = comparison["a"], comparison["b"]
    rows = {name: (va, vb, delta) for name, va, vb, delta in comparison["run_level"]}
    legend = Text.assemble(("A", "bold"), f" = {a}   ", ("B", "bold"), f" = {b}")
    console.print(Text.assemble(("compare ", "bold"), legend), soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("run-level")
    for head in ("A", "A 95% CI", "B", "B 95% CI", "Δ B−A"):
        table.add_column(head, justify="right")

    def ci(name: str, side: int) -> str:
        lo, hi = rows.get(f"{name}_ci_low"), rows.get(f"{name}_ci_high")
        if lo is None or hi is None:
            return ""
        return _ci_span(lo[side], hi[side])

    for name, (va, vb, delta) in rows.items():
        if name.endswith(("_ci_low", "_ci_high")):
            continue
        colour = "" if delta is None or delta == 0 else ("green" if delta > 0 else "red")
        if name in ("error_rate", "schema_failure_rate", "hallucination_rate") and colour:
            colour = "red" if colour == "green" else "green"  # lower is better
        shown = _fmt(delta) if delta is not None else "—"
        table.add_row(
            name,
            _fmt(va),
            ci(name, 0),
            _fmt(vb),
            ci(name, 1),
            Text(shown, style=colour),
        )
    print_table(console, table)
    only = [
        f"{len(comparison[k])} items only in {r!r}" for k, r in (("only_in_a", a), ("only_in_b", b))
    ]
    if comparison["only_in_a"] or comparison["only_in_b"]:
        console.print("; ".join(only), highlight=False)
