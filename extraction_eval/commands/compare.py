"""``compare``: run B against run A (paired figures, the item diff, the gate).

The store, the analysis code and the views are imported inside the command, so ``--help``
loads none of them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
    check_protocol_options,
    console,
    err_console,
    fail,
    handle_errors,
    judges_for,
    output_format,
    ppi_of_runs,
    protocols_of_run,
    warn_line,
)

if TYPE_CHECKING:  # annotations only: --help loads no analysis
    from extraction_eval.analysis.compare.extras import CompareExtras

DatasetOpt = o.RunDataset


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
    judge_prompt_label: o.JudgePromptLabel = None,
    max_cost: o.JudgeMaxCost = None,
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
    from extraction_eval.views.compare import render_compare
    from extraction_eval.views.diff import render_item_comparison

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
    judges = judges_for(judge, judge_base_url, max_cost=max_cost, prompt_label=judge_prompt_label)
    store = LocalStore()
    a, b = (get_or_pull(store, name, dataset, warn=warn_line) for name in (run_a, run_b))
    if alias_fields:  # both re-scored with these names of one entity (in memory only)
        what = "--no-aliases" if no_aliases else f"--aliases {aliases}"
        a, b = _rescored(a, b, alias_fields, what)
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
    extras = _extras(store, (a, b), human, (judges, max_cost), protocol, train, options, data)
    if fmt == "json":
        data["diff"] = diff.to_json()
        data.update(extras.json_blocks())
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        console.print(_scored_line(result, a, b, as_recorded), highlight=False)
        render_compare(data, diff, (a, b), extras, console, alias_lines=not alias_fields)
    protocol_failed = _after_tables(extras, protocol_tolerances, max_cost)
    report_gate(result.gate_line(), bool(result.gate))
    if protocol_failed:
        raise typer.Exit(1)


def _after_tables(
    extras: CompareExtras, protocol_tolerances: dict[str, float], max_cost: float | None
) -> bool:
    """After the figures: the judge's ``stopped: budget`` line when ``--max-cost`` left pairs
    unjudged, then the protocol gate's line; whether that gate failed."""
    from extraction_eval.commands.common import judge_budget_line

    judge_budget_line(list(extras.judged.values()), max_cost)
    return protocol_gate_failed(extras.protocols, protocol_tolerances)


def _scored_line(result: Any, a: Any, b: Any, as_recorded: bool) -> str:
    """The first line: which scoring settings both runs were scored with; where the two were
    recorded with different ones, it points to ``--as-recorded``."""
    from extraction_eval.analysis.stored import run_scoring

    line: str = result.scored_with()
    if not as_recorded and run_scoring(a).count_fields() != run_scoring(b).count_fields():
        line += " (--as-recorded: each with its own)"
    return line


def _extras(
    store: Any,
    runs: Sequence[Any],
    human: Path | None,
    judging: tuple[list[Any], float | None],
    protocol: list[str] | None,
    train: Path | None,
    options: Any,
    data: dict[str, Any],
) -> CompareExtras:
    """The blocks asked for beside the paired figures (``analysis.compare.extras``): PPI
    with ``--human``, judged figures and their paired Δ with ``--judge`` (``judging``: the
    judges and their ``--max-cost``), protocols."""
    from extraction_eval.analysis.compare.extras import CompareExtras
    from extraction_eval.analysis.judged_runs import judged_of_runs

    corrected = ppi_of_runs(store, runs, human) if human is not None else []
    judged_items: list[Any] = []
    judged = judged_of_runs(store, runs, judging[0], judged_items, judging[1])
    judged_paired = None
    if judged:  # B against A on judged figures: the string Δ's paired bootstrap
        from extraction_eval.analysis.judged_runs import paired_judged

        judged_paired = paired_judged(
            *judged_items,
            resamples=options.resamples,
            seed=options.seed,
            method=data["bootstrap"]["ci_method"],
        )
    protocols = protocols_of_runs(store, runs, protocol, train, options) if protocol else {}
    return CompareExtras(corrected, judged, judged_paired, protocols)


def _rescored(a: Any, b: Any, alias_fields: dict[str, Any], what: str) -> tuple[Any, Any]:
    """Both runs re-scored (in memory) with the given names of one entity, and a note."""
    from extraction_eval.analysis.stored import rescored_with

    a, b = rescored_with(a, **alias_fields), rescored_with(b, **alias_fields)
    err_console.print(
        f"note: both runs re-scored with {escape(what)}", highlight=False, soft_wrap=True
    )
    return a, b


def protocol_gate_failed(protocols: dict[str, Any], tolerances: dict[str, float]) -> bool:
    """The protocol metrics' gate (none without tolerances): its one line on stderr; whether
    it failed."""
    if not tolerances:
        return False
    from extraction_eval.evaluators.protocols.paired import protocol_gate

    failures = protocol_gate(protocols["paired"], tolerances)
    gated = ", ".join(sorted(tolerances))
    line = "FAIL " + "; ".join(failures) if failures else f"pass ({gated})"
    style = "red" if failures else "green"
    err_console.print(f"[{style}]protocol gate: {line}[/]", highlight=False, soft_wrap=True)
    return bool(failures)


def protocols_of_runs(
    store: Any, runs: Sequence[Any], names: list[str], train: Path | None, options: Any
) -> dict[str, Any]:
    """Each run's protocol blocks by side (``a``, ``b``) and, under ``paired``, B against A
    on the items both have (Δ with its paired bootstrap CI, as for the other metrics)."""
    from extraction_eval.analysis.protocols_run import paired_run_protocols

    a, b = (protocols_of_run(store, run, names, train) for run in runs)
    paired = paired_run_protocols(
        a, b, resamples=options.resamples, seed=options.seed, method=options.ci or "expanded"
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


def report_gate(line: str | None, failed: bool) -> None:
    """The regression gate's one line (stderr, so ``--format json`` stays pure) and exit 1
    when it failed."""
    if line is None:
        return
    style = "red" if failed else "green"
    err_console.print(f"[{style}]{line}[/]", highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)
