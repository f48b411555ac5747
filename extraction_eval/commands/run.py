"""``run-experiment`` / ``extraction-eval run``: parse options, call ``run_experiment``, render.

The runner, the scorers and the views are imported inside the command, so ``--help`` loads
none of them (nor numpy, scipy or a provider SDK).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from extraction_eval.commands.common import (
    NO_CACHE_HELP,
    REFRESH_CACHE_HELP,
    cache_mode,
    console,
    err_console,
    fail,
    handle_errors,
)
from extraction_eval.limits import DEFAULT_MAX_OBJECTS


@handle_errors
def run_cmd(
    dataset: Annotated[str, typer.Option(help="Dataset name.")] = "extraction-eval",
    name: Annotated[
        str | None, typer.Option(help="Run name (same name on the same dataset = same run).")
    ] = None,
    model: Annotated[
        str,
        typer.Option(help="provider:model, e.g. offline:baseline, openai:gpt-4o-mini, gemini:…"),
    ] = "offline:baseline",
    prompt_label: Annotated[
        str | None,
        typer.Option(help="Prompt label: LangFuse's, or the local store's (prompts push)."),
    ] = None,
    prompt_version: Annotated[
        int | None, typer.Option(help="Prompt version number instead of a label.")
    ] = None,
    prompt_name: Annotated[str, typer.Option(help="Prompt name.")] = "extraction",
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.0,
    concurrency: Annotated[int, typer.Option(help="Items in flight at once.")] = 8,
    limit: Annotated[int | None, typer.Option(help="Run only the first N items.")] = None,
    pipeline: Annotated[
        str | None, typer.Option(help="Your own pipeline: package.module:function.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server (vLLM, Ollama, llama.cpp).")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue the named run; skip finished items.")] = (
        False
    ),
    retry_errors: Annotated[
        bool, typer.Option(help="Re-run only the items of the named run that failed.")
    ] = False,
    take_over_lock: Annotated[
        bool,
        typer.Option(
            help="Resume a run whose lock is held by a process that is gone (on another host,"
            " or not provably dead); a dead process on this host is taken over anyway."
        ),
    ] = False,
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
    match: Annotated[str, typer.Option(help="Name matching: exact|casefold|fuzzy|span.")] = "fuzzy",
    threshold: Annotated[float, typer.Option(help="Fuzzy name similarity threshold.")] = 0.85,
    timeout: Annotated[float, typer.Option(help="Per-call timeout, seconds.")] = 60.0,
    max_attempts: Annotated[int, typer.Option(help="Attempts per item, retries included.")] = 4,
    backend: Annotated[
        str, typer.Option(help="auto (LangFuse when keys are set) | local | langfuse.")
    ] = "auto",
    verify: Annotated[
        bool, typer.Option(help="LangFuse mode: read back that every trace and score arrived.")
    ] = True,
    price_in: Annotated[
        float | None,
        typer.Option(help="USD per 1M input tokens (with --price-out): replaces genai-prices."),
    ] = None,
    price_out: Annotated[
        float | None, typer.Option(help="USD per 1M output tokens (with --price-in).")
    ] = None,
    min_gold_confidence: Annotated[
        float | None,
        typer.Option(help="Ensemble gold: ignore gold objects below this confidence."),
    ] = None,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="OpenAI Batch API: half price, answers within 24 h; an interrupted run"
            " resumes polling (same --name, --resume).",
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option(
            help="USD ceiling for the whole run: refused when the estimate is above it;"
            " no new item starts once the spend reaches it (--resume continues)."
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Print the cost estimate only: no model call, no run created."
        ),
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(
            help="I/N: run only shard I of N (1..N) of the items, by a hash of their id;"
            " then runs merge + runs finalize."
        ),
    ] = None,
    max_objects: Annotated[
        int,
        typer.Option(
            help="Entities or relationships per item (gold or answer) above which the item is"
            " an error instead of being scored (matching memory grows with their product)."
        ),
    ] = DEFAULT_MAX_OBJECTS,
    no_cache: Annotated[bool, typer.Option("--no-cache", help=NO_CACHE_HELP)] = False,
    refresh_cache: Annotated[
        bool, typer.Option("--refresh-cache", help=REFRESH_CACHE_HELP)
    ] = False,
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
) -> None:
    """Run the extraction pipeline on every item of a dataset and score it."""
    from extraction_eval.evaluators.config import ScoringConfig
    from extraction_eval.experiments.config import RunConfig, parse_fail_over, parse_fail_under
    from extraction_eval.experiments.langfuse_mode import VerificationError
    from extraction_eval.experiments.partition import parse_shard
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig
    from extraction_eval.views.progress import RichProgress
    from extraction_eval.views.runs import render_run_summary

    # The config objects refuse bad values (InvalidValue: one line naming the flag).
    scoring = ScoringConfig(
        match=match,  # type: ignore[arg-type]
        threshold=threshold,
        max_objects=max_objects,
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
            cache=cache_mode(no_cache, refresh_cache),
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
        shard=parse_shard(shard) if shard is not None else None,
    )
    tolerances, base = _baseline(baseline, fail_on_regression or [], config.dataset)
    if dry_run:
        from extraction_eval.experiments.run import estimate_run
        from extraction_eval.views.runs import render_estimate

        render_estimate(estimate_run(config), config, console)
        return
    try:
        with RichProgress(err_console) as progress:
            outcome = run_experiment(config, progress=progress)
    except VerificationError as exc:
        # The run finished and is in the local mirror; show it, then say what LangFuse lacks.
        render_run_summary(exc.outcome, console)
        fail(str(exc), exc.exit_code)
    render_run_summary(outcome, console)
    for warning in outcome.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if outcome.stopped_by_budget and outcome.budget is not None:
        err_console.print(
            f"[red]stopped: budget[/] --max-cost {outcome.budget['max_cost_usd']:g} reached;"
            f" {outcome.budget['not_run']} items not run (continue with --resume and a higher"
            " --max-cost)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    below = outcome.failed_thresholds(config.fail_under, config.fail_over)
    for line in below:
        err_console.print(f"[red]threshold:[/] {line}", highlight=False)
    regressed = False
    if base is not None:
        from extraction_eval.analysis.paired import compare_stored_runs
        from extraction_eval.backends.local import LocalStore

        store = LocalStore()
        result = compare_stored_runs(
            store,
            base,
            store.get_run_by_id(outcome.run.id),
            tolerances=tolerances,
            refuse_as="baseline",
        )
        for warning in result.warnings:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
        err_console.print(
            f"vs baseline {base.name!r}: {result.headline()};"
            f" `extraction-eval compare {base.name} {outcome.run.name}` shows all",
            highlight=False,
            soft_wrap=True,
        )
        gate_line = result.gate_line()
        if gate_line is not None:
            style = "red" if result.gate else "green"
            err_console.print(f"[{style}]{gate_line}[/]", highlight=False, soft_wrap=True)
            regressed = bool(result.gate)
    if below or regressed:
        raise typer.Exit(1)


def _baseline(name: str | None, specs: list[str], dataset: str) -> tuple[dict[str, float], Any]:
    """``--baseline`` / ``--fail-on-regression`` checked before any work: the baseline run
    must exist on the dataset and the metric names and tolerances be valid."""
    from extraction_eval.analysis.paired import parse_tolerances

    tolerances = parse_tolerances(specs)
    if name is None:
        if tolerances:
            fail("--fail-on-regression needs --baseline RUN (the run to compare with)")
        return tolerances, None
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.errors import NotFoundError

    try:
        return tolerances, get_run(LocalStore(), name, dataset)
    except NotFoundError as exc:
        fail(f"--baseline: {exc}")
