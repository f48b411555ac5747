"""``compare``: run B against run A (paired figures, the item diff, the gate), and what the
run command borrows from it (PPI, protocols, judged figures of stored runs).

The store, the analysis code and the views are imported inside the command, so ``--help``
loads none of them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    CorrectionOpt,
    FormatOpt,
    HumanOpt,
    MinItemsOpt,
    PpiOpt,
    alias_settings,
    check_ppi,
    check_readable,
    console,
    err_console,
    fail,
    handle_errors,
    output_format,
    warn_line,
)

DatasetOpt = Annotated[str | None, typer.Option(help="Dataset, when run names repeat.")]


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
    fmt: FormatOpt = "table",
    fail_on_regression: o.FailOnRegression = None,
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
    aliases: o.Aliases = None,
    no_aliases: o.NoAliases = False,
    judge: o.JudgeModel = None,
    judge_base_url: o.JudgeBaseUrl = None,
    protocol: o.Protocol = None,
    train: o.Train = None,
    as_recorded: Annotated[
        bool,
        typer.Option(
            "--as-recorded",
            help="Score each run with its own recorded settings (to compare scoring choices,"
            " e.g. --match); default: both with A's, so only the outputs differ.",
        ),
    ] = False,
) -> None:
    """B against A on the items both have: Δ with a paired bootstrap CI and a verdict per
    metric, McNemar's test, F1 per type; the items with the most broken objects; optionally a
    gate. The first line names the scoring settings both runs were scored with (A's, or each
    its own with --as-recorded). With --item: one item's text with gold, A and B objects side
    by side."""
    from extraction_eval.analysis.compare.run_diff import compare_item
    from extraction_eval.analysis.compare.runs import (
        CompareOptions,
        compare_and_diff,
        parse_tolerances,
    )
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.langfuse_pull import get_or_pull
    from extraction_eval.validation import check_int
    from extraction_eval.views.diff import render_item_comparison, render_run_diff

    # every option is checked before the store is opened
    check_int("top", top, minimum=0)
    check_int("resamples", resamples, minimum=1)
    check_int("seed", seed, minimum=0)
    fmt = output_format(fmt)
    others, protocol_tolerances = split_protocol_tolerances(fail_on_regression or [])
    tolerances = parse_tolerances(others)
    check_ppi(ppi, human)
    check_protocol_options(protocol, train)
    if protocol_tolerances and not protocol:
        fail("--fail-on-regression on a protocol metric needs --protocol (e.g. semeval)")
    alias_fields = alias_settings(aliases, no_aliases, err_console)
    judges = judges_for(judge, judge_base_url)  # refused before the store is opened
    store = LocalStore()
    a, b = (
        get_or_pull(store, run_a, dataset, warn=warn_line),
        get_or_pull(store, run_b, dataset, warn=warn_line),
    )
    if alias_fields:  # both re-scored with these names of one entity (in memory only)
        from extraction_eval.analysis.stored import rescored_with

        a, b = rescored_with(a, **alias_fields), rescored_with(b, **alias_fields)
        what = "--no-aliases" if no_aliases else f"--aliases {aliases}"
        err_console.print(
            f"note: both runs re-scored with {escape(what)}", highlight=False, soft_wrap=True
        )
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
        as_recorded=as_recorded,
    )
    result, diff = compare_and_diff(a, b, store=store, options=options)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    data = result.to_json()
    corrected = ppi_of_runs(store, (a, b), human) if human is not None else []
    judged = judged_of_runs(store, (a, b), judges)
    protocols = protocols_of_runs(store, (a, b), protocol, train, options) if protocol else {}
    if fmt == "json":
        import json

        data["diff"] = diff.to_json()
        if protocols:
            data["protocols"] = protocols
        if corrected:
            data["ppi"] = {r.run: r.to_json() for r in corrected}
        if judged:
            data["judged"] = judged
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        from extraction_eval.views.paired import render_alias_lines, render_paired

        line = result.scored_with()
        if not as_recorded and scored_differently(a, b):
            line += " (--as-recorded: each with its own)"
        console.print(line, highlight=False)
        render_paired(data, console)
        if not alias_fields:
            render_alias_lines((a, b), console)
        render_run_diff(diff, console)
        if corrected:
            from extraction_eval.views.ppi import render_ppi

            for r in corrected:
                render_ppi(r, console)
        if judged:
            from extraction_eval.views.judge import render_judged

            for name, block in judged.items():
                render_judged(block, console, run=name)
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


def scored_differently(a: Any, b: Any) -> bool:
    """Whether two stored runs were scored with different settings (then the first line
    points to --as-recorded)."""
    from extraction_eval.analysis.stored import run_scoring

    return run_scoring(a).count_fields() != run_scoring(b).count_fields()


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


def judges_for(model: str | None, base_url: str | None, runs: int = 2) -> list[Any]:
    """``--judge``: one judge per run (each closes its client when done), built, and
    refused, before anything is read."""
    from extraction_eval.errors import UsageError

    if model is None:
        if base_url is not None:
            raise UsageError("--judge-base-url needs --judge MODEL")
        return []
    from extraction_eval.judge.factory import make_judge

    return [make_judge(model, base_url=base_url) for _ in range(runs)]


def judged_of_runs(store: Any, runs: Sequence[Any], judges: list[Any]) -> dict[str, Any]:
    """Each run's judged block (``analysis.judged_runs``), by run name; none without a judge.
    Not paired: each run's judged figures stand beside its own string figures."""
    if not judges:
        return {}
    from extraction_eval.analysis.judged_runs import judge_run

    out: dict[str, Any] = {}
    for run, judge in zip(runs, judges, strict=True):
        if hasattr(judge, "cache"):
            judge.cache = store.cache()
        calibration = store.latest_judge_calibration(judge.identity)
        out[run.name] = judge_run(store, run, judge, calibration)
    return out


def ppi_of_runs(store: Any, runs: Sequence[Any], human: Path) -> list[Any]:
    """Each run's PPI-corrected P/R/F1 with the verified items of ``human``."""
    from extraction_eval.analysis.compare.ppi import read_human_gold, run_ppi

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
