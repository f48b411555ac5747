"""``extraction-eval matrix``: parse the axes (options, or a ``matrix.toml`` with the same keys),
call ``run_matrix``, render the matrix table. The runner and the views load inside the
command, so ``--help`` loads none of them."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    alias_settings,
    check_readable,
    console,
    err_console,
    error_line,
    fail,
    handle_errors,
    judge_budget_line,
)
from extraction_eval.limits import DEFAULT_MAX_CELLS

# options the command itself handles, not MatrixConfig settings
_NOT_SETTINGS = (
    "config",
    "dry_run",
    "details",
    "aliases",
    "no_aliases",
    "judge",
    "judge_base_url",
    "judge_prompt_label",
    "protocol",
    "train",
)


@handle_errors
def matrix_cmd(
    model: o.Models = None,
    prompt_label: o.PromptLabels = None,
    temperature: o.Temperatures = None,
    repeats: Annotated[
        int | None, typer.Option(help="Runs per cell, differing only by a repeat index.")
    ] = None,
    name: o.Name = None,
    config: o.ConfigFile = None,
    dataset: o.DatasetOrFile = None,
    concurrency: o.ConcurrencyOrFile = None,
    limit: o.Limit = None,
    resume: o.Resume = False,
    take_over_lock: o.TakeOverLock = False,
    base_url: o.BaseUrl = None,
    response_format: o.ResponseFormatOrFile = None,
    strict_json: o.StrictJson = False,
    timeout: o.TimeoutOrFile = None,
    max_attempts: o.MaxAttemptsOrFile = None,
    prompt_name: o.PromptNameOrFile = None,
    match: o.MatchOrFile = None,
    threshold: o.ThresholdOrFile = None,
    backend: o.BackendOrFile = None,
    verify: o.Verify = True,
    price_in: o.PriceIn = None,
    price_out: o.PriceOut = None,
    max_cost: o.MaxCost = None,
    dry_run: o.DryRun = False,
    shard: o.Shard = None,
    shard_count: o.ShardCount = None,
    max_objects: o.MaxObjectsOrFile = None,
    no_cache: o.NoCache = False,
    refresh_cache: o.RefreshCache = False,
    ci: o.CiOrFile = None,
    aliases: o.Aliases = None,
    no_aliases: o.NoAliases = False,
    correction: Annotated[
        str | None,
        typer.Option(
            help="Comparisons with the best cell, cells × metrics: holm (family-wise error)"
            " | bh (false discovery rate) | none."
        ),
    ] = None,
    max_cells: Annotated[
        int | None,
        typer.Option(
            help="The most cells (models × prompt labels × temperatures × repeats) a matrix"
            f" may have; more is refused before anything runs. [default: {DEFAULT_MAX_CELLS:,}]"
        ),
    ] = None,
    judge: o.JudgeModel = None,
    judge_base_url: o.JudgeBaseUrl = None,
    judge_prompt_label: o.JudgePromptLabel = None,
    protocol: o.Protocol = None,
    train: o.Train = None,
    details: Annotated[
        bool | None,
        typer.Option(
            "--details/--compact",
            help="The matrix table with the F1 CIs, cost and latency (--details) or only the"
            " headline F1s and errors (--compact); default: the details when they fit the"
            " terminal.",
        ),
    ] = None,
) -> None:
    """One run per (model, prompt label, temperature[, repeat]) cell on one dataset version,
    one shared concurrency budget; then the matrix table."""
    # every option by its name (None: not given), before anything else is bound here
    overrides = {k: v for k, v in locals().items() if k not in _NOT_SETTINGS}
    from extraction_eval.experiments.matrix import estimate_matrix, run_matrix
    from extraction_eval.experiments.matrix_config import MatrixConfig
    from extraction_eval.views.doubts import print_warnings_first, print_warnings_recap
    from extraction_eval.views.matrix import render_matrix, render_matrix_estimate
    from extraction_eval.views.progress import RichProgress

    if config is not None:
        check_readable("--config", config)
    matrix = MatrixConfig.resolve(config, overrides).named()  # a default name has a timestamp
    alias_fields = alias_settings(aliases, no_aliases, err_console)
    if alias_fields:  # every cell scores with the same names of one entity
        scoring = dataclasses.replace(matrix.base.scoring, **alias_fields)  # type: ignore[arg-type]
        matrix = dataclasses.replace(matrix, base=dataclasses.replace(matrix.base, scoring=scoring))
    judged_cells = _judged_cells(judge, judge_base_url, judge_prompt_label, matrix)  # refused now
    if protocol or train is not None:
        from extraction_eval.commands.common import check_protocol_options

        check_protocol_options(protocol, train)
    if dry_run:
        render_matrix_estimate(matrix, estimate_matrix(matrix), console)
        return
    with RichProgress(err_console) as progress:
        outcome = run_matrix(matrix, progress=progress)
    print_warnings_first(outcome.warnings, err_console)  # before the table, recalled after it
    render_matrix(outcome, console, details)
    if judged_cells is not None:
        judged_cells([c.run for c in outcome.cells])
    if protocol and outcome.cells:
        _protocol_cells([c.run for c in outcome.cells], protocol, train, matrix.name or "")
    print_warnings_recap(outcome.warnings, err_console)
    stop = outcome.budget_stop()
    if stop is not None:
        err_console.print(
            f"[red]stopped: budget[/] {error_line(stop)}", highlight=False, soft_wrap=True
        )
    if outcome.problems:
        fail("; ".join(outcome.problems), 3)


def _judged_cells(
    model: str | None, base_url: str | None, prompt_label: str | None, matrix: Any
) -> Any:
    """``--judge``: checked now (a bad judge is refused before any cell runs); returns what
    prints each cell's string and judged F1, ranked on the judged F1s as the matrix table
    ranks the string ones, once the matrix has run; or None. The matrix's ``--max-cost``
    counts the judge too: the cells' judges share what the matrix's runs left of it. In
    LangFuse mode, a model judge's prompt is LangFuse's at ``--judge-prompt-label``."""
    if model is None:
        for option, value in (
            ("--judge-base-url", base_url),
            ("--judge-prompt-label", prompt_label),
        ):
            if value is not None:
                fail(f"{option} needs --judge MODEL")
        return None
    from extraction_eval.judge.factory import make_judge
    from extraction_eval.judge.prompt import judge_prompt_label

    make_judge(model, base_url=base_url)  # refused here, before any cell runs
    label = judge_prompt_label(prompt_label)
    max_cost = matrix.base.max_cost

    def show(runs: list[Any]) -> None:
        from extraction_eval.analysis.judged_matrix import judged_ranking
        from extraction_eval.analysis.judged_runs import judge_runs
        from extraction_eval.backends.local import LocalStore
        from extraction_eval.experiments.run import uses_langfuse
        from extraction_eval.judge.managed import judge_prompt_when_keyed
        from extraction_eval.views.judge import render_judged_cells

        judges = [make_judge(model, base_url=base_url) for _ in runs]
        for line in judge_prompt_when_keyed(judges, label, langfuse=uses_langfuse(matrix.base)):
            err_console.print(line, highlight=False, soft_wrap=True, markup=False)
        with LocalStore(seed=False) as store:
            records = [store.get_run_by_id(run.id) for run in runs]
            left = None
            if max_cost is not None:  # what the cells' runs left of the ceiling
                spent = sum(float((r.summary or {}).get("cost_usd") or 0.0) for r in records)
                left = max(0.0, max_cost - spent)
            judged = judge_runs(store, records, judges, budget_usd=left)
        rows = [(record, report) for record, (report, _) in zip(records, judged, strict=True)]
        cells = [
            (r.name, report, items) for r, (report, items) in zip(records, judged, strict=True)
        ]
        ranking = judged_ranking(cells, matrix.base.scoring, matrix.correction)
        render_judged_cells(rows, console, ranking)
        judge_budget_line([report for _, report in rows], max_cost)

    return show


def _protocol_cells(runs: list[Any], names: list[str], train: Any, prefix: str) -> None:
    """``--protocol``: each cell's protocol headline figures, after the matrix table."""
    from extraction_eval.analysis.protocols_run import protocol_cells
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.views.matrix import render_protocol_cells

    with LocalStore(seed=False) as store:
        records = [store.get_run_by_id(run.id) for run in runs]
        cells = protocol_cells(store, records, names, train=train)
    for warning in cells.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    render_protocol_cells(cells, prefix, console)
