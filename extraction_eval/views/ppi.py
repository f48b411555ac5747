"""PPI-corrected P/R/F1 next to the model-gold and human-only figures."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from extraction_eval.analysis.compare.ppi import RunPPI
from extraction_eval.evaluators.stats.ppi import Estimate
from extraction_eval.views.tables import print_table


def _est(e: Estimate) -> str:
    if e.value is None:
        return "—"
    if e.low is None or e.high is None:
        return f"{e.value:.3f}"
    return f"{e.value:.3f} [{e.low:.3f}, {e.high:.3f}]"


def render_ppi(result: RunPPI, console: Console) -> None:
    first = result.results[0]
    level = round(100 * result.confidence)
    table = Table(
        title=f"run {result.run!r}: PPI-corrected scores ({level}% CI), {first.n_verified}"
        f" verified of {first.n_verified + first.n_unverified} items",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    for head in ("metric", "model gold", "PPI", "λ", "verified only"):
        table.add_column(head, justify="left" if head == "metric" else "right")
    for r in result.results:
        lam = "—" if r.ppi.lam is None else f"{r.ppi.lam:.2f}"
        table.add_row(r.metric, _est(r.naive), _est(r.ppi), lam, _est(r.classical))
    print_table(console, table)
    console.print(
        "PPI: model gold on every item, its bias corrected by the verified items (valid only"
        " if they are a random sample of the items); λ: how much the model gold is leaned on"
        " (1 plain PPI, 0 the verified items alone; tuned, PPI++)",
        style="dim",
        highlight=False,
    )
