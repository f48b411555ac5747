"""``runs list|show|export|pull|merge|finalize|rescore``: views over the local store (mirror of
every run); ``compare`` is ``commands/compare.py``.

The store, the reporting code and the views are imported inside each command, so ``--help``
loads none of them.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    check_writable,
    console,
    err_console,
    fail,
    handle_errors,
    warn_line,
)

runs_app = typer.Typer(no_args_is_help=True, help="Runs recorded in the local store.")

DatasetOpt = o.RunDataset


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
    worst: Annotated[
        bool,
        typer.Option(
            "--worst",
            help="Only errored items and items with mistakes, most severe first: errored, then"
            " lowest mean of entity"
            " and relationship F1, then most wrong objects, then item id.",
        ),
    ] = False,
    page: Annotated[
        int | None, typer.Option(help="Which page of items to print (>= 1; 1).")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(help="Items per page (>= 1; 50, or 10 with --worst)."),
    ] = None,
    show_all: Annotated[
        bool,
        typer.Option("--all", help="Every item, most severe first (long for a large run)."),
    ] = False,
    by_category: Annotated[
        bool,
        typer.Option(
            "--by-category", help="With --worst: the worst item of every failure category."
        ),
    ] = False,
    show_config: Annotated[
        bool,
        typer.Option(
            "--config",
            help="The run's recorded parameters (model, temperature, prompt, matching, ...)"
            " instead of its items.",
        ),
    ] = False,
    item: Annotated[
        str | None,
        typer.Option(
            "--item",
            help="One item whole: its input, the model's raw reply, the parsed output, the"
            " error, the repairs, scores and failure taxonomy.",
        ),
    ] = None,
) -> None:
    """A run's summary and its first page of items, most severe first (errored, then lowest
    mean of entity and relationship F1, then most wrong objects): scores, failure
    categories, error, trace. --page / --limit for more, --all for every item, --item ID for
    one item whole (its raw reply included)."""
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.local import LocalStore

    _check_show_options(category, worst, page, limit, show_all, by_category, show_config, item)
    store = LocalStore()
    run = get_run(store, name, dataset)
    if item is not None:
        from extraction_eval.analysis.item_detail import run_item
        from extraction_eval.views.item import render_item_detail

        render_item_detail(run_item(store, run, item), console)
        return
    if show_config:
        from extraction_eval.analysis.stored import run_config_rows
        from extraction_eval.views.runs import render_run_config

        render_run_config(run, run_config_rows(run), console)
        return
    if worst:
        from extraction_eval.analysis.worst import run_worst_by_category, run_worst_items
        from extraction_eval.views.runs import render_worst, render_worst_by_category

        if by_category:
            render_worst_by_category(run, run_worst_by_category(store, run), console)
        else:
            size, number = limit or 10, page or 1
            rows = run_worst_items(store, run, limit=size, category=category, page=number)
            first = (number - 1) * size + 1
            render_worst(run, rows, console, category=category, first=first)
    elif show_all:
        from extraction_eval.analysis.worst import iter_run_items
        from extraction_eval.views.runs import render_run_items

        total = store.count_results(run.id, category=category)
        results = iter_run_items(store, run, category=category)
        render_run_items(run, results, console, category=category, total=total)
    else:
        from extraction_eval.analysis.worst import PAGE_SIZE, run_items_page
        from extraction_eval.views.runs import render_run_page

        shown = run_items_page(
            store, run, page=page or 1, limit=limit or PAGE_SIZE, category=category
        )
        render_run_page(run, shown, console, category=category)
        for judged in store.run_judged(run.id):  # --judge on run, compare or matrix kept it
            from extraction_eval.views.judge import render_judged, render_judged_page

            render_judged(judged, console, stored=judged.get("created_at"))
            render_judged_page(judged, [r.item_id for r in shown.results], console)
    if category is not None:
        _warn_untagged(store.count_untagged(run.id))


def _check_show_options(
    category: str | None,
    worst: bool,
    page: int | None,
    limit: int | None,
    show_all: bool,
    by_category: bool,
    show_config: bool,
    item: str | None,
) -> None:
    """``runs show``'s options that exclude each other, refused before the store is opened."""
    from extraction_eval.evaluators.taxonomy import CATEGORIES
    from extraction_eval.validation import check_int

    if category is not None and category not in CATEGORIES:  # before the store is opened
        fail(f"unknown --category {category!r}; known: {', '.join(CATEGORIES)}")
    for option, value in (("limit", limit), ("page", page)):
        if value is not None:
            check_int(option, value, minimum=1)
    if by_category and not worst:
        fail("--by-category needs --worst")
    if by_category and category is not None:
        fail("--by-category lists every category: leave out --category")
    if show_all and (worst or page is not None or limit is not None):
        fail("--all prints every item: leave out --worst, --page and --limit")
    if show_config and (worst or show_all or page or limit or category or by_category):
        fail("--config prints the parameters, not items: leave out the item options")
    if item is not None and (
        show_config or worst or show_all or page or limit or category or by_category
    ):
        fail("--item prints one item: leave out the other item and --config options")


