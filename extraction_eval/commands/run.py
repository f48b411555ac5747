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
    check_protocol_options,
    check_readable,
    console,
    err_console,
    fail,
    handle_errors,
)
from extraction_eval.limits import DEFAULT_MAX_OBJECTS

if TYPE_CHECKING:  # annotations only: --help loads no runner
    from extraction_eval.evaluators.config import ScoringConfig
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.runner import RunOutcome
    from extraction_eval.types import Schema


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
    workers: o.Workers = 1,
    limit: o.Limit = None,
    pipeline: Annotated[
        str | None, typer.Option(help="Your own pipeline: package.module:function.")
    ] = None,
    base_url: o.BaseUrl = None,
    response_format: o.ResponseFormat = "auto",
    strict_json: o.StrictJson = False,
    resume: o.Resume = False,
    retry_errors: Annotated[
        bool, typer.Option(help="Re-run only the items of the named run that errored.")
    ] = False,
    take_over_lock: o.TakeOverLock = False,
    fail_under: o.FailUnder = None,
    fail_over: o.FailOver = None,
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
    fail_on_regression: o.FailOnRegression = None,
    ci: o.Ci = "expanded",
    ppi: PpiOpt = False,
    human: HumanOpt = None,
    aliases: o.Aliases = None,
    no_aliases: o.NoAliases = False,
    judge: o.JudgeModel = None,
    judge_base_url: o.JudgeBaseUrl = None,
    judge_prompt_label: o.JudgePromptLabel = None,
    protocol: o.Protocol = None,
    train: o.Train = None,
) -> None:
    """Run the extraction pipeline on every item of a dataset and score it."""
    from extraction_eval.analysis.checks import find_baseline
    from extraction_eval.experiments.config import RunConfig, parse_fail_over, parse_fail_under
    from extraction_eval.experiments.partition import resolve_shard
    from extraction_eval.pipeline.base import PipelineConfig

    # The config objects refuse bad values (InvalidValue: one line naming the flag).
    run_schema = _read_schema(schema)
    scoring = _scoring(
        match, threshold, max_objects, ci, alias_settings(aliases, no_aliases, err_console)
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
        workers=workers,
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
    check_protocol_options(protocol, train)
    base = find_baseline(
        baseline, fail_on_regression or [], config.dataset, protocols=protocol or []
    )
    check_ppi(ppi, human)
    the_judge = _make_judge(judge, judge_base_url, judge_prompt_label)  # refused: nothing spent
    if dry_run:
        _render_estimate(config)
        return
    _run_and_render(config, base, human, the_judge, protocol or [], train, judge_prompt_label)


def _scoring(
    match: str, threshold: float, max_objects: int, ci: str, alias_fields: dict[str, Any]
) -> ScoringConfig:
    """The run's scoring settings; ScoringConfig refuses a bad value in one line."""
    from extraction_eval.evaluators.config import ScoringConfig

    return ScoringConfig(
        match=match,  # type: ignore[arg-type]
        threshold=threshold,
        max_objects=max_objects,
        ci=ci,  # type: ignore[arg-type]  # checked by ScoringConfig
        **alias_fields,
    )


def _render_estimate(config: RunConfig) -> None:
    """``--dry-run``: the cost estimate, with no model call and nothing created."""
    from extraction_eval.experiments.run import estimate_run
    from extraction_eval.views.runs import render_estimate

    render_estimate(estimate_run(config), config, console)


def _read_schema(schema: Path | None) -> Schema | None:
    """``--schema``: the file checked, then read (a bad one: one line naming it)."""
    from extraction_eval.datasets.schema import read_schema

    if schema is None:
        return None
    check_readable("--schema", schema)
    return read_schema(schema)


def _run_and_render(
    config: RunConfig,
    base: Any,
    human: Path | None,
    the_judge: Any,
    protocol: list[str],
    train: Path | None,
    judge_prompt_label: str | None = None,
) -> None:
    """The run under a progress bar, its tables between its warnings and their recap, then
    the checks after it (``_after_run``)."""
    from extraction_eval.experiments.langfuse_mode import VerificationError
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.views.doubts import (
        print_warnings_first,
        print_warnings_recap,
        run_warnings,
    )
    from extraction_eval.views.progress import RichProgress
    from extraction_eval.views.runs import render_run_summary

    if the_judge is not None:
        _judge_prompt(the_judge, config, judge_prompt_label)
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
        _after_run(outcome, config, base, human, the_judge, protocol, train)
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
    from extraction_eval.commands.common import error_line, judge_budget_line, ppi_of_runs

    checks = check_run(outcome, config, base, protocols=protocol or (), train=train)
    if checks.budget is not None:
        err_console.print(
            f"[red]stopped: budget[/] {error_line(checks.budget)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1)
    if human is not None:
        from extraction_eval.backends.local import LocalStore
        from extraction_eval.views.ppi import render_ppi

        with LocalStore() as store:
            for r in ppi_of_runs(store, [store.get_run_by_id(outcome.run.id)], human):
                render_ppi(r, console)
    if the_judge is not None:
        if config.max_cost is not None and hasattr(the_judge, "max_cost_usd"):
            # --max-cost counts the judge's calls too: it gets what the run left over
            spent = outcome.summary.cost_usd or 0.0
            the_judge.max_cost_usd = max(0.0, config.max_cost - spent)
        report = _render_judged(the_judge, outcome)
        judge_budget_line([report], config.max_cost)
    if checks.protocols is not None:
        from extraction_eval.views.protocols import render_paired_protocols, render_protocols

        for warning in checks.protocols.warnings:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
        render_protocols(checks.protocols.blocks, console, title=f"protocols: {outcome.run.name}")
        if checks.protocols_paired is not None and base is not None:
            console.print(f"protocols vs baseline {base.run.name!r}:", highlight=False)
            render_paired_protocols(checks.protocols_paired, console)
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
    if base is not None and base.protocol_tolerances:
        failures = checks.protocol_failures
        line = (
            "FAIL " + "; ".join(failures)
            if failures
            else f"pass ({', '.join(base.protocol_tolerances)})"
        )
        style = "red" if failures else "green"
        err_console.print(f"[{style}]protocol gate: {line}[/]", highlight=False, soft_wrap=True)
    if checks.failed:
        raise typer.Exit(1)


def _make_judge(model: str | None, base_url: str | None, prompt_label: str | None) -> Any:
    """``--judge``: the judge, built (and refused) before the run spends anything."""
    from extraction_eval.errors import UsageError

    if model is None:
        for option, value in (
            ("--judge-base-url", base_url),
            ("--judge-prompt-label", prompt_label),
        ):
            if value is not None:
                raise UsageError(f"{option} needs --judge MODEL")
        return None
    from extraction_eval.judge.factory import make_judge
    from extraction_eval.judge.prompt import judge_prompt_label

    judge_prompt_label(prompt_label)  # a label LangFuse could not have: refused now
    return make_judge(model, base_url=base_url)


def _judge_prompt(judge: Any, config: RunConfig, label: str | None) -> None:
    """LangFuse mode: a model judge's prompt from LangFuse prompt management at ``label``
    (``--judge-prompt-label``; created from the built-in text when missing); local mode
    keeps the built-in text."""
    from extraction_eval.experiments.run import uses_langfuse
    from extraction_eval.judge.managed import judge_prompt_when_keyed
    from extraction_eval.judge.prompt import judge_prompt_label

    lines = judge_prompt_when_keyed(
        [judge], judge_prompt_label(label), langfuse=uses_langfuse(config)
    )
    for line in lines:
        err_console.print(line, highlight=False, soft_wrap=True, markup=False)


def _render_judged(judge: Any, outcome: RunOutcome) -> dict[str, Any]:
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
    return report
