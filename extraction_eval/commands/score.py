"""``extraction-eval score``: parse options, call ``score_files``, render or write JSON.

The scorers and the report view are imported when the command runs, so ``--help`` loads
neither (nor numpy, scipy or rapidfuzz).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.console import Console
from rich.markup import escape

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    alias_settings,
    check_readable,
    check_writable,
    err_console,
    error_line,
    handle_errors,
)
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.limits import DEFAULT_MAX_OBJECTS
from extraction_eval.views.console import SafeConsole

if TYPE_CHECKING:
    from extraction_eval.evaluators.config import EvidenceMode, MatchMode


def _dump(obj: Any, *, indent: int | None = 2) -> str:
    """Byte-stable JSON: sorted keys, no NaN, UTF-8 kept readable."""
    return json.dumps(obj, sort_keys=True, indent=indent, ensure_ascii=False, allow_nan=False)


def _write(option: str, path: Path, text: str) -> None:
    from extraction_eval.atomic import WriteFailed, write_text_atomic

    try:
        write_text_atomic(path, text)  # whole or not at all: never a truncated report
    except WriteFailed as exc:
        raise UsageError(f"{option} {exc}") from None


def _choice(option: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise UsageError(f"{option} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _run(
    gold: Path | None,
    predictions: Path | None,
    match: str,
    threshold: float,
    span_threshold: float,
    evidence: str,
    output_format: str,
    out: Path | None,
    per_item: Path | None,
    resamples: int,
    seed: int,
    err: Console,
    min_gold_confidence: float | None = None,
    schema: Path | None = None,
    max_objects: int = DEFAULT_MAX_OBJECTS,
    ci: str = "expanded",
    aliases: dict[str, Any] | None = None,
    judge: str | None = None,
    judge_base_url: str | None = None,
    judge_overrides: Path | None = None,
    protocols: list[str] | None = None,
    train: Path | None = None,
    judging: tuple[float | None, str | None] = (None, None),
) -> None:
    from extraction_eval.analysis.score_files import score_files
    from extraction_eval.datasets.bundled import example_paths
    from extraction_eval.datasets.schema import read_schema
    from extraction_eval.evaluators.config import ScoringConfig

    _check_options(output_format, resamples, min_gold_confidence)
    # the scoring options are checked by ScoringConfig (its field named as the flag), before
    # any file is looked at
    config = ScoringConfig(
        match=cast("MatchMode", match),
        threshold=threshold,
        span_threshold=span_threshold,
        evidence=cast("EvidenceMode", evidence),
        resamples=resamples,
        seed=seed,
        max_objects=max_objects,
        ci=ci,  # type: ignore[arg-type]  # checked by ScoringConfig
        **(aliases or {}),
    )
    _check_files(gold, predictions, out, per_item)
    if gold is None or predictions is None:
        gold, predictions = example_paths()
        err.print(f"scoring the bundled example: {gold.parent}", highlight=False, soft_wrap=True)
    if schema is not None:
        check_readable("--schema", schema)
    _check_protocols(protocols, train)
    opened: list[Any] = []  # the store the judge's cache lives in, closed after scoring
    try:
        judged = _judge_setup(judge, judge_base_url, judge_overrides, err, opened, judging)
        scored = score_files(
            gold,
            predictions,
            config,
            min_gold_confidence=min_gold_confidence,
            schema=None if schema is None else read_schema(schema),
            protocols=protocols or (),
            train=train,
            **judged,
        )
    finally:
        for store in opened:
            store.close()
    report = scored.report
    if out is not None:
        _write("--out", out, _dump(report) + "\n")
    if per_item is not None:
        lines = scored.per_item_lines()
        _write("--per-item", per_item, "".join(_dump(x, indent=None) + "\n" for x in lines))
    _render(report, output_format, err)
    if "judged" in report:  # --max-cost: one line, after the figures, when pairs went unjudged
        from extraction_eval.commands.common import judge_budget_line

        judge_budget_line([report["judged"]], judging[0])


def _render(report: dict[str, Any], output_format: str, err: Console) -> None:
    """The report on stdout: JSON (its warnings on stderr) or the tables."""
    from extraction_eval.views.score_report import label_warning, print_warnings, render_report

    if output_format == "json":
        sys.stdout.write(_dump(report) + "\n")
        sys.stdout.flush()
        labels = label_warning(report)
        print_warnings([*([labels] if labels else []), *report["warnings"]], err)
        if "judged" in report:  # the judge's failures: the report has them, a person too
            stats = report["judged"]["stats"]
            print_warnings([f"judge: {line}" for line in stats["error_examples"]], err)
    else:
        render_report(report, SafeConsole())
        if "judged" in report:
            from extraction_eval.views.judge import render_judged

            render_judged(report["judged"], SafeConsole())


def _check_options(output_format: str, resamples: int, min_gold_confidence: float | None) -> None:
    """What ``ScoringConfig`` does not check (or words otherwise), refused before any file
    is looked at; ``--resamples`` keeps the line score has always printed."""
    _choice("--format", output_format, ("table", "json"))
    if resamples < 0:
        raise UsageError(f"--resamples must be >= 0, got {resamples}")
    if min_gold_confidence is not None and not 0.0 <= min_gold_confidence <= 1.0:
        raise UsageError(
            f"--min-gold-confidence must be between 0 and 1, got {min_gold_confidence}"
        )


def _check_files(
    gold: Path | None, predictions: Path | None, out: Path | None, per_item: Path | None
) -> None:
    """Both inputs or neither (the bundled example), readable; the outputs writable."""
    if (gold is None) != (predictions is None):
        raise UsageError("give both --gold and --predictions, or neither (bundled example)")
    for option, path in (("--gold", gold), ("--predictions", predictions)):
        if path is not None:
            check_readable(option, path)
    for option, path in (("--out", out), ("--per-item", per_item)):
        if path is not None:
            check_writable(option, path)


def _check_protocols(protocols: list[str] | None, train: Path | None) -> None:
    """``--protocol`` names and ``--train`` (docred only, readable)."""
    if protocols:
        from extraction_eval.evaluators.protocols import check_protocols

        try:
            check_protocols(protocols)
        except ValueError as exc:
            raise UsageError(f"--protocol: {exc}") from None
    if train is not None:
        if "docred" not in (protocols or []):
            raise UsageError("--train is used by --protocol docred (Ign F1); give both")
        check_readable("--train", train)


def _judge_setup(
    model: str | None,
    base_url: str | None,
    overrides: Path | None,
    err: Console,
    opened: list[Any],
    judging: tuple[float | None, str | None] = (None, None),
) -> dict[str, Any]:
    """``score_files``' judge arguments for ``--judge``: the judge (its verdicts cached in the
    local store; its prompt LangFuse's when keys are set; ``judging``: its ``--max-cost`` and
    ``--judge-prompt-label``; people's verdicts from ``--judge-overrides`` on top) and the
    latest calibration stored for its identity; none without it."""
    from extraction_eval.commands.common import judges_for

    if model is None:
        judges_for(None, base_url, max_cost=judging[0], prompt_label=judging[1])  # refused
        if overrides is not None:
            raise UsageError("--judge-overrides needs --judge MODEL")
        return {}
    from extraction_eval.backends.local import LocalStore

    try:
        (judge,) = judges_for(model, base_url, 1, max_cost=judging[0], prompt_label=judging[1])
    except InvalidValue as exc:
        raise UsageError(error_line(exc)) from None
    store = LocalStore(seed=False)
    opened.append(store)
    if hasattr(judge, "cache"):
        judge.cache = store.cache()
    if judging[0] is not None and hasattr(judge, "max_cost_usd"):
        judge.max_cost_usd = judging[0]
    calibration = store.latest_judge_calibration(judge.identity)
    if overrides is not None:
        from extraction_eval.datasets.pairs import read_pairs
        from extraction_eval.judge.overrides import OverruledJudge

        check_readable("--judge-overrides", overrides)
        people, warnings = read_pairs(overrides)
        for line in warnings:
            err.print(f"warning: {escape(line)}", highlight=False, soft_wrap=True)
        judge = OverruledJudge(judge, people)
    return {"judge": judge, "calibration": calibration}


@handle_errors
def score(
    gold: Annotated[
        Path | None,
        typer.Option("--gold", help="Gold JSONL: id, text, entities, relationships per line."),
    ] = None,
    predictions: Annotated[
        Path | None,
        typer.Option("--predictions", help="Predictions JSONL: id, entities, relationships."),
    ] = None,
    match: o.Match = "fuzzy",
    threshold: o.Threshold = 0.85,
    span_threshold: Annotated[
        float, typer.Option("--span-threshold", help="Span: minimum Jaccard of evidence words.")
    ] = 0.5,
    evidence: Annotated[
        str, typer.Option("--evidence", help="Evidence grounding: strict | relaxed.")
    ] = "relaxed",
    output_format: Annotated[
        str, typer.Option("--format", help="stdout: table (for people) | json (the report).")
    ] = "table",
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON report to FILE.")
    ] = None,
    per_item: Annotated[
        Path | None, typer.Option("--per-item", help="Write one JSON line per item to FILE.")
    ] = None,
    resamples: Annotated[
        int, typer.Option("--resamples", help="Bootstrap resamples for the CIs (0 = none).")
    ] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 42,
    max_objects: o.MaxObjects = DEFAULT_MAX_OBJECTS,
    min_gold_confidence: o.MinGoldConfidence = None,
    schema: Annotated[
        Path | None,
        typer.Option(
            "--schema",
            help="JSON schema file for every gold line (its labels map gold labels).",
        ),
    ] = None,
    ci: o.Ci = "expanded",
    aliases: o.Aliases = None,
    no_aliases: o.NoAliases = False,
    judge: o.JudgeModel = None,
    judge_base_url: o.JudgeBaseUrl = None,
    judge_overrides: o.JudgeOverrides = None,
    judge_prompt_label: o.JudgePromptLabel = None,
    max_cost: o.JudgeMaxCost = None,
    protocol: o.Protocol = None,
    train: o.Train = None,
) -> None:
    """Score predictions against gold: entities, relationships, evidence, failures.

    Without --gold and --predictions, scores the bundled example.

    Exit 0 on success; 2 on unusable input, with one line on stderr.

    Malformed lines are reported as warnings and skipped; the rest is scored.
    """
    alias_fields = alias_settings(aliases, no_aliases, err_console)
    _run(
        gold,
        predictions,
        match,
        threshold,
        span_threshold,
        evidence,
        output_format,
        out,
        per_item,
        resamples,
        seed,
        err_console,
        min_gold_confidence,
        schema,
        max_objects,
        ci,
        alias_fields,
        judge=judge,
        judge_base_url=judge_base_url,
        judge_overrides=judge_overrides,
        protocols=protocol,
        train=train,
        judging=(max_cost, judge_prompt_label),
    )