def _warn_untagged(unknown: int) -> None:
    """``--category`` cannot see items stored before failure categories were."""
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
    from extraction_eval.analysis.reporting import write_run_export
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.local import LocalStore

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
    from extraction_eval.atomic import WriteFailed, atomic_text

    try:
        with atomic_text(out) as fh:  # whole or not at all: never a truncated export
            write_run_export(store, run, kind, fh, deterministic=deterministic)
    except WriteFailed as exc:
        fail(f"--out {exc}")


@runs_app.command("pull")
@handle_errors
def pull_cmd(name: str, dataset: DatasetOpt = None) -> None:
    """LangFuse mode: bring experiment NAME, made on another machine (CI, a colleague), into
    the local store, so compare, report, runs show --worst and the gate work on it."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.langfuse_pull import pull_run

    run = pull_run(LocalStore(), name, dataset=dataset, warn=warn_line)
    summary = run.summary or {}
    console.print(
        f"pulled run {run.name!r} on {run.dataset!r} (experiment {run.experiment_id}):"
        f" {summary.get('items', 0)} items, {summary.get('errors', 0)} errored",
        highlight=False,
        soft_wrap=True,
    )


@runs_app.command("merge")
@handle_errors
def merge_cmd(
    name: str,
    sources: Annotated[
        list[Path],
        typer.Option(
            "--from",
            help="A shard's store.db holding run NAME (repeatable).",
            show_default=False,
        ),
    ],
    dataset: DatasetOpt = None,
    take_over_lock: o.TakeOverLock = False,
) -> None:
    """Fold run NAME of shard stores into this store's run (all or nothing); then `runs
    finalize NAME`."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.shards import merge_runs

    report = merge_runs(LocalStore(), name, sources, dataset=dataset, take_over_lock=take_over_lock)
    for source in report.sources:
        shard = f" (shard {source.shard})" if source.shard else ""
        console.print(
            f"merged {source.items} results of run {name!r} from {source.path}{shard}",
            highlight=False,
            soft_wrap=True,
        )
    held = ""
    if report.shard_count is not None:
        held = f", shards {', '.join(map(str, report.shards))} of {report.shard_count}"
    console.print(
        f"run {name!r} now has {report.items} results{held};"
        f" `extraction-eval runs finalize {shlex.quote(name)}` computes its run-level scores",
        highlight=False,
        soft_wrap=True,
    )
    for warning in report.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)


@runs_app.command("finalize")
@handle_errors
def finalize_cmd(
    name: str,
    dataset: DatasetOpt = None,
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="Finalize even when items of the dataset version have no result (warned).",
        ),
    ] = False,
    verify: Annotated[
        bool, typer.Option(help="LangFuse mode: read back that the run scores arrived.")
    ] = True,
    fail_under: o.FailUnder = None,
    fail_over: o.FailOver = None,
    take_over_lock: o.TakeOverLock = False,
) -> None:
    """Compute run NAME's run-level scores from all its items (after runs merge); for a
    LangFuse-mode run also post them on its experiment."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.config import parse_fail_over, parse_fail_under
    from extraction_eval.experiments.shards import MissingItems, finalize_run
    from extraction_eval.views.doubts import (
        print_warnings_first,
        print_warnings_recap,
        run_warnings,
    )
    from extraction_eval.views.runs import render_run_summary

    floors, ceilings = parse_fail_under(fail_under or []), parse_fail_over(fail_over or [])
    try:
        outcome = finalize_run(
            LocalStore(),
            name,
            dataset=dataset,
            allow_missing=allow_missing,
            verify=verify,
            take_over_lock=take_over_lock,
        )
    except MissingItems as exc:
        fail(f"{exc} (or pass --allow-missing)")
    doubts = run_warnings(outcome)  # before the tables, recalled in one line at the end
    print_warnings_first(doubts, err_console)
    render_run_summary(outcome, console, warnings=False)
    below = outcome.failed_thresholds(floors, ceilings)
    for line in below:
        err_console.print(f"[red]threshold:[/] {line}", highlight=False)
    print_warnings_recap(doubts, err_console)
    if below:
        raise typer.Exit(1)


@runs_app.command("rescore")
@handle_errors
def rescore_cmd(
    name: str,
    dataset_version: Annotated[
        str, typer.Option(help="The dataset version to score the run's outputs against.")
    ],
    new_name: Annotated[
        str | None, typer.Option("--name", help="Name of the rescored run [NAME@vVERSION].")
    ] = None,
    dataset: DatasetOpt = None,
) -> None:
    """Score run NAME's stored outputs against another dataset version (no model is called),
    stored as a run of its own: compare NAME with it to see what the gold change did."""
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.rescore import rescore_run
    from extraction_eval.views.review import render_gold_change
    from extraction_eval.views.runs import render_run_summary

    store = LocalStore()
    outcome = rescore_run(store, name, dataset_version, new_name=new_name, dataset=dataset)
    render_run_summary(outcome, console)
    old = get_run(store, name, outcome.run.dataset)
    render_gold_change(name, old.summary, outcome.run.name, outcome.run.summary, console)
    for warning in outcome.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    console.print(
        f"the table above is what the gold change did; compare {outcome.run.name} NEXT-RUN"
        " (a run on the same version): what the model did",
        highlight=False,
        soft_wrap=True,
    )
