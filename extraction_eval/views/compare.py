"""``compare``'s text output, in its order: the paired figures, the alias lines, the item
diff, then the blocks asked for (PPI, judged figures and their paired Δ, protocols)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from extraction_eval.analysis.compare.extras import CompareExtras
    from extraction_eval.analysis.compare.run_diff import RunDiff
    from extraction_eval.backends.base import RunRecord


def render_compare(
    data: dict[str, Any],
    diff: RunDiff,
    runs: Sequence[RunRecord],
    extras: CompareExtras,
    console: Console,
    *,
    alias_lines: bool = True,
) -> None:
    """B against A (``RunComparison.to_json()``), the changed items, and the extras; the
    alias lines are left out when both runs were re-scored with given names."""
    from extraction_eval.views.diff import render_run_diff
    from extraction_eval.views.paired import render_alias_lines, render_paired

    a, b = runs
    corrected, judged, judged_paired = extras.ppi, extras.judged, extras.judged_paired
    protocols = extras.protocols
    render_paired(data, console)
    if alias_lines:
        render_alias_lines((a, b), console)
    render_run_diff(diff, console)
    if corrected:
        from extraction_eval.views.ppi import render_ppi

        for r in corrected:
            render_ppi(r, console)
    if judged:
        from extraction_eval.views.judge import render_judged

        for name, block in judged.items():
            render_judged(block, console, run=name)
        if judged_paired is not None:
            from extraction_eval.views.judge import render_judged_paired

            render_judged_paired(judged_paired, data, console)
    if protocols:
        from extraction_eval.views.protocols import render_paired_protocols, render_protocols

        for side, run in (("a", a), ("b", b)):
            render_protocols(protocols[side], console, title=f"{side.upper()}: {run.name}")
        render_paired_protocols(protocols["paired"], console)
