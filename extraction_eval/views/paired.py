"""``compare``'s paired part: A, B, Δ and the paired bootstrap CI of Δ with a verdict per
metric, McNemar's line, per-type F1 side by side. Renders ``RunComparison.to_json()``, so the
text and ``--format json`` show the same figures."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from extraction_eval.views.score_report import fmt_number
from extraction_eval.views.tables import print_table

_VERDICT_STYLE = {"improved": "green", "regressed": "bold red", "no significant change": "dim"}
# short spellings, so the table fits 80 columns (JSON has the full verdict)
_VERDICT_SHORT = {"no significant change": "n.s.", "undefined": "—"}


def _signed(value: Any, digits: int = 4) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


def render_paired(data: dict[str, Any], console: Console) -> None:
    """The paired comparison as tables (``data`` is ``RunComparison.to_json()``)."""
    a, b = data["a"], data["b"]
    legend = Text.assemble(("A", "bold"), f" = {a['name']}   ", ("B", "bold"), f" = {b['name']}")
    console.print(Text.assemble(("compare ", "bold"), legend), soft_wrap=True)
    boot = data["bootstrap"]
    level = round(100 * boot["level"])
    console.print(
        f"{data['items']} paired items of dataset {a['dataset']!r} (version "
        f"{a['dataset_version']}); paired bootstrap, {boot['resamples']} resamples, "
        f"seed {boot['seed']}",
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
    console.print(
        "↓ lower is better (a rise is a regression); n.s. = no significant change (the CI of Δ"
        " contains 0)",
        style="dim",
        highlight=False,
    )
    mc = data["mcnemar"]
    console.print(
        f"McNemar exact test (an item is right when its entity F1 is 1 and it did not error;"
        f" gold-empty: no object): {mc['b01']} items wrong in A and right in B (b01), "
        f"{mc['b10']} right in A and wrong in B (b10), {mc['both_right']} right in both, "
        f"{mc['both_wrong']} wrong in both; two-sided p = {mc['p_value']:.4g}",
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
