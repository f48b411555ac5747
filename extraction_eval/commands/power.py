"""``extraction-eval power``: the minimum detectable effect of a paired comparison at the
current N, and the N a given Δ needs. Parse, call ``run_power``, render."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import FormatOpt, console, handle_errors, output_format


@handle_errors
def power_cmd(
    baseline: Annotated[str, typer.Option(help="The run whose per-item counts are used.")],
    delta: Annotated[
        float | None, typer.Option(help="The |Δ| to detect: how many items it needs.")
    ] = None,
    metric: Annotated[
        str, typer.Option(help="entity_f1 | relationship_f1 | *_precision | *_recall | ...")
    ] = "entity_f1",
    against: Annotated[
        str | None,
        typer.Option(help="A second run on the same items: measure the between-run spread."),
    ] = None,
    correlation: Annotated[
        float,
        typer.Option(help="Without --against: assumed between-run correlation of items."),
    ] = 0.5,
    power: Annotated[float, typer.Option(help="The power to plan for.")] = 0.8,
    dataset: o.RunDataset = None,
    fmt: FormatOpt = "table",
) -> None:
    """How many items do I need? The smallest |Δ| a paired comparison with the baseline's N
    detects at 80% power, and the N needed to detect --delta."""
    from extraction_eval.analysis.compare.power import run_power
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.views.power import render_power

    fmt = output_format(fmt)
    store = LocalStore()
    base = get_run(store, baseline, dataset)
    other = get_run(store, against, dataset) if against is not None else None
    result = run_power(
        store, base, other, metric=metric, delta=delta, correlation=correlation, power=power
    )
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
        return
    render_power(result, base.name, None if other is None else other.name, console)
