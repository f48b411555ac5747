"""The matrix table: one row per cell (headline F1s with their CIs, cost, latency, errors),
the best cell per metric starred; with repeats, each cell's run-to-run mean ± std and its
per-item agreement."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from extraction_eval.analysis.matrix_table import HEADLINE, CellRow, MatrixTable
from extraction_eval.analysis.protocols_run import ProtocolCells
from extraction_eval.evaluators.stats.multiple_testing import CORRECTION_TEXT
from extraction_eval.experiments.budget import CostEstimate, sum_estimates
from extraction_eval.experiments.matrix import MatrixOutcome
from extraction_eval.experiments.matrix_config import Cell, MatrixConfig
from extraction_eval.views.score_report import fmt_number
from extraction_eval.views.tables import fits, print_table

_HEADERS = {
    "entity_f1": "entity F1",
    "entity_typed_f1": "typed F1",
    "relationship_f1": "rel. F1",
    "cost_usd": "cost $",
    "latency_p50_ms": "p50 ms",
    "error_rate": "errors",
}
BEST = "★"
CLOSE = "≈"


def _short(name: str, prefix: str) -> str:
    return name[len(prefix) + 1 :] if name.startswith(prefix + "/") else name


_COMPACT = (*HEADLINE, "error_rate")


def _cell(
    row: CellRow, metric: str, best: tuple[str, ...], close: tuple[str, ...], ci_line: bool = True
) -> Text:
    value = row.values.get(metric)
    if metric == "cost_usd":
        shown = "—" if value is None else f"{value:.4f}"
    elif metric == "latency_p50_ms":
        shown = "—" if value is None else f"{value:.0f}"
    elif metric == "error_rate":
        shown = f"{row.errors}/{row.items}"
    else:
        shown = fmt_number(value)
    text = Text(shown)
    if row.name in best:
        text.append(BEST, style="bold green")
    elif row.name in close:
        text.append(CLOSE, style="green")
    ci = row.ci.get(metric)
    if ci is not None and ci_line:
        text.append(f"\n{_bound(ci[0])}–{_bound(ci[1])}", style="dim")
    return text


def _bound(value: float) -> str:
    """A CI bound in at most 3 characters (``.71``, ``1``, ``0``): the table fits 80 columns."""
    text = f"{value:.2f}"
    if text in ("0.00", "1.00"):
        return text[0]
    return text[1:] if text.startswith("0.") else text


def _grid(table: MatrixTable, prefix: str, metrics: tuple[str, ...], details: bool) -> Table:
    # compact: one space less each side of a column, so a long cell name still fits 80 columns
    grid = Table(
        box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=not details, pad_edge=details
    )
    grid.add_column("cell", no_wrap=True)
    for metric in metrics:  # F1 columns wide enough for a CI (".71–.93"): never cut
        grid.add_column(
            _HEADERS[metric],
            justify="right",
            min_width=7 if metric in HEADLINE and details else None,
        )
    for row in table.rows:
        status = "" if row.status == "finished" else f" ({row.status})"
        grid.add_row(
            Text(_short(row.name, prefix) + status),
            *(
                _cell(row, m, table.best.get(m, ()), table.similar.get(m, ()), details)
                for m in metrics
            ),
        )
    return grid


def render_matrix_table(
    table: MatrixTable, prefix: str, console: Console, details: bool | None = None
) -> None:
    """The full table (F1 CIs, cost, latency) when ``details`` or, by default, when it fits the
    console; otherwise the compact one: cell, the headline F1s with their marks, errors."""
    full = _grid(table, prefix, tuple(_HEADERS), True)
    if details is None:
        details = fits(console, full)
    print_table(console, full if details else _grid(table, prefix, _COMPACT, False))
    below = "F1 with its CI below" if details else "CIs, cost and latency: --details"
    console.print(
        f"{BEST} best cell per metric (higher F1; lower cost, latency, errors); {CLOSE} F1 not"
        " significantly different from the best (paired bootstrap CI of the difference"
        " contains 0, or the difference does not survive the correction for the matrix's many"
        f" comparisons, or too few shared items); {below}",
        highlight=False,
        style="dim",
    )
    _render_tests(table, prefix, console)
    if table.repeats:
        _render_repeats(table, prefix, console)


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _render_tests(table: MatrixTable, prefix: str, console: Console) -> None:
    """The comparisons with the best cell that were significant before the correction: raw
    and adjusted p, and whether the difference survives the correction."""
    tests = table.tests
    if not tests:
        return
    raw_hits = [t for t in tests if t["verdict_uncorrected"] in ("improved", "regressed")]
    insufficient = sum(t["verdict"] == "insufficient" for t in tests)
    head = (
        f"{len(tests)} comparisons with the best cell (paired bootstrap p), corrected:"
        f" {CORRECTION_TEXT[table.correction]}"
    )
    if insufficient:
        head += f"; {insufficient} with too few shared items for a verdict"
    console.print(head, highlight=False, style="dim")
    if not raw_hits:
        return
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False)
    grid.add_column("cell", no_wrap=True)
    grid.add_column("metric")
    for col in ("Δ vs best", "p raw", "p adjusted"):
        grid.add_column(col, justify="right")
    grid.add_column("after correction")
    for t in raw_hits:
        kept = t["verdict"] == t["verdict_uncorrected"]
        grid.add_row(
            _short(t["cell"], prefix),
            _HEADERS.get(t["metric"], t["metric"]),
            "—" if t["delta"] is None else f"{t['delta']:+.3f}",
            _p(t["p_value"]),
            _p(t["p_adjusted"]),
            Text(
                ("worse" if t["verdict"] == "regressed" else "better") if kept else "n.s.",
                style="" if kept else "dim",
            ),
        )
    print_table(console, grid)


def _render_repeats(table: MatrixTable, prefix: str, console: Console) -> None:
    grid = Table(
        title="repeats: run-to-run mean ± std, per-item agreement",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        collapse_padding=True,  # a long cell name still fits 80 columns
        pad_edge=False,
    )
    grid.add_column("cell", no_wrap=True)
    grid.add_column("K", justify="right")
    for metric in HEADLINE:
        grid.add_column(_HEADERS[metric], justify="right")
    grid.add_column("agree", justify="right")  # "agreement" was cut at 80 columns
    for group in table.repeats:
        cells = []
        for metric in HEADLINE:
            s = group.spread[metric]
            mean = fmt_number(s.mean)
            cells.append(mean if s.std is None else f"{mean}\n± {s.std:.3f}")
        a = group.agreement
        agree = f"{a.agreeing}/{a.compared}"
        if a.rate is not None:
            agree += f"\n= {a.rate:.3f}"
        if a.errored:
            agree += f"\n{a.errored} errored"
        grid.add_row(_short(group.name, prefix), str(a.repeats), *cells, agree)
    print_table(console, grid)
    for group in table.repeats:
        v = group.variance.get("entity_f1")
        if v is None or v.ci is None:
            continue
        share = v.run_share
        split = (
            "no variation"
            if share is None
            else f"run-to-run {share:.0%} of a single run's variance, items {1 - share:.0%}:"
            f" {v.dominant} dominates"
        )
        console.print(
            f"{_short(group.name, prefix)}: entity F1 pooled over {v.repeats} runs {v.value:.3f}"
            f" [{v.ci[0]:.3f}, {v.ci[1]:.3f}] (cluster bootstrap by item over the runs,"
            f" {v.items} items); {split}",
            highlight=False,
        )


def render_matrix(outcome: MatrixOutcome, console: Console, details: bool | None = None) -> None:
    """The heading (dataset, version, cells, what this invocation ran) and the tables."""
    matrix = outcome.config
    prefix = matrix.name or ""
    skipped = sum(c.skipped for c in outcome.cells)
    version = outcome.cells[0].run.dataset_version if outcome.cells else None
    line = (
        f"matrix {prefix!r} on {matrix.base.dataset!r} (version {version}) —"
        f" {len(outcome.cells)} cells, {outcome.ran} items run now"
    )
    if skipped:
        line += f", {skipped} cells finished earlier left alone"
    console.print(Text(line, style="bold"))  # wrapped at words: 80 columns
    render_matrix_table(outcome.table, prefix, console, details)


def _usd(estimate: CostEstimate) -> str:
    return "unknown" if estimate.usd is None else f"{estimate.usd:.6f}"


def render_matrix_estimate(
    matrix: MatrixConfig, cells: list[tuple[Cell, CostEstimate]], console: Console
) -> None:
    """``matrix --dry-run``: each cell's estimate and the total, before any call."""
    prefix = matrix.name or ""
    grid = Table(
        title=f"cost estimate: matrix {prefix!r} on {matrix.base.dataset!r} (dry run, nothing"
        " was called or created)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    grid.add_column("cell", no_wrap=True)
    for head in ("calls", "tokens in", "tokens out", "est. USD"):
        grid.add_column(head, justify="right")
    for cell, e in cells:
        grid.add_row(
            _short(cell.name, prefix), str(e.calls), str(e.tokens_in), str(e.tokens_out), _usd(e)
        )
    total = sum_estimates(e for _, e in cells)
    grid.add_row(
        Text("total", style="bold"),
        str(total.calls),
        str(total.tokens_in),
        str(total.tokens_out),
        _usd(total),
    )
    print_table(console, grid)
    notes = [f"tokens at {total.method}; retries not included"]
    if total.unpriced:
        notes.append("unpriced: " + "; ".join(total.unpriced))
    if matrix.base.max_cost is not None:
        within = total.usd is not None and total.usd <= matrix.base.max_cost
        notes.append(
            f"--max-cost {matrix.base.max_cost:g}: " + ("within" if within else "would be refused")
        )
    console.print("; ".join(notes), highlight=False, style="dim", soft_wrap=True)


# short heads, so a few protocols still fit 80 columns (the legend under the table names them)
_PROTOCOL_HEADERS = {
    "semeval.strict.f1": "strict",
    "semeval.exact.f1": "exact",
    "semeval.partial.f1": "partial",
    "semeval.ent_type.f1": "ent_type",
    "re_strict.f1": "re_strict",
    "re_boundaries.f1": "re_bound",
    "docred.f1": "docred",
    "docred.ign_f1": "ign F1",
    "docred.evidence_f1": "evi F1",
}


def render_protocol_cells(cells: ProtocolCells, prefix: str, console: Console) -> None:
    """``matrix --protocol``: each cell's protocol headline figures (``semeval.strict.f1``,
    ``re_strict.f1``, ``docred.f1``...) with their CIs, marked like the matrix table's."""
    grid = Table(
        title="protocols per cell",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        collapse_padding=True,
        pad_edge=False,
    )
    grid.add_column("cell", no_wrap=True)
    for metric in cells.metrics:
        grid.add_column(_PROTOCOL_HEADERS.get(metric, metric), justify="right")
    for name, values in cells.values.items():
        row = []
        for metric in cells.metrics:
            value, ci = values[metric]
            text = Text(fmt_number(value))
            if name in cells.best.get(metric, ()):
                text.append(BEST, style="bold green")
            elif name in cells.similar.get(metric, ()):
                text.append(CLOSE, style="green")
            if ci is not None:
                text.append(f"\n{_bound(ci[0])}–{_bound(ci[1])}", style="dim")
            row.append(text)
        grid.add_row(_short(name, prefix), *row)
    print_table(console, grid)
    shown = ", ".join(f"{_PROTOCOL_HEADERS.get(m, m)} = {m}" for m in cells.metrics)
    console.print(
        f"{shown}. {BEST} best cell per protocol metric; {CLOSE} its paired bootstrap CI of"
        " the difference with the best contains 0 (not corrected for the many comparisons);"
        " the F1 CI below (docs/protocols.md)",
        highlight=False,
        style="dim",
    )
