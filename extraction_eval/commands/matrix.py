"""``extraction-eval matrix``: parse the axes (options, or a ``matrix.toml`` with the same keys),
call ``run_matrix``, render the matrix table. The runner and the views load inside the
command, so ``--help`` loads none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from extraction_eval.commands.common import (
    NO_CACHE_HELP,
    REFRESH_CACHE_HELP,
    cache_mode,
    check_readable,
    console,
    err_console,
    fail,
    handle_errors,
)
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.limits import DEFAULT_MAX_OBJECTS

# Keys a matrix.toml may set: the command's options (``-`` or ``_``), each once.
_LIST_KEYS = ("model", "prompt_label", "temperature")
_SCALAR_KEYS = (
    "dataset",
    "name",
    "repeats",
    "concurrency",
    "limit",
    "base_url",
    "timeout",
    "max_attempts",
    "prompt_name",
    "match",
    "threshold",
    "backend",
    "price_in",
    "price_out",
    "max_cost",
    "shard",
    "max_objects",
    "no_cache",
    "refresh_cache",
)
_DEFAULTS: dict[str, Any] = {
    "dataset": "extraction-eval",
    "repeats": 1,
    "concurrency": 8,
    "timeout": 60.0,
    "max_attempts": 4,
    "prompt_name": "extraction",
    "match": "fuzzy",
    "threshold": 0.85,
    "backend": "auto",
    "max_objects": DEFAULT_MAX_OBJECTS,
}


def read_matrix_toml(path: Path) -> dict[str, Any]:
    """The file's keys as option names; lists for the axes. An unknown key is refused."""
    from extraction_eval.tomlfile import TomlProblem, read_toml

    check_readable("--config", path)
    try:
        data = read_toml(path)
    except TomlProblem as exc:
        raise UsageError(f"--config {path}: {exc}") from None
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key in _LIST_KEYS:
            out[key] = value if isinstance(value, list) else [value]
        elif key in _SCALAR_KEYS:
            out[key] = value
        else:
            known = ", ".join(k.replace("_", "-") for k in (*_LIST_KEYS, *_SCALAR_KEYS))
            raise UsageError(f"--config {path}: unknown key {raw_key!r} (known: {known})")
    return out


