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


@handle_errors
def compare_cmd(
    run_a: str,
    run_b: str,
    top: Annotated[
        int, typer.Option(help="How many changed items to list (most broken objects first).")
    ] = 10,
    item: Annotated[
        str | None,
        typer.Option(help="Show one item: its text, and gold, A and B objects side by side."),
    ] = None,
    dataset: DatasetOpt = None,
) -> None:
    """Run-level scores side by side, and the items with the most broken objects."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.diff import compare_item, diff_runs
    from extraction_eval.experiments.reporting import compare_runs, get_run
    from extraction_eval.validation import check_int
    from extraction_eval.views.compare import render_compare
    from extraction_eval.views.diff import render_item_comparison, render_run_diff

    check_int("top", top, minimum=0)  # before the store is opened
    store = LocalStore()
    a, b = get_run(store, run_a, dataset), get_run(store, run_b, dataset)
    if item is not None:
        render_item_comparison(compare_item(store, a, b, item), console)
        return
    render_compare(compare_runs(store, a, b, top=0), console)
    render_run_diff(diff_runs(store, a, b, top=top), console)
