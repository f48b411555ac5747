"""``compare``'s paired part: A, B, Δ and the paired bootstrap CI of Δ with a verdict per
metric, McNemar's line, per-type F1 side by side. Renders ``RunComparison.to_json()``, so the
text and ``--format json`` show the same figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from extraction_eval.evaluators.stats.verdict_rules import APPROXIMATE_BELOW
from extraction_eval.views.score_report import alias_line, fmt_number
from extraction_eval.views.tables import print_table

if TYPE_CHECKING:
    from extraction_eval.backends.base import RunRecord

_VERDICT_STYLE = {"improved": "green", "regressed": "bold red", "no significant change": "dim"}
# short spellings, so the table fits 80 columns (JSON has the full verdict)
_VERDICT_SHORT = {"no significant change": "n.s.", "undefined": "—", "insufficient": "insuff."}


def _signed(value: Any, digits: int = 4) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


def _p(value: Any) -> str:
    if value is None:
        return "—"
    return "<.001" if value < 0.001 else f"{value:.3f}"


def _render_p_values(
    data: dict[str, Any], console: Console, level: int, corrected: bool, text: Any
) -> None:
    """Raw and adjusted p of the headline F1s, of every metric whose raw p is below α, and
    McNemar's (the rest are in ``--format json``)."""
    alpha = 1 - level / 100
    rows = []
    for name, m in data["metrics"].items():
        p = m.get("p_value") or {}
        if p.get("raw") is None:
            continue
        if (name.endswith("_f1") and not name.startswith("entity_typed")) or p["raw"] < alpha:
            rows.append((name, "paired bootstrap", p.get("raw"), p.get("adjusted")))
    mc = data["mcnemar"]
    rows.append(("items right / wrong", "McNemar exact", mc["p_value"], mc.get("p_adjusted")))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for head in ("metric", "test", "p raw"):
        table.add_column(head, justify="left" if head != "p raw" else "right")
    if corrected:
        table.add_column("p adjusted", justify="right")
    for name, test, raw, adjusted in rows:
        table.add_row(name, test, _p(raw), *([_p(adjusted)] if corrected else []))
    print_table(console, table)
    shown = len(rows) - 1
    total = sum(
        1 for m in data["metrics"].values() if (m.get("p_value") or {}).get("raw") is not None
    )
    note = "two-sided"
    if corrected:
        note += f"; adjusted: {text} over {total + 1} tests (every metric's p and McNemar's)"
    if total > shown:
        note += f"; {total - shown} more metrics with p ≥ {alpha:g} in --format json"
    console.print(note, style="dim", highlight=False)


def _render_power(data: dict[str, Any], console: Console) -> None:
    """What this comparison could have detected (its MDE at 80% power)."""
    parts = [
        f"{name} |Δ| ≥ {p['mde']:.3f}"
        for name, p in (data.get("power") or {}).items()
        if p.get("mde") is not None
    ]
    if not parts:
        return
    first = next(iter(data["power"].values()))
    console.print(
        f"this comparison could detect {', '.join(parts)} ({first['power']:.0%} power,"
        f" two-sided α = {first['alpha']:.2g}, paired; `extraction-eval power` for the N a"
        " smaller Δ needs)",
        highlight=False,
    )


