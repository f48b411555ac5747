"""``report``: one self-contained HTML file for one or more runs (parse, call, render).

The report builder (jinja2, numpy) is imported inside the command, so ``--help`` loads
none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    alias_settings,
    check_writable,
    console,
    err_console,
    handle_errors,
    judge_budget_line,
    judges_for,
    protocols_of_run,
    warn_line,
)


@handle_errors
def report_cmd(
    runs: Annotated[list[str], typer.Argument(help="Run names (two: with the paired comparison).")],
    out: Annotated[Path, typer.Option(help="The HTML file to write.")] = Path("report.html"),
    dataset: o.RunDataset = None,
    judge: o.JudgeModel = None,
    judge_base_url: o.JudgeBaseUrl = None,
    judge_prompt_label: o.JudgePromptLabel = None,
    max_cost: o.JudgeMaxCost = None,
    protocol: o.Protocol = None,
    train: o.Train = None,
    aliases: o.Aliases = None,
    no_aliases: o.NoAliases = False,
    as_recorded: Annotated[
        bool,
        typer.Option(
            "--as-recorded",
            help="Two runs: score each with its own recorded settings in the paired section"
            " (as compare --as-recorded; default: both with A's).",
        ),
    ] = False,
) -> None:
    """An HTML report that opens offline: configs, metrics with CIs, per-type F1, failure
    taxonomy, latency and cost, and every item with its evidence highlighted in the text.
    With --protocol, a table per protocol; with --aliases / --no-aliases, each run's figures
    re-scored so, in a labelled block beside the stored ones."""
    from extraction_eval.analysis.html_report.data import build_report_data, run_items
    from extraction_eval.analysis.judged_runs import judged_of_runs
    from extraction_eval.atomic import WriteFailed
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.commands.common import check_protocol_options
    from extraction_eval.errors import UsageError
    from extraction_eval.experiments.langfuse_pull import get_or_pull
    from extraction_eval.reports.html import write_report

    check_writable("--out", out)
    check_protocol_options(protocol, train)
    alias_fields = alias_settings(aliases, no_aliases, err_console)
    judges = judges_for(  # refused before the store is opened
        judge, judge_base_url, len(runs), max_cost=max_cost, prompt_label=judge_prompt_label
    )
    store = LocalStore()
    records = [get_or_pull(store, name, dataset, warn=warn_line) for name in runs]
    judged = judged_of_runs(store, records, judges, max_cost=max_cost)  # kept with each run
    items_for, close = run_items(store)
    try:
        data = build_report_data(store, records, items_for=items_for, as_recorded=as_recorded)
    finally:
        close()
    if alias_fields:  # beside the stored figures, labelled: the page's items stay as stored
        from extraction_eval.analysis.rescored import rescored_report
        from extraction_eval.analysis.stored import rescored_with

        records = [rescored_with(r, **alias_fields) for r in records]
        what = "--no-aliases" if no_aliases else f"--aliases {aliases}"
        data.rescored = {"with": what, "runs": [rescored_report(store, r) for r in records]}
    if protocol:
        data.protocols = _protocols(store, records, protocol, train)
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
    judge_budget_line(list(judged.values()), max_cost)  # what was judged is in the page


def _protocols(
    store: Any, records: list[Any], names: list[str], train: Path | None
) -> dict[str, Any]:
    """Each run's protocol blocks and, for two runs, B against A on them (the first run's
    bootstrap settings, as ``compare`` takes A's); warnings on stderr."""
    from extraction_eval.analysis.protocols_run import paired_run_protocols
    from extraction_eval.analysis.stored import run_scoring
    from extraction_eval.evaluators.protocols import check_protocols

    found = [protocols_of_run(store, r, names, train) for r in records]
    out: dict[str, Any] = {
        "names": list(check_protocols(names)),
        "runs": [f.blocks for f in found],
    }
    if len(found) == 2:
        scoring = run_scoring(records[0])
        out["paired"] = paired_run_protocols(
            *found, resamples=scoring.resamples, seed=scoring.seed, method=scoring.ci
        )
    return out
