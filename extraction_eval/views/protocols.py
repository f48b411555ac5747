"""The ``protocols`` blocks of a score report as tables (``score --protocol``): one per
protocol, the figures a published table would print. Plain JSON in, so a rendering can never
change a number."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["protocol_tables", "render_paired_protocols", "render_protocols"]

# possible and actual are sums of these (in the JSON report); short heads keep 80 columns
_SEMEVAL_COLUMNS = {
    "cor": "correct",
    "inc": "incorrect",
    "par": "partial",
    "mis": "missed",
    "spu": "spurious",
}


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _ci(block: dict[str, Any]) -> str:
    bounds = (block.get("ci") or {}).get("f1")
    if isinstance(bounds, dict) and bounds.get("low") is not None:
        return f"{bounds['low']:.3f}–{bounds['high']:.3f}"
    return "—"


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("")
    for head in columns:
        table.add_column(head, justify="right")
    return table


def _semeval(block: dict[str, Any]) -> Table:
    offsetless = block.get("without_offsets") or {}
    title = _offsetless("SemEval-2013 NER modes (nervaluate)", offsetless)
    table = _table(title, ("P", "R", "F1", "F1 CI", *_SEMEVAL_COLUMNS))
    for mode in ("strict", "exact", "partial", "ent_type"):
        _prf_row(table, mode, block.get(mode) or {}, _SEMEVAL_COLUMNS.values())
    return table


def _relext(blocks: dict[str, Any]) -> Table:
    first = blocks.get("re_strict") or blocks.get("re_boundaries") or {}
    offsetless = first.get("without_offsets") or {}
    title = _offsetless("End-to-end RE (Taillé et al. 2020)", offsetless)
    table = _table(title, ("P", "R", "F1", "F1 CI", "tp", "fp", "fn"))
    for name in ("re_strict", "re_boundaries"):
        _prf_row(table, name, blocks.get(name) or {}, ("tp", "fp", "fn"))
    return table


def _offsetless(title: str, offsetless: dict[str, Any]) -> str:
    """A protocol table's title, with the objects it could not place when there were any."""
    if any(offsetless.values()):
        title += f"; without offsets: gold {offsetless.get('gold', 0)}"
        title += f", predicted {offsetless.get('predicted', 0)}"
    return title


def _prf_row(table: Table, name: str, row: dict[str, Any], counts: Iterable[str]) -> None:
    table.add_row(
        name,
        _fmt(row.get("precision")),
        _fmt(row.get("recall")),
        Text(_fmt(row.get("f1")), style="bold"),
        _ci(row),
        *(_fmt(row.get(k)) for k in counts),
    )


def _docred(block: dict[str, Any]) -> Table:
    title = (
        f"DocRED: {block.get('correct')}/{block.get('submitted')} correct, {block.get('gold')} gold"
    )
    if block.get("ambiguous") or block.get("unresolved"):
        title += f"; endpoints ambiguous {block.get('ambiguous')}"
        title += f", unresolved {block.get('unresolved')}"
    table = _table(title, ("P", "R", "F1", "F1 CI", "Ign F1", "Evi F1"))
    table.add_row(
        "docred",
        _fmt(block.get("precision")),
        _fmt(block.get("recall")),
        Text(_fmt(block.get("f1")), style="bold"),
        _ci(block),
        _fmt(block.get("ign_f1")),
        _fmt(block.get("evidence_f1")),
    )
    return table


def protocol_tables(report: dict[str, Any]) -> list[Table]:
    """One table per protocol in ``report["protocols"]`` (none when it has none)."""
    blocks = report.get("protocols") or {}
    tables: list[Table] = []
    if "semeval" in blocks:
        tables.append(_semeval(blocks["semeval"]))
    if "re_strict" in blocks or "re_boundaries" in blocks:
        tables.append(_relext(blocks))
    if "docred" in blocks:
        tables.append(_docred(blocks["docred"]))
    return tables


def render_protocols(blocks: dict[str, Any], console: Console, *, title: str) -> None:
    """A titled set of protocol tables (``compare --protocol``: one set per run)."""
    from extraction_eval.views.tables import print_table

    console.print(Text(title, style="bold"))
    for table in protocol_tables({"protocols": blocks}):
        print_table(console, table)


def render_paired_protocols(paired: dict[str, Any], console: Console) -> None:
    """B − A on each protocol F1 (the items both runs have), with the paired CI of Δ."""
    from extraction_eval.views.tables import print_table

    table = _table("protocols, B against A (paired)", ("A", "B", "Δ B−A", "95% CI of Δ"))
    for name, row in paired.items():
        if not name.endswith(".f1"):
            continue  # P and R are in --format json
        ci = row.get("ci")
        bounds = "—" if not ci else f"[{ci['low']:+.3f}, {ci['high']:+.3f}]"
        table.add_row(name, _fmt(row["a"]), _fmt(row["b"]), f"{row['delta']:+.3f}", bounds)
    print_table(console, table)
