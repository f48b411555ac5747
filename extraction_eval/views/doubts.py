"""What casts doubt on a run, printed before its tables and recalled in one line at the end.

A warning after a 60-line summary is read last or not at all, yet it is what decides whether
the figures mean anything (the server ignored the schema, the label sets never meet, too few
items for the intervals). So a finished run prints every warning first, then the tables, then
one line saying how many there were and what they were about.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from extraction_eval.views.score_report import label_warning

if TYPE_CHECKING:
    from extraction_eval.experiments.runner import RunOutcome

_GIST_CHARS = 60  # of each warning in the closing line


def run_warnings(outcome: RunOutcome) -> list[str]:
    """Every warning of a finished run: the labels that never meet, the scoring report's
    (errored items, intervals on few items), then the run's own (response-format probe,
    budget, shards, ...), each once."""
    report = outcome.summary.report
    found = [label_warning(report), *(report.get("warnings") or []), *outcome.warnings]
    out: list[str] = []
    for warning in found:
        if warning and str(warning) not in out:
            out.append(str(warning))
    return out


def print_warnings_first(warnings: Sequence[str], err: Console) -> None:
    """Each warning on its own line, before the tables."""
    for warning in warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


def _gist(warning: str) -> str:
    text = " ".join(warning.split())
    return text if len(text) <= _GIST_CHARS else text[: _GIST_CHARS - 1].rstrip() + "…"


def print_warnings_recap(warnings: Sequence[str], err: Console) -> None:
    """One line at the end: how many warnings are above the tables and their gist."""
    if not warnings:
        return
    gists = "; ".join(_gist(w) for w in warnings)
    err.print(
        f"[yellow]warning:[/] {len(warnings)} warning(s) above the tables: {escape(gists)}",
        highlight=False,
        soft_wrap=True,
    )
