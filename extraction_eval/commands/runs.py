"""``runs list|show|export`` and ``compare``: views over the local store (mirror of every run).

The store, the reporting code and the views are imported inside each command, so ``--help``
loads none of them.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    CorrectionOpt,
    HumanOpt,
    MinItemsOpt,
    PpiOpt,
    check_ppi,
    check_readable,
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
    worst: Annotated[
        bool,
        typer.Option(
            "--worst",
            help="Only failing items, most severe first: errored, then lowest mean of entity"
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
) -> None:
    """A run's summary and its first page of items, most severe first (errored, then lowest
    mean of entity and relationship F1, then most wrong objects): scores, failure
    categories, error, trace. --page / --limit for more, --all for every item."""
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.local import LocalStore
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
    store = LocalStore()
    run = get_run(store, name, dataset)
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

    run = pull_run(LocalStore(), name, dataset=dataset)
    summary = run.summary or {}
    console.print(
        f"pulled run {run.name!r} on {run.dataset!r} (experiment {run.experiment_id}):"
        f" {summary.get('items', 0)} items, {summary.get('errors', 0)} failed",
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
    fail_under: Annotated[
        list[str] | None,
        typer.Option(help="NAME=VALUE: exit 1 when a run-level value is below (as run)."),
    ] = None,
    fail_over: Annotated[
        list[str] | None,
        typer.Option(help="NAME=VALUE: exit 1 when a lower-is-better value is above."),
    ] = None,
    take_over_lock: o.TakeOverLock = False,
) -> None:
    """Compute run NAME's run-level scores from all its items (after runs merge); for a
    LangFuse-mode run also post them on its experiment."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.config import parse_fail_over, parse_fail_under
    from extraction_eval.experiments.shards import MissingItems, finalize_run
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
    render_run_summary(outcome, console)
    for warning in outcome.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    below = outcome.failed_thresholds(floors, ceilings)
    for line in below:
        err_console.print(f"[red]threshold:[/] {line}", highlight=False)
    if below:
        raise typer.Exit(1)


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
    top: Annotated[
        int, typer.Option(help="How many changed items to list (most broken objects first).")
    ] = 10,
    item: Annotated[
        str | None,
        typer.Option(help="Show one item: its text, and gold, A and B objects side by side."),
    ] = None,
    dataset: DatasetOpt = None,
    resamples: Annotated[int, typer.Option(help="Paired bootstrap resamples.")] = 10_000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed (same seed, same bytes).")] = 42,
    force: Annotated[
        bool,
        typer.Option(help="Compare runs of different dataset versions or item sets (warns)."),
    ] = False,
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    fail_on_regression: FailOnRegressionOpt = None,
    ci: Annotated[
        str | None,
        typer.Option(
            "--ci", help="expanded | percentile bootstrap interval (default: the one A ran with)."
        ),
    ] = None,
    correction: CorrectionOpt = "holm",
    min_items: MinItemsOpt = 10,
    ppi: PpiOpt = False,
    human: HumanOpt = None,
    protocol: o.Protocol = None,
    train: o.Train = None,
) -> None:
    """B against A on the items both have: Δ with a paired bootstrap CI and a verdict per
    metric, McNemar's test, F1 per type; the items with the most broken objects; optionally a
    gate. With --item: one item's text with gold, A and B objects side by side."""
    from extraction_eval.analysis.diff import compare_item
    from extraction_eval.analysis.paired import CompareOptions, compare_and_diff, parse_tolerances
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.langfuse_pull import get_or_pull
    from extraction_eval.validation import check_int
    from extraction_eval.views.diff import render_item_comparison, render_run_diff

    # every option is checked before the store is opened
    check_int("top", top, minimum=0)
    check_int("resamples", resamples, minimum=1)
    check_int("seed", seed, minimum=0)
    if fmt not in ("text", "json"):
        fail(f"--format must be text or json, got {fmt!r}")
    others, protocol_tolerances = split_protocol_tolerances(fail_on_regression or [])
    tolerances = parse_tolerances(others)
    check_ppi(ppi, human)
    check_protocol_options(protocol, train)
    if protocol_tolerances and not protocol:
        fail("--fail-on-regression on a protocol metric needs --protocol (e.g. semeval)")
    store = LocalStore()
    a, b = get_or_pull(store, run_a, dataset), get_or_pull(store, run_b, dataset)
    if item is not None:
        render_item_comparison(compare_item(store, a, b, item), console)
        return
    options = CompareOptions(
        top=top,
        resamples=resamples,
        seed=seed,
        force=force,
        tolerances=tolerances,
        ci=ci,  # type: ignore[arg-type]  # checked by CompareOptions
        correction=correction,  # type: ignore[arg-type]
        min_items=min_items,
    )
    result, diff = compare_and_diff(store, a, b, options=options)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    data = result.to_json()
    corrected = ppi_of_runs(store, (a, b), human) if human is not None else []
    protocols = protocols_of_runs(store, (a, b), protocol, train, options) if protocol else {}
    if fmt == "json":
        import json

        data["diff"] = diff.to_json()
        if protocols:
            data["protocols"] = protocols
        if corrected:
            data["ppi"] = {r.run: r.to_json() for r in corrected}
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        from extraction_eval.views.paired import render_paired

        render_paired(data, console)
        render_run_diff(diff, console)
        if corrected:
            from extraction_eval.views.ppi import render_ppi

            for r in corrected:
                render_ppi(r, console)
        if protocols:
            from extraction_eval.views.protocols import render_paired_protocols, render_protocols

            for side, run in (("a", a), ("b", b)):
                render_protocols(protocols[side], console, title=f"{side.upper()}: {run.name}")
            render_paired_protocols(protocols["paired"], console)
    protocol_failed = False
    if protocol_tolerances:
        from extraction_eval.evaluators.protocols.paired import protocol_gate

        failures = protocol_gate(protocols["paired"], protocol_tolerances)
        protocol_failed = bool(failures)
        gated = ", ".join(sorted(protocol_tolerances))
        line = "FAIL " + "; ".join(failures) if failures else f"pass ({gated})"
        style = "red" if failures else "green"
        err_console.print(f"[{style}]protocol gate: {line}[/]", highlight=False, soft_wrap=True)
    report_gate(result.gate_line(), bool(result.gate))
    if protocol_failed:
        raise typer.Exit(1)


