"""``report``: one self-contained HTML file for one or more runs (parse, call, render).

The report builder (jinja2, numpy) is imported inside the command, so ``--help`` loads
none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import check_writable, console, handle_errors, warn_line


@handle_errors
def report_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run names (two: with the paired comparison).")],
    out: Annotated[Path, typer.Option(help="The HTML file to write.")] = Path("report.html"),
    dataset: Annotated[str | None, typer.Option(help="Dataset, when run names repeat.")] = None,
    judge: o.JudgeModel = None,
    judge_base_url: o.JudgeBaseUrl = None,
) -> None:
    """An HTML report that opens offline: configs, metrics with CIs, per-type F1, failure
    taxonomy, latency and cost, and every item with its evidence highlighted in the text."""
    from extraction_eval.analysis.html_report.data import build_report_data, run_items
    from extraction_eval.atomic import WriteFailed
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.errors import UsageError
    from extraction_eval.experiments.langfuse_pull import get_or_pull
    from extraction_eval.reports.html import write_report

    check_writable("--out", out)
    from extraction_eval.commands.compare import judged_of_runs, judges_for

    judges = judges_for(judge, judge_base_url, len(runs))  # refused before the store is opened
    store = LocalStore()
    records = [get_or_pull(store, name, dataset, warn=warn_line) for name in runs]
    judged_of_runs(store, records, judges)  # kept with each run: the report shows them
    items_for, close = run_items(store)
    try:
        data = build_report_data(store, records, items_for=items_for)
    finally:
        close()
    try:
        size = write_report(data, out)
    except WriteFailed as exc:
        raise UsageError(f"--out {exc}") from None
    console.print(
        f"wrote {out} ({size / 1e6:.1f} MB): {len(records)} run(s), {data.n_items} items",
        highlight=False,
        soft_wrap=True,
    )
    if coverage := data.coverage():
        console.print(coverage, highlight=False, soft_wrap=True)
