"""``extraction-eval power``: the power figures in a few lines."""

from __future__ import annotations

from rich.console import Console

from extraction_eval.evaluators.stats.power import PowerAnalysis


def render_power(p: PowerAnalysis, baseline: str, against: str | None, console: Console) -> None:
    value = "—" if p.value is None else f"{p.value:.3f}"
    spread = (
        f"measured against {against!r}: correlation {p.correlation:.2f}"
        if against is not None
        else f"assumed correlation {p.correlation:.2f} between runs (--against RUN measures it)"
    )
    console.print(
        f"power of a paired comparison on {p.metric} (baseline {baseline!r}: {value} on"
        f" {p.n} items); two-sided α = {p.alpha:.2g}, {p.power:.0%} power; {spread};"
        f" per-item sd of the difference {p.sd_item:.4f}",
        highlight=False,
    )
    if p.mde is None:
        console.print(
            f"no spread between the items' values on {p.n} items: no power figure can be given",
            highlight=False,
        )
        return
    console.print(
        f"with {p.n} items, the smallest detectable |Δ| (MDE) is {p.mde:.4f}", highlight=False
    )
    if p.delta is not None:
        needed = p.n_needed
        console.print(
            f"to detect |Δ| = {p.delta:g}: {needed} paired items"
            f" (now {p.n}: power {p.power_at_delta:.0%})",
            highlight=False,
        )
    console.print(
        "normal approximation on the items' influence values (delta method for a ratio of"
        " sums); below about 50 items, plan for more",
        style="dim",
        highlight=False,
    )
