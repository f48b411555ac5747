"""The judge for people: a calibration, and the judged block printed under the string
figures (``score --judge``). Plain JSON in, so a rendering never changes a number."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from extraction_eval.textsafe import escape_controls
from extraction_eval.views.score_report import fmt_number
from extraction_eval.views.tables import print_table

if TYPE_CHECKING:
    from extraction_eval.analysis.judged_matrix import JudgedRanking


def render_calibration(report: dict[str, Any], console: Console) -> None:
    """tp/fp/fn/tn, precision, recall, accuracy and κ with its interval."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("")
    table.add_column("", justify="right")
    for key in ("tp", "fp", "fn", "tn", "errors", "precision", "recall", "accuracy", "kappa"):
        table.add_row(key, fmt_number(report.get(key)))
    ci = report.get("kappa_ci")
    if ci:
        table.add_row("kappa CI", f"{ci['low']:.3f}–{ci['high']:.3f}")
    print_table(console, Text.assemble(("judge calibrate", "bold"), f" — {report.get('judge')}"))
    print_table(console, table)
    print_table(console, Text(str(report.get("backing", "")), style="bold"))
    stats = report.get("judge_stats") or {}
    print_table(
        console,
        Text(
            f"{stats.get('calls', 0)} judge calls, {stats.get('cache_hits', 0)} cache hits,"
            f" {stats.get('errors', 0)} errors, cost ${stats.get('cost_usd', 0.0):.4f};"
            f" {report.get('ci_method')}, {report.get('resamples')} resamples",
            style="dim",
        ),
    )


