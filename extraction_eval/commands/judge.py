"""``judge pairs|calibrate``: labelled pairs from gold, and a judge measured against them.

Library modules are imported inside each command, so ``--help`` loads none of them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    check_readable,
    check_writable,
    console,
    err_console,
    handle_errors,
)
from extraction_eval.errors import UsageError

judge_app = typer.Typer(
    no_args_is_help=True,
    help="The semantic judge: labelled pairs from gold, and its measured agreement (kappa).",
)


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, allow_nan=False)


def _write_lines(option: str, path: Path, rows: list[dict[str, Any]]) -> None:
    from extraction_eval.atomic import WriteFailed, write_text_atomic

    try:
        write_text_atomic(path, "".join(_dump(r) + "\n" for r in rows))
    except WriteFailed as exc:
        raise UsageError(f"{option} {exc}") from None


def _warn(lines: list[str]) -> None:
    for line in lines:
        err_console.print(f"warning: {line}", highlight=False, soft_wrap=True, markup=False)


def _warn_plain(lines: list[str]) -> None:
    for line in lines:
        err_console.print(line, highlight=False, soft_wrap=True, markup=False)


@judge_app.command("pairs")
@handle_errors
def pairs_cmd(
    gold: Annotated[Path, typer.Option("--gold", help="Gold JSONL whose entities list mentions.")],
    out: Annotated[Path, typer.Option("--out", help="Write the labelled pairs (JSONL) here.")],
    per_entity: Annotated[
        int, typer.Option("--per-entity", help="Positive pairs per entity, at most.")
    ] = 3,
) -> None:
    """Labelled pairs from gold with mention clusters: two surface forms of one entity
    (same), and same-type entities of one document, most similar first (not the same)."""
    from extraction_eval.datasets.jsonl import read_gold
    from extraction_eval.judge.pairs import build_pairs

    check_readable("--gold", gold)
    check_writable("--out", out)
    if per_entity < 1:
        raise UsageError(f"--per-entity must be at least 1, got {per_entity}")
    records, warnings = read_gold(gold)
    _warn(warnings)
    rows = build_pairs(records, per_entity)
    if not any(r["same"] for r in rows):
        raise UsageError(
            f"--gold {gold}: no entity has two different surface forms (mentions or aliases);"
            " no positive pair can be built"
        )
    _write_lines("--out", out, rows)
    same = sum(1 for r in rows if r["same"])
    console.print(
        f"{len(rows):,} pairs ({same:,} same, {len(rows) - same:,} not) from"
        f" {len(records):,} documents -> {out}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


@judge_app.command("calibrate")
@handle_errors
def calibrate_cmd(
    judge: Annotated[str, typer.Option("--judge", help="The judge: offline:rules, openai:…")],
    pairs: Annotated[Path, typer.Option("--pairs", help="Labelled pairs (JSONL).")],
    per_pair: Annotated[
        Path | None,
        typer.Option("--per-pair", help="Write each pair with its verdict and reason here."),
    ] = None,
    judge_base_url: o.JudgeBaseUrl = None,
    judge_prompt_label: o.JudgePromptLabel = None,
    output_format: Annotated[
        str, typer.Option("--format", help="table (for people) | json.")
    ] = "table",
    resamples: Annotated[
        int, typer.Option("--resamples", help="Bootstrap resamples for kappa's interval.")
    ] = 2_000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 42,
    no_store: Annotated[
        bool, typer.Option("--no-store", help="Do not keep the calibration in the local store.")
    ] = False,
) -> None:
    """Measure a judge against labelled pairs: tp, fp, fn, tn, precision, recall, accuracy
    and Cohen's kappa with a bootstrap interval; stored with the judge's identity, so judged
    figures say which calibration backs them.

    Exit 0 on success; 2 on unusable input, with one line on stderr.
    """
    from extraction_eval.backends.langfuse import langfuse_configured
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.datasets.pairs import read_pairs
    from extraction_eval.judge.calibrate import calibrate
    from extraction_eval.judge.factory import make_judge
    from extraction_eval.judge.prompt import judge_prompt_label as judge_prompt_label_of
    from extraction_eval.limits import MAX_RESAMPLES

    if output_format not in ("table", "json"):
        raise UsageError(f"--format must be one of table, json, got {output_format!r}")
    if not 0 <= resamples <= MAX_RESAMPLES:
        raise UsageError(f"--resamples must be from 0 to {MAX_RESAMPLES:,}, got {resamples:,}")
    label = judge_prompt_label_of(judge_prompt_label)  # refused before any work
    check_readable("--pairs", pairs)
    if per_pair is not None:
        check_writable("--per-pair", per_pair)
    labelled, warnings = read_pairs(pairs)
    _warn(warnings)
    if not labelled:
        raise UsageError(f"--pairs {pairs}: no usable labelled pair")
    with LocalStore(seed=False) as store:
        the_judge = make_judge(judge, base_url=judge_base_url, cache=store.cache())
        if langfuse_configured():  # the judge prompt LangFuse mode runs with
            from extraction_eval.judge.managed import use_langfuse_prompt

            _warn_plain(use_langfuse_prompt(the_judge, label))
        result, rows = calibrate(
            the_judge, labelled, resamples=resamples, seed=seed, source=pairs.name
        )
        if per_pair is not None:
            _write_lines("--per-pair", per_pair, rows)
        report = result.to_json()
        report["judge_stats"] = the_judge.stats.to_json()
        if not no_store:
            store.add_judge_calibration(result.judge, result.to_json())
    _warn([f"judge: {line}" for line in the_judge.stats.error_examples])
    if output_format == "json":
        sys.stdout.write(_dump(report) + "\n")
        sys.stdout.flush()
        return
    from extraction_eval.views.judge import render_calibration

    render_calibration(report, console)