@handle_errors
def matrix_cmd(
    model: Annotated[
        list[str] | None, typer.Option(help="provider:model, one per model (repeatable).")
    ] = None,
    prompt_label: Annotated[
        list[str] | None, typer.Option(help="Prompt label, one per prompt (repeatable).")
    ] = None,
    temperature: Annotated[
        list[float] | None, typer.Option(help="Sampling temperature (repeatable).")
    ] = None,
    repeats: Annotated[
        int | None, typer.Option(help="Runs per cell, differing only by a repeat index.")
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Prefix of the cells' run names (needed with --resume).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="matrix.toml with the same keys as these options.")
    ] = None,
    dataset: Annotated[str | None, typer.Option(help="Dataset name.")] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Items in flight at once, over all cells together.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Run only the first N items.")] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue every unfinished cell; finished ones are left alone.")
    ] = False,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
    timeout: Annotated[float | None, typer.Option(help="Per-call timeout, seconds.")] = None,
    max_attempts: Annotated[
        int | None, typer.Option(help="Attempts per item, retries included.")
    ] = None,
    prompt_name: Annotated[str | None, typer.Option(help="Prompt name.")] = None,
    match: Annotated[
        str | None, typer.Option(help="Name matching: exact|casefold|fuzzy|span.")
    ] = None,
    threshold: Annotated[
        float | None, typer.Option(help="Fuzzy name similarity threshold.")
    ] = None,
    backend: Annotated[
        str | None, typer.Option(help="auto (LangFuse when keys are set) | local | langfuse.")
    ] = None,
    verify: Annotated[
        bool, typer.Option(help="LangFuse mode: read back that every trace and score arrived.")
    ] = True,
    price_in: Annotated[
        float | None, typer.Option(help="USD per 1M input tokens (with --price-out).")
    ] = None,
    price_out: Annotated[
        float | None, typer.Option(help="USD per 1M output tokens (with --price-in).")
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(help="USD ceiling for the whole matrix: refused above the estimate."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="Print each cell's cost estimate and the total; run nothing.")
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option(help="I/N: every cell runs only shard I of N of the items (by id hash)."),
    ] = None,
    max_objects: Annotated[
        int | None,
        typer.Option(help="Entities or relationships per item above which it is an error."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help=NO_CACHE_HELP)] = False,
    refresh_cache: Annotated[
        bool, typer.Option("--refresh-cache", help=REFRESH_CACHE_HELP)
    ] = False,
) -> None:
    """One run per (model, prompt label, temperature[, repeat]) cell on one dataset version,
    one shared concurrency budget; then the matrix table."""
    given: dict[str, Any] = {
        "model": model or None,
        "prompt_label": prompt_label or None,
        "temperature": temperature or None,
        "repeats": repeats,
        "name": name,
        "dataset": dataset,
        "concurrency": concurrency,
        "limit": limit,
        "base_url": base_url,
        "timeout": timeout,
        "max_attempts": max_attempts,
        "prompt_name": prompt_name,
        "match": match,
        "threshold": threshold,
        "backend": backend,
        "price_in": price_in,
        "price_out": price_out,
        "max_cost": max_cost,
        "shard": shard,
        "max_objects": max_objects,
    }
    opts = {**_DEFAULTS, **(read_matrix_toml(config) if config else {})}
    opts.update({k: v for k, v in given.items() if v is not None})
    opts["cache"] = cache_mode(
        bool(no_cache or opts.get("no_cache")), bool(refresh_cache or opts.get("refresh_cache"))
    )
    matrix = _matrix_config(opts, resume=resume, verify=verify)

    from extraction_eval.experiments.matrix import estimate_matrix, run_matrix
    from extraction_eval.views.matrix import render_matrix, render_matrix_estimate
    from extraction_eval.views.progress import RichProgress

    matrix = matrix.named()  # one prefix (a default name has a timestamp)
    if dry_run:
        render_matrix_estimate(matrix, estimate_matrix(matrix), console)
        return
    with RichProgress(err_console) as progress:
        outcome = run_matrix(matrix, progress=progress)
    render_matrix(outcome, console)
    for warning in outcome.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    stopped = [c.cell.name for c in outcome.cells if c.run.status == "stopped: budget"]
    if stopped:
        err_console.print(
            f"[red]stopped: budget[/] --max-cost {matrix.base.max_cost:g} reached;"
            f" {len(stopped)} cells have items not run (continue with --resume and a higher"
            " --max-cost)",
            highlight=False,
            soft_wrap=True,
        )
    if outcome.problems:
        fail("; ".join(outcome.problems), 3)


def _matrix_config(opts: dict[str, Any], *, resume: bool, verify: bool) -> Any:
    """The library's config objects (they refuse bad values, naming the field)."""
    from extraction_eval.evaluators.config import ScoringConfig
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.matrix_config import MatrixConfig
    from extraction_eval.experiments.partition import parse_shard
    from extraction_eval.pipeline.base import PipelineConfig

    models = opts.get("model")
    if not models:
        raise InvalidValue("model", "is needed at least once (one per model of the matrix)")
    base = RunConfig(
        dataset=opts["dataset"],
        pipeline=PipelineConfig(
            model=models[0],
            base_url=opts.get("base_url"),
            prompt_name=opts["prompt_name"],
            timeout_s=opts["timeout"],
            max_attempts=opts["max_attempts"],
            price_in=opts.get("price_in"),
            price_out=opts.get("price_out"),
            cache=opts["cache"],
        ),
        scoring=ScoringConfig(
            match=opts["match"], threshold=opts["threshold"], max_objects=opts["max_objects"]
        ),
        concurrency=opts["concurrency"],
        limit=opts.get("limit"),
        resume=resume,
        backend=opts["backend"],
        verify=verify,
        max_cost=opts.get("max_cost"),
        shard=parse_shard(str(opts["shard"])) if opts.get("shard") is not None else None,
    )
    return MatrixConfig(
        models=tuple(models),
        prompt_labels=tuple(opts.get("prompt_label") or [None]),
        temperatures=tuple(opts.get("temperature") or [0.0]),
        repeats=opts["repeats"],
        name=opts.get("name"),
        base=base,
    )