def render_paired(data: dict[str, Any], console: Console) -> None:
    """The paired comparison as tables (``data`` is ``RunComparison.to_json()``)."""
    a, b = data["a"], data["b"]
    legend = Text.assemble(("A", "bold"), f" = {a['name']}   ", ("B", "bold"), f" = {b['name']}")
    console.print(Text.assemble(("compare ", "bold"), legend), soft_wrap=True)
    boot = data["bootstrap"]
    level = round(100 * boot["level"])
    console.print(
        f"{data['items']} paired items of dataset {a['dataset']!r} (version "
        f"{a['dataset_version']}); {boot['method']}, {boot['resamples']} resamples, "
        f"seed {boot['seed']}",
        highlight=False,
    )
    correction = data.get("correction") or {}
    corrected = correction.get("method", "none") != "none"
    reasons = {m["insufficient"] for m in data["metrics"].values() if m.get("insufficient")}
    if data["items"] < data.get("min_items", 0):
        console.print(
            Text(
                f"insufficient evidence: {next(iter(reasons), '')} — no metric gets a verdict"
                " (improved / regressed), and a regression gate on this comparison fails",
                style="bold yellow",
            ),
        )
    elif data["items"] and data["items"] < APPROXIMATE_BELOW:
        console.print(
            f"only {data['items']} paired items: the intervals are approximate below"
            f" {APPROXIMATE_BELOW}",
            style="yellow",
            highlight=False,
        )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("metric")
    for head in ("A", "B", "Δ B−A", f"{level}% CI of Δ"):
        table.add_column(head, justify="right")
    table.add_column("verdict")
    for name, m in data["metrics"].items():
        if m["a"] is None and m["b"] is None:
            continue  # undefined in both runs (e.g. no evidence quoted)
        ci = m["ci"]
        span = "—" if ci is None else f"[{ci['low']:+.3f}, {ci['high']:+.3f}]"
        label = name + (" ↓" if m["lower_is_better"] else "")
        verdict = m["verdict"]
        table.add_row(
            label,
            fmt_number(m["a"], 3),
            fmt_number(m["b"], 3),
            _signed(m["delta"], 3),
            span,
            Text(_VERDICT_SHORT.get(verdict, verdict), style=_VERDICT_STYLE.get(verdict, "")),
        )
    print_table(console, table)
    note = (
        "↓ lower is better (a rise is a regression); n.s. = no significant change (the CI of Δ"
        " contains 0" + (", or the adjusted p is not below α" if corrected else "") + ")"
    )
    if reasons:
        note += "; insuff. = too little evidence for a verdict (" + "; ".join(sorted(reasons)) + ")"
    console.print(note, style="dim", highlight=False)
    _render_p_values(data, console, level, corrected, correction.get("text"))
    _render_power(data, console)
    mc = data["mcnemar"]
    console.print(
        f"McNemar exact test (an item is right when its entity F1 is 1 and it did not error;"
        f" gold-empty: no object): {mc['b01']} items wrong in A and right in B (b01), "
        f"{mc['b10']} right in A and wrong in B (b10), {mc['both_right']} right in both, "
        f"{mc['both_wrong']} wrong in both; two-sided p = {mc['p_value']:.4g}"
        + (f" (adjusted {mc['p_adjusted']:.4g})" if mc.get("p_adjusted") is not None else ""),
        highlight=False,
    )
    per_type = Table(
        title="F1 per type", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False
    )
    per_type.add_column("kind")
    per_type.add_column("type")
    for head in ("support", "A F1", "B F1", "Δ B−A"):
        per_type.add_column(head, justify="right")
    rows = 0
    for kind, group in (("entity", "entities"), ("relationship", "relationships")):
        for label, t in data["per_type"][group].items():
            rows += 1
            colour = "" if t["delta"] == 0 else ("green" if t["delta"] > 0 else "red")
            per_type.add_row(
                kind,
                label,
                str(t["support"]),
                fmt_number(t["a_f1"], 3),
                fmt_number(t["b_f1"], 3),
                Text(_signed(t["delta"], 3), style=colour),
            )
    if rows:
        print_table(console, per_type)
    for key, run in (("only_in_a", a), ("only_in_b", b)):
        if data[key]["count"]:
            console.print(
                f"{data[key]['count']} items only in {run['name']!r} (left out)", highlight=False
            )


def render_alias_lines(runs: Sequence[RunRecord], console: Console) -> None:
    """How many of each run's matches came through a gold entity's mention or alias, as the
    run was scored (its stored summary); nothing when none did."""
    for label, run in zip("AB", runs, strict=False):
        report = (run.summary or {}).get("report") or {}
        line = alias_line(report)
        if line is not None:
            console.print(f"{label} through aliases: {line}", highlight=False, soft_wrap=True)