def check_protocol_options(names: list[str] | None, train: Path | None) -> None:
    """``--protocol`` names and ``--train`` (docred only, readable), before any work."""
    if names:
        from extraction_eval.evaluators.protocols import check_protocols

        try:
            check_protocols(names)
        except ValueError as exc:
            fail(f"--protocol: {exc}")
    if train is not None:
        if "docred" not in (names or []):
            fail("--train is used by --protocol docred (Ign F1); give both")
        check_readable("--train", train)


def protocols_of_run(store: Any, run: Any, names: list[str], train: Path | None) -> Any:
    """One stored run's protocols (``evaluators.protocols.Protocols``); warnings on stderr."""
    from extraction_eval.analysis.protocols_run import run_protocols

    found = run_protocols(store, run, names, train=train)
    for warning in found.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    return found


def protocols_of_runs(
    store: Any, runs: Sequence[Any], names: list[str], train: Path | None, options: Any
) -> dict[str, Any]:
    """Each run's protocol blocks by side (``a``, ``b``) and, under ``paired``, B against A
    on the items both have (Δ with its paired bootstrap CI, as for the other metrics)."""
    from extraction_eval.evaluators.protocols.paired import align_rows, paired_protocols

    a, b = (protocols_of_run(store, run, names, train) for run in runs)
    rows_a, rows_b = align_rows(a.ids, a.rows, b.ids, b.rows)
    paired = paired_protocols(
        rows_a,
        rows_b,
        resamples=options.resamples,
        seed=options.seed,
        method=options.ci or "expanded",
    )
    return {"a": a.blocks, "b": b.blocks, "paired": paired}


def split_protocol_tolerances(specs: list[str]) -> tuple[list[str], dict[str, float]]:
    """``--fail-on-regression`` specs: (the others, protocol metric -> tolerance)."""
    from extraction_eval.evaluators.protocols.paired import is_protocol_metric

    others: list[str] = []
    found: dict[str, float] = {}
    for spec in specs:
        name, _, raw = spec.partition("=")
        if not is_protocol_metric(name.strip()):
            others.append(spec)
            continue
        try:
            value = float(raw)
        except ValueError:
            fail(f"--fail-on-regression {name.strip()}: tolerance must be a number, got {raw!r}")
        if not 0 <= value <= 1:
            fail(f"--fail-on-regression {name.strip()}: tolerance must be between 0 and 1")
        found[name.strip()] = value
    return others, found


def ppi_of_runs(store: Any, runs: Sequence[Any], human: Path) -> list[Any]:
    """Each run's PPI-corrected P/R/F1 with the verified items of ``human``."""
    from extraction_eval.analysis.ppi import read_human_gold, run_ppi

    verified, warnings = read_human_gold(human)
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    out = [run_ppi(store, run, verified) for run in runs]
    for r in out:
        for warning in r.warnings:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    return out


def report_gate(line: str | None, failed: bool) -> None:
    """The regression gate's one line (stderr, so ``--format json`` stays pure) and exit 1
    when it failed."""
    if line is None:
        return
    style = "red" if failed else "green"
    err_console.print(f"[{style}]{line}[/]", highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)
