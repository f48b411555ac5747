"""``runs list|show|export`` and ``compare``: views over the local store (mirror of every run).

The store, the reporting code and the views are imported inside each command, so ``--help``
loads none of them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from extraction_eval.commands.common import (
    check_writable,
    console,
    err_console,
    fail,
    handle_errors,
)

runs_app = typer.Typer(no_args_is_help=True, help="Runs recorded in the local store.")

DatasetOpt = Annotated[str | None, typer.Option(help="Dataset, when run names repeat.")]


@runs_app.command("list")
@handle_errors
def list_cmd(dataset: DatasetOpt = None) -> None:
    """Every run, newest last."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.views.runs import render_runs

    render_runs(LocalStore().list_runs(dataset), console)


@runs_app.command("show")
@handle_errors
def show_cmd(
    name: str,
    dataset: DatasetOpt = None,
    category: Annotated[
        str | None,
        typer.Option(help="Only items with an object in this failure category (e.g. missed)."),
    ] = None,
) -> None:
    """A run's items, failing ones first: scores, failure categories, error, trace."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.evaluators.taxonomy import CATEGORIES
    from extraction_eval.experiments.reporting import get_run
    from extraction_eval.views.runs import render_run_items

    if category is not None and category not in CATEGORIES:
        fail(f"unknown --category {category!r}; known: {', '.join(CATEGORIES)}")
    store = LocalStore()
    run = get_run(store, name, dataset)
    total = store.count_results(run.id, category=category)
    results = store.iter_results(run.id, category=category, order_by="failing_first")
    render_run_items(run, results, console, category=category, total=total)
    if category is not None:
        unknown = store.count_untagged(run.id)
        if unknown:
            err_console.print(
                f"[yellow]warning:[/] {unknown} items of this run were recorded before failure"
                " categories were stored and cannot be filtered",
                highlight=False,
                soft_wrap=True,
            )


@runs_app.command("export")
@handle_errors
def export_cmd(
    name: str,
    fmt: Annotated[str, typer.Option("--format", help="jsonl | csv")] = "jsonl",
    out: Annotated[Path | None, typer.Option(help="Write here instead of stdout.")] = None,
    dataset: DatasetOpt = None,
    deterministic: Annotated[
        bool,
        typer.Option(
            "--deterministic",
            help="Leave out per-invocation fields (latency, attempts, tokens, cost, cache_hit,"
            " trace id/url): two runs of one config on the same data export byte-identically.",
        ),
    ] = False,
) -> None:
    """One line per item: output or error, categories, attempts, latency, trace, scores
    (byte-stable)."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.reporting import get_run, write_run_export

    if fmt not in ("jsonl", "csv"):
        fail(f"--format must be jsonl or csv, got {fmt!r}")
    if out is not None:
        check_writable("--out", out)
    store = LocalStore()
    run = get_run(store, name, dataset)
    kind: Literal["jsonl", "csv"] = "csv" if fmt == "csv" else "jsonl"
    if out is None:  # written line by line: a 100k-item run is never one string in memory
        write_run_export(store, run, kind, sys.stdout, deterministic=deterministic)
        return
    try:
        with out.open("w", encoding="utf-8") as fh:
            write_run_export(store, run, kind, fh, deterministic=deterministic)
    except OSError as exc:
        fail(f"--out {out}: cannot write: {exc.strerror or exc}")


FailOnRegressionOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="METRIC=TOLERANCE: exit 1 when the paired 95% CI of Δ reaches a drop larger than"
        " TOLERANCE (its low bound is below −TOLERANCE; mirrored for lower-is-better rates)."
        " Repeatable.",
    ),
]


@handle_errors
def compare_cmd(
    run_a: str,
    run_b: str,
    top: Annotated[int, typer.Option(help="How many changed items to list.")] = 10,
    dataset: DatasetOpt = None,
    resamples: Annotated[int, typer.Option(help="Paired bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed (same seed, same bytes).")] = 42,
    force: Annotated[
        bool,
        typer.Option(help="Compare runs of different dataset versions or item sets (warns)."),
    ] = False,
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    fail_on_regression: FailOnRegressionOpt = None,
) -> None:
    """B against A on the items both have: Δ with a paired bootstrap CI and a verdict per
    metric, McNemar's test, F1 per type, the items that changed most; optionally a gate."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.paired import compare_stored_runs, parse_tolerances
    from extraction_eval.experiments.reporting import get_run
    from extraction_eval.validation import check_int

    # every option is checked before the store is opened
    check_int("top", top, minimum=0)
    check_int("resamples", resamples, minimum=1)
    check_int("seed", seed, minimum=0)
    if fmt not in ("text", "json"):
        fail(f"--format must be text or json, got {fmt!r}")
    tolerances = parse_tolerances(fail_on_regression or [])
    store = LocalStore()
    a, b = get_run(store, run_a, dataset), get_run(store, run_b, dataset)
    result = compare_stored_runs(
        store, a, b, resamples=resamples, seed=seed, force=force, tolerances=tolerances
    )
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    data = result.to_json()
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        from extraction_eval.experiments.reporting import compare_runs
        from extraction_eval.views.compare import render_compare
        from extraction_eval.views.paired import render_paired

        render_paired(data, console)
        render_compare(compare_runs(store, a, b, top=top), console, run_level=False)
    report_gate(result.gate_line(), bool(result.gate))


def report_gate(line: str | None, failed: bool) -> None:
    """The regression gate's one line (stderr, so ``--format json`` stays pure) and exit 1
    when it failed."""
    if line is None:
        return
    style = "red" if failed else "green"
    err_console.print(f"[{style}]{line}[/]", highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)