def render_judged(
    judged: dict[str, Any],
    console: Console,
    *,
    run: str | None = None,
    stored: str | None = None,
) -> None:
    """The second block: judged P/R/F1 beside the string figures above it, with what backs
    the judge and what judging cost (``run``: whose figures, when several are shown)."""
    table = Table(title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("judged")
    for head in ("P", "R", "F1", "tp", "fp", "fn", "+judged"):
        table.add_column(head, justify="right")
    matches = judged.get("matches") or {}
    for label, key in (
        ("entities", "entities"),
        ("entities, typed", "entities_typed"),
        ("relationships", "relationships"),
    ):
        block = judged.get(key) or {}
        table.add_row(
            label,
            fmt_number(block.get("precision")),
            fmt_number(block.get("recall")),
            Text(fmt_number(block.get("f1")), style="bold"),
            fmt_number(block.get("tp")),
            fmt_number(block.get("fp")),
            fmt_number(block.get("fn")),
            fmt_number(matches.get(key)),
        )
    print_table(
        console,
        Text.assemble(
            ("judged", "bold"),
            f" run {run!r}" if run is not None else "",
            f" by {judged.get('judge')} — {judged.get('backing')}",
            f" (judged {stored[:19]})" if stored else "",
        ),
    )
    print_table(console, table)
    stats = judged.get("stats") or {}
    print_table(
        console,
        Text(
            f"{stats.get('pairs', 0)} candidate pairs, {stats.get('calls', 0)} judge calls,"
            f" {stats.get('cache_hits', 0)} cache hits, {stats.get('errors', 0)} judge errors,"
            f" cost ${stats.get('cost_usd', 0.0):.4f}; the string figures above are unchanged",
            style="dim",
        ),
    )
    for line in stats.get("error_examples") or []:
        print_table(console, Text(f"  judge error: {line}", style="yellow"))


def render_judged_cells(
    rows: list[tuple[Any, dict[str, Any]]],
    console: Console,
    ranking: JudgedRanking | None = None,
) -> None:
    """``matrix --judge``: per cell, the string and judged F1 side by side (entities and
    relationships; the typed entity F1 judged), the judged matches, and the judge's errors;
    the judged F1s marked as the matrix table marks the string ones (``ranking``)."""
    if not rows:
        return
    from extraction_eval.views.matrix import BEST, CLOSE

    def judged(name: str, report: dict[str, Any], metric: str, block: str) -> Text:
        text = Text(fmt_number((report.get(block) or {}).get("f1")), style="bold")
        if ranking is not None and name in ranking.best.get(metric, ()):
            text.append(BEST, style="bold green")
        elif ranking is not None and name in ranking.similar.get(metric, ()):
            text.append(CLOSE, style="green")
        return text

    first = rows[0][1]
    table = Table(title_justify="left", show_edge=False, pad_edge=False)
    heads = ("cell", "ent F1", "judged", "typed judged", "rel F1", "judged", "+judged", "errors")
    for head in heads:
        table.add_column(head, justify="left" if head == "cell" else "right")
    for run, report in rows:
        name = str(run.name)
        string = (getattr(run, "summary", None) or {}).get("report") or {}
        matches = report.get("matches") or {}
        table.add_row(
            name,
            fmt_number((string.get("entities") or {}).get("f1")),
            judged(name, report, "entity_f1", "entities"),
            judged(name, report, "entity_typed_f1", "entities_typed"),
            fmt_number((string.get("relationships") or {}).get("f1")),
            judged(name, report, "relationship_f1", "relationships"),
            fmt_number(matches.get("entities")),
            fmt_number((report.get("stats") or {}).get("errors")),
        )
    print_table(
        console,
        Text.assemble(("judged", "bold"), f" by {first.get('judge')} — {first.get('backing')}"),
    )
    print_table(console, table)
    if ranking is not None:
        _ranking_legend(ranking, console)


def _ranking_legend(ranking: JudgedRanking, console: Console) -> None:
    """What ★ and ≈ mean on the judged F1s, and the comparisons made for them."""
    from extraction_eval.evaluators.stats.multiple_testing import CORRECTION_TEXT
    from extraction_eval.views.matrix import BEST, CLOSE

    tests = ranking.tests
    kept = sum(t["verdict"] in ("improved", "regressed") for t in tests)
    few = sum(t["verdict"] == "insufficient" for t in tests)
    too_few = f"; {few} with too few shared items for a verdict" if few else ""
    console.print(
        f"{BEST} best cell per judged F1; {CLOSE} judged F1 not significantly different from the"
        " best (paired bootstrap CI of the difference over the items both were judged on"
        " contains 0, or the difference does not survive the correction, or too few shared"
        f" items); {len(tests)} comparisons with the best, corrected:"
        f" {CORRECTION_TEXT[ranking.correction]}; {kept} significant{too_few}",
        highlight=False,
        style="dim",
    )


def judged_match_rows(matches: list[dict[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """(kind, prediction, gold, source, reason) of each judged match, as plain strings with
    their control characters escaped (names and reasons come from models and files)."""

    def cell(m: dict[str, Any], key: str) -> str:
        return escape_controls(str(m.get(key, "")))

    rows = []
    for m in matches:
        source = cell(m, "source")
        if m.get("cached") and source == "cache":
            source = "model (cached)"
        rows.append(
            (cell(m, "kind"), cell(m, "pred_name"), cell(m, "gold_name"), source, cell(m, "reason"))
        )
    return rows


def render_judged_matches(
    judged: dict[str, list[dict[str, Any]]], console: Console, *, side: str = ""
) -> None:
    """One item's judged matches (not string matches: each was settled by the judge or a
    person), per judge identity, with the verdict's source and reason."""
    for identity, matches in judged.items():
        title = Text.assemble(
            ("judged matches", "bold"),
            f" {side}" if side else "",
            f" — by {escape_controls(identity)}",
            " (≈: not a string match; settled by the judge, or by a person)",
        )
        if not matches:
            print_table(console, Text.assemble(title, Text(": none on this item", style="dim")))
            continue
        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for head in ("kind", "prediction", "", "gold", "source", "reason"):
            table.add_column(head, overflow="fold")
        for kind, pred, gold, source, reason in judged_match_rows(matches):
            table.add_row(
                Text(kind),
                Text(pred),
                Text("≈", style="cyan"),
                Text(gold),
                Text(source, style="bold" if source == "person" else ""),
                Text(reason, style="dim"),
            )
        print_table(console, table)


def render_judged_page(block: dict[str, Any], item_ids: list[str], console: Console) -> None:
    """``runs show``: which items of the page have judged matches (per kind), so a person
    knows where ``--item ID`` shows the reasons."""
    items = block.get("items") or {}
    lines = []
    for item_id in item_ids:
        found = items.get(item_id) or []
        if not found:
            continue
        kinds: dict[str, int] = {}
        for m in found:
            kinds[str(m.get("kind"))] = kinds.get(str(m.get("kind")), 0) + 1
        what = ", ".join(f"{n} {k}" for k, n in kinds.items())
        lines.append(f"  {escape_controls(item_id)}  +{len(found)} judged ({what})")
    if lines:
        print_table(
            console,
            Text("items on this page with judged matches (--item ID for their reasons)"),
        )
        for line in lines:
            print_table(console, Text(line))


_STRING_NAMES = {
    "entities": "entity",
    "entities_typed": "entity_typed",
    "relationships": "relationship",
}


def _span(ci: Any) -> str:
    return "—" if not ci else f"[{ci['low']:+.3f}, {ci['high']:+.3f}]"


def _signed(value: Any) -> str:
    return "—" if value is None else f"{value:+.3f}"


def render_judged_paired(
    paired: dict[str, Any], compared: dict[str, Any], console: Console
) -> None:
    """``compare --judge``: per kind, the string Δ F1 (``compared``: the paired comparison
    above) beside the judged A, B and Δ F1 with its paired bootstrap CI."""
    table = Table(title_justify="left", show_edge=False, pad_edge=False)
    for head in ("judged F1, B vs A", "string Δ", "string CI", "judged A", "judged B", "judged Δ"):
        table.add_column(head, justify="left" if head.startswith("judged F1") else "right")
    table.add_column("judged CI", justify="right")
    metrics = compared.get("metrics") or {}
    items = 0
    for label, kind in (
        ("entities", "entities"),
        ("entities, typed", "entities_typed"),
        ("relationships", "relationships"),
    ):
        j = paired.get(f"{kind}.f1") or {}
        s = metrics.get(f"{_STRING_NAMES[kind]}_f1") or {}
        items = max(items, int(j.get("items") or 0))
        table.add_row(
            label,
            _signed(s.get("delta")),
            _span(s.get("ci")),
            fmt_number(j.get("a")),
            fmt_number(j.get("b")),
            Text(_signed(j.get("delta")), style="bold"),
            _span(j.get("ci")),
        )
    print_table(console, table)
    print_table(
        console,
        Text(
            f"judged Δ on the {items} items both runs have, paired bootstrap over items as for"
            " the string Δ (precision and recall in --format json)",
            style="dim",
        ),
    )
