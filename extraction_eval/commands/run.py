"""``run-experiment`` / ``extraction-eval run``: parse options, call ``run_experiment``, render.

The runner, the scorers and the views are imported inside the command, so ``--help`` loads
none of them (nor numpy, scipy or a provider SDK).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    HumanOpt,
    PpiOpt,
    alias_settings,
    cache_mode,
    check_ppi,
    check_readable,
    console,
    err_console,
    fail,
    handle_errors,
)
from extraction_eval.limits import DEFAULT_MAX_OBJECTS

if TYPE_CHECKING:  # annotations only: --help loads no runner
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.runner import RunOutcome


@handle_errors
def run_cmd(
    dataset: o.Dataset = "extraction-eval",
    name: o.Name = None,
    model: o.Model = "offline:baseline",
    prompt_label: o.PromptLabel = None,
    prompt_version: Annotated[
        int | None, typer.Option(help="Prompt version number instead of a label.")
    ] = None,
    prompt_name: o.PromptName = "extraction",
    temperature: o.Temperature = 0.0,
    concurrency: o.Concurrency = 8,
    limit: o.Limit = None,
    pipeline: Annotated[
        str | None, typer.Option(help="Your own pipeline: package.module:function.")
    ] = None,
    base_url: o.BaseUrl = None,
    response_format: o.ResponseFormat = "auto",
    strict_json: o.StrictJson = False,
    resume: o.Resume = False,
    retry_errors: Annotated[
        bool, typer.Option(help="Re-run only the items of the named run that failed.")
    ] = False,
    take_over_lock: o.TakeOverLock = False,
    fail_under: Annotated[
        list[str] | None,
        typer.Option(help="NAME=VALUE: exit 1 when a run-level value is below (repeatable)."),
    ] = None,
    fail_over: Annotated[
        list[str] | None,
        typer.Option(
            help="NAME=VALUE: exit 1 when a lower-is-better value (error_rate, ...) is above."
        ),
    ] = None,
    match: o.Match = "fuzzy",
    threshold: o.Threshold = 0.85,
    timeout: o.Timeout = 60.0,
    max_attempts: o.MaxAttempts = 4,
    backend: o.Backend = "auto",
    verify: o.Verify = True,
    price_in: o.PriceIn = None,
    price_out: o.PriceOut = None,
    min_gold_confidence: o.MinGoldConfidence = None,
    schema: Annotated[
        Path | None,
        typer.Option(
            "--schema",
            help="JSON schema file (types, attributes, labels) for every item of this run,"
            " replacing the items' and the dataset's.",
        ),
    ] = None,
    batch: o.Batch = False,
    max_cost: o.MaxCost = None,
    dry_run: o.DryRun = False,
    shard: o.Shard = None,
    shard_count: o.ShardCount = None,
    max_objects: o.MaxObjects = DEFAULT_MAX_OBJECTS,
    no_cache: o.NoCache = False,
    refresh_cache: o.RefreshCache = False,
    baseline: Annotated[
        str | None,
        typer.Option(help="A stored run to compare this run with when it ends (paired)."),
    ] = None,
    fail_on_regression: Annotated[
        list[str] | None,
        typer.Option(
            help="METRIC=TOLERANCE (with --baseline): exit 1 when the paired 95% CI of Δ vs"
            " the baseline reaches a drop larger than TOLERANCE. Repeatable."
        ),
    ] = None,
    ci: o.Ci = "expanded",
    ppi: PpiOpt = False,
    human: HumanOpt = None,
    aliases: o.Aliases = None,
    no_aliases: o.NoAliases = False,
    judge: o.JudgeModel = None,
    judge_base_url: o.JudgeBaseUrl = None,
    protocol: o.Protocol = None,
    train: o.Train = None,
) -> None:
    """Run the extraction pipeline on every item of a dataset and score it."""
    from extraction_eval.analysis.checks import find_baseline
    from extraction_eval.datasets.schema import read_schema
    from extraction_eval.evaluators.config import ScoringConfig
    from extraction_eval.experiments.config import RunConfig, parse_fail_over, parse_fail_under
    from extraction_eval.experiments.langfuse_mode import VerificationError
    from extraction_eval.experiments.partition import resolve_shard
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig
    from extraction_eval.views.doubts import (
        print_warnings_first,
        print_warnings_recap,
        run_warnings,
    )
    from extraction_eval.views.progress import RichProgress
    from extraction_eval.views.runs import render_run_summary

    # The config objects refuse bad values (InvalidValue: one line naming the flag).
    if schema is not None:
        check_readable("--schema", schema)
    run_schema = None if schema is None else read_schema(schema)
    scoring = ScoringConfig(
        match=match,  # type: ignore[arg-type]
        threshold=threshold,
        max_objects=max_objects,
        ci=ci,  # type: ignore[arg-type]  # checked by ScoringConfig
        **alias_settings(aliases, no_aliases, err_console),  # type: ignore[arg-type]
    )
    config = RunConfig(
        dataset=dataset,
        name=name,
        pipeline=PipelineConfig(
            model=model,
            base_url=base_url,
            temperature=temperature,
            prompt_name=prompt_name,
            prompt_label=prompt_label,
            prompt_version=prompt_version,
            pipeline=pipeline,
            timeout_s=timeout,
            max_attempts=max_attempts,
            price_in=price_in,
            price_out=price_out,
            response_format=response_format,
            cache=cache_mode(no_cache, refresh_cache),
            strict_json=strict_json,
        ),
        scoring=scoring,
        concurrency=concurrency,
        limit=limit,
        resume=resume,
        retry_errors=retry_errors,
        take_over_lock=take_over_lock,
        fail_under=parse_fail_under(fail_under or []),
        fail_over=parse_fail_over(fail_over or []),
        backend=backend,  # type: ignore[arg-type]
        verify=verify,
        min_gold_confidence=min_gold_confidence,
        batch=batch,
        max_cost=max_cost,
        shard=resolve_shard(shard, count=shard_count),
        schema=run_schema,
    )
    base = find_baseline(baseline, fail_on_regression or [], config.dataset)
    check_ppi(ppi, human)
    the_judge = _make_judge(judge, judge_base_url)  # refused before anything is spent
    if protocol or train is not None:
        from extraction_eval.commands.compare import check_protocol_options

        check_protocol_options(protocol, train)
    if dry_run:
        from extraction_eval.experiments.run import estimate_run
        from extraction_eval.views.runs import render_estimate

        render_estimate(estimate_run(config), config, console)
        return
    if the_judge is not None:
        _judge_prompt(the_judge, config)
    try:
        with RichProgress(err_console) as progress:
            outcome = run_experiment(config, progress=progress)
    except VerificationError as exc:
        # The run finished and is in the local mirror; show it, then say what LangFuse lacks.
        doubts = run_warnings(exc.outcome)
        print_warnings_first(doubts, err_console)
        render_run_summary(exc.outcome, console, warnings=False)
        print_warnings_recap(doubts, err_console)
        fail(str(exc), exc.exit_code)
    # what casts doubt on the figures comes before them, and is recalled in one line at the end
    doubts = run_warnings(outcome)
    print_warnings_first(doubts, err_console)
    render_run_summary(outcome, console, warnings=False)
    try:
        _after_run(outcome, config, base, human, the_judge, protocol or [], train)
    finally:
        print_warnings_recap(doubts, err_console)


def _after_run(
    outcome: RunOutcome,
    config: RunConfig,
    base: Any,
    human: Path | None,
    the_judge: Any = None,
    protocol: list[str] | None = None,
    train: Path | None = None,
) -> None:
    """The checks after a run's tables: budget, PPI, the judged figures, the protocols,
    thresholds, the baseline gate."""
    from extraction_eval.analysis.checks import check_run
    from extraction_eval.commands.common import error_line

    checks = check_run(outcome, config, base)
    if checks.budget is not None:
        err_console.print(
            f"[red]stopped: budget[/] {error_line(checks.budget)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1)
    if human is not None:
        from extraction_eval.backends.local import LocalStore
        from extraction_eval.commands.compare import ppi_of_runs
        from extraction_eval.views.ppi import render_ppi

        store = LocalStore()
        for r in ppi_of_runs(store, [store.get_run_by_id(outcome.run.id)], human):
            render_ppi(r, console)
    if the_judge is not None:
        if config.max_cost is not None and hasattr(the_judge, "max_cost_usd"):
            # --max-cost counts the judge's calls too: it gets what the run left over
            spent = outcome.summary.cost_usd or 0.0
            the_judge.max_cost_usd = max(0.0, config.max_cost - spent)
        _render_judged(the_judge, outcome)
    if protocol:
        from extraction_eval.backends.local import LocalStore
        from extraction_eval.commands.compare import protocols_of_run
        from extraction_eval.views.protocols import render_protocols

        store = LocalStore()
        stored = store.get_run_by_id(outcome.run.id)
        blocks = protocols_of_run(store, stored, protocol, train).blocks
        render_protocols(blocks, console, title=f"protocols: {stored.name}")
    for line in checks.thresholds:
        err_console.print(f"[red]threshold:[/] {line}", highlight=False)
    result = checks.baseline
    if base is not None and result is not None:
        for warning in result.warnings:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
        err_console.print(
            f"vs baseline {base.run.name!r}: {result.headline()};"
            f" `extraction-eval compare {base.run.name} {outcome.run.name}` shows all",
            highlight=False,
            soft_wrap=True,
        )
        gate_line = result.gate_line()
        if gate_line is not None:
            style = "red" if result.gate else "green"
            err_console.print(f"[{style}]{gate_line}[/]", highlight=False, soft_wrap=True)
    if checks.failed:
        raise typer.Exit(1)


def _make_judge(model: str | None, base_url: str | None) -> Any:
    """``--judge``: the judge, built (and refused) before the run spends anything."""
    from extraction_eval.errors import UsageError

    if model is None:
        if base_url is not None:
            raise UsageError("--judge-base-url needs --judge MODEL")
        return None
    from extraction_eval.judge.factory import make_judge

    return make_judge(model, base_url=base_url)


def _judge_prompt(judge: Any, config: RunConfig) -> None:
    """LangFuse mode: a model judge's prompt from LangFuse prompt management (created from
    the built-in text when missing); local mode keeps the built-in text."""
    from extraction_eval.experiments.run import uses_langfuse

    if not uses_langfuse(config):
        return
    from extraction_eval.judge.managed import use_langfuse_prompt

    for line in use_langfuse_prompt(judge):
        err_console.print(line, highlight=False, soft_wrap=True, markup=False)


def _render_judged(judge: Any, outcome: RunOutcome) -> None:
    """The run's judged figures under its summary (verdicts cached in the local store; the
    latest calibration of the judge backs them); the run's own record is not changed. In
    LangFuse mode they are posted too: per item on its trace, and on the experiment."""
    from extraction_eval.analysis.judged_runs import judge_run_items, post_judged_scores, run_traces
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.views.judge import render_judged

    with LocalStore(seed=False) as store:
        if hasattr(judge, "cache"):
            judge.cache = store.cache()
        calibration = store.latest_judge_calibration(judge.identity)
        record = store.get_run_by_id(outcome.run.id)
        report, items = judge_run_items(store, record, judge, calibration)
        traces = run_traces(store, record.id) if record.backend == "langfuse" else {}
    render_judged(report, console)
    # LangFuse mode: *_judged item and run scores
    problem = post_judged_scores(record, report, items, traces, outcome.langfuse_observations)
    if problem is not None:
        err_console.print(f"[yellow]warning:[/] {problem}", highlight=False, soft_wrap=True)
