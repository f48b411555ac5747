"""Judged figures of a stored run (``run-experiment --judge``): its items re-scored exactly as
the run scored them (its scoring config, its gold view), then judged like ``score --judge``.
The run's record and its string figures are left as they are; the judged block is kept
beside them (``run_judged``). People's verdicts on judged pairs (the dataset's ``same`` /
``not_same`` gold overrides) win over the judge's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

import numpy as np
from numpy.typing import NDArray

from extraction_eval.analysis.judged import KINDS, JudgedItem, judge_items, judged_report
from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.evaluators import score_dataset_item
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.evaluators.item import ItemScore
from extraction_eval.evaluators.metrics import f1, precision, recall
from extraction_eval.evaluators.protocols.paired import paired_protocols
from extraction_eval.evaluators.stats.intervals import CiMethod
from extraction_eval.judge.base import Judge
from extraction_eval.judge.overrides import OverruledJudge, from_gold_overrides
from extraction_eval.types import Extraction, Score


def judge_run(
    store: LocalStore,
    run: RunRecord,
    judge: Judge,
    calibration: dict[str, Any] | None,
    *,
    keep: bool = True,
) -> dict[str, Any]:
    """The ``judged`` block of ``run`` (as ``score``'s report has it), plus ``items``; with
    ``keep``, stored with the run (``runs show`` shows it), each item's judged matches too."""
    return judge_run_items(store, run, judge, calibration, keep=keep)[0]


def judge_run_items(
    store: LocalStore,
    run: RunRecord,
    judge: Judge,
    calibration: dict[str, Any] | None,
    *,
    keep: bool = True,
) -> tuple[dict[str, Any], list[JudgedItem]]:
    """``judge_run``'s block and each item's judged counts (``compare`` pairs them; LangFuse
    mode posts them per item)."""
    gold = run_gold(store, run)
    config = run_scoring(run)
    people = from_gold_overrides(store.gold_overrides(run.dataset))
    if people:  # ``gold override --same/--not-same``: these pairs never reach the judge
        judge = OverruledJudge(judge, people)
    work: list[tuple[ItemScore, str, Extraction, Extraction | None]] = []
    for item_id, output, error, _ in store.iter_outputs(run.id):
        item = gold.get(item_id)
        if item is None:  # an item no longer in the dataset version: not the run's to judge
            continue
        pred = (
            None if error is not None or output is None else Extraction.model_validate_json(output)
        )
        score = score_dataset_item(item, pred, config)
        work.append((score, item.text, scored_gold(item), pred))
    judged = judge_items(judge, work, config)
    report = {**judged_report(judge, judged, calibration), "items": len(judged)}
    if keep:
        matches = {j.item_id: [m.to_json() for m in j.matches] for j in judged if j.matches}
        store.put_run_judged(run.id, judge.identity, report, matches)
    return report, judged


def judge_runs(
    store: LocalStore,
    runs: Sequence[RunRecord],
    judges: Sequence[Judge],
    *,
    budget_usd: float | None = None,
) -> list[tuple[dict[str, Any], list[JudgedItem]]]:
    """Each run judged by its judge (verdicts cached in ``store``; the latest calibration of
    the judge's identity backs its block), in order, sharing ``budget_usd``: each judge may
    spend what the ones before it left (``--max-cost``: past it, the remaining pairs are
    budget-refused judge errors, never matches; what was judged is kept)."""
    out: list[tuple[dict[str, Any], list[JudgedItem]]] = []
    left = budget_usd
    for run, judge in zip(runs, judges, strict=True):
        if hasattr(judge, "cache"):
            judge.cache = store.cache()
        if left is not None and hasattr(judge, "max_cost_usd"):
            judge.max_cost_usd = left
        calibration = store.latest_judge_calibration(judge.identity)
        out.append(judge_run_items(store, run, judge, calibration))
        if left is not None:
            left = max(0.0, left - float(out[-1][0]["stats"]["cost_usd"]))
    return out


def judged_of_runs(
    store: LocalStore,
    runs: Sequence[RunRecord],
    judges: Sequence[Judge],
    items: list[list[JudgedItem]] | None = None,
    max_cost: float | None = None,
) -> dict[str, Any]:
    """Each run's judged block (``judge_runs``), by run name; none without a judge.
    ``items`` (when given) gets each run's per-item judged counts, in ``runs``' order, for
    the paired judged Δ (``compare``); ``max_cost``: the judges' shared ceiling."""
    if not judges:
        return {}
    out: dict[str, Any] = {}
    for run, (report, judged) in zip(
        runs, judge_runs(store, runs, judges, budget_usd=max_cost), strict=True
    ):
        out[run.name] = report
        if items is not None:
            items.append(judged)
    return out


def paired_judged(
    a: Sequence[JudgedItem],
    b: Sequence[JudgedItem],
    *,
    resamples: int,
    seed: int,
    method: CiMethod = "expanded",
) -> dict[str, dict[str, Any]]:
    """B against A on judged P/R/F1, on the items both have: per ``<kind>.<precision|recall|
    f1>`` both runs' judged figure, Δ = B − A and its paired bootstrap CI over items (the
    same resampling as ``compare``'s string Δ and its protocols: both runs' count rows of an
    item drawn together)."""
    by_b = {j.item_id: j for j in b}
    both = [(x, by_b[x.item_id]) for x in a if x.item_id in by_b]

    def rows(side: int) -> dict[str, NDArray[np.int64]]:
        return {
            kind: np.array(
                [
                    [p[side].counts[kind].tp, p[side].counts[kind].fp, p[side].counts[kind].fn]
                    for p in both
                ],
                dtype=np.int64,
            ).reshape(-1, 3)
            for kind in KINDS
        }

    return paired_protocols(rows(0), rows(1), resamples=resamples, seed=seed, method=method)


JUDGED_SCORES = (
    ("entities", "entity"),
    ("entities_typed", "entity_typed"),
    ("relationships", "relationship"),
)


def judged_scores(report: dict[str, Any]) -> list[Score]:
    """The judged block as run-level scores named like the string ones plus ``_judged``
    (``entity_f1_judged``, ...), each commented with the judge and what backs it, and
    ``judged_matches``: how many pairs the judge matched, what judging cost and what backs it."""
    comment = f"{report.get('judge')}; {report.get('backing')}"
    out = []
    for block, prefix in JUDGED_SCORES:
        for metric in ("precision", "recall", "f1"):
            value = (report.get(block) or {}).get(metric)
            if isinstance(value, (int, float)):
                out.append(Score(name=f"{prefix}_{metric}_judged", value=value, comment=comment))
    matches = report.get("matches") or {}
    if matches:
        out.append(
            Score(name="judged_matches", value=float(_matched(matches)), comment=_summary(report))
        )
    return out


def _matched(matches: dict[str, Any]) -> int:
    """Judged matches of entities and relationships (the typed entity view re-counts the
    same entities, so it is in the comment only)."""
    return int(matches.get("entities", 0)) + int(matches.get("relationships", 0))


def _summary(report: dict[str, Any]) -> str:
    """One line: the judge, its matches, what judging cost, what backs it."""
    m = report.get("matches") or {}
    stats = report.get("stats") or {}
    candidates = (report.get("candidates") or {}).get("pairs", 0)
    return (
        f"{report.get('judge')}: judged matches entities={m.get('entities', 0)}"
        f" entities_typed={m.get('entities_typed', 0)}"
        f" relationships={m.get('relationships', 0)}; candidate pairs={candidates};"
        f" judge calls={stats.get('calls', 0)} cache hits={stats.get('cache_hits', 0)}"
        f" errors={stats.get('errors', 0)} cost=${float(stats.get('cost_usd') or 0.0):.4f};"
        f" {report.get('backing')}"
    )


# item-level judged scores: the item's string scores that have a judged twin, plus _judged
ITEM_JUDGED = (
    ("entities", "entity", ("precision", "recall", "f1")),
    ("entities_typed", "entity_typed", ("f1",)),
    ("relationships", "relationship", ("precision", "recall", "f1")),
)
_METRICS = {"precision": precision, "recall": recall, "f1": f1}


def item_judged_scores(item: JudgedItem, judge: str) -> list[Score]:
    """One item's judged figures, named like its string scores plus ``_judged``
    (``entity_f1_judged``, ...) and computed as they are (a failed item scores 0); each
    commented with its judged counts, its judged matches and the judge."""
    note = "; errored: no output, scored 0" if item.failed else ""
    out = []
    for kind, prefix, metrics in ITEM_JUDGED:
        c = item.counts[kind]
        matched = sum(1 for m in item.matches if m.kind == kind)
        comment = f"tp={c.tp} fp={c.fp} fn={c.fn}; judged matches={matched}{note}; {judge}"
        for metric in metrics:
            value = _METRICS[metric](c, failed=item.failed)
            out.append(Score(name=f"{prefix}_{metric}_judged", value=value, comment=comment))
    return out


def run_traces(store: LocalStore, run_id: int) -> dict[str, str]:
    """Item id -> its LangFuse trace id, for the run's items that have one."""
    return {r.item_id: r.trace_id for r in store.iter_results(run_id) if r.trace_id}


def post_judged_scores(
    run: RunRecord,
    report: dict[str, Any],
    items: Sequence[JudgedItem] = (),
    traces: Mapping[str, str] | None = None,
    observations: Mapping[str, str] | None = None,
) -> str | None:
    """A LangFuse-mode run's judged figures: ``*_judged`` run-level scores and
    ``judged_matches`` on its experiment, and each of ``items``' judged figures on its trace
    (``traces``: item id -> trace id), on the task observation its string scores are on when
    ``observations`` (trace id -> observation id) knows it. Score ids are deterministic, so
    judging again replaces them. Returns a one-line problem when scores could not be posted
    (the judged figures stay in the local store), else None; a local run posts nothing."""
    if run.backend != "langfuse" or not run.experiment_id:
        return None
    from extraction_eval.backends.langfuse import (
        close_client,
        connect,
        item_score_id,
        post_score,
        run_score_id,
    )
    from extraction_eval.errors import ExtractionEvalError, one_line

    traces = traces or {}
    observations = observations or {}
    try:
        lf = connect(check=False)
    except ExtractionEvalError as exc:
        return f"judged scores not posted to LangFuse: {one_line(exc)}"
    untraced = 0
    try:
        for score in judged_scores(report):
            post_score(
                lf,
                score,
                dataset_run_id=run.experiment_id,
                score_id=run_score_id(run.experiment_id, score.name),
            )
        judge = str(report.get("judge"))
        for item in items:
            trace_id = traces.get(item.item_id)
            if trace_id is None:
                untraced += 1
                continue
            for score in item_judged_scores(item, judge):
                post_score(
                    lf,
                    score,
                    trace_id=trace_id,
                    observation_id=observations.get(trace_id),
                    score_id=item_score_id(trace_id, score),
                )
        close_client(lf)
    except Exception as exc:  # the SDK's own errors too: a warning, never a failed run
        with suppress(Exception):  # the scores queued before the failure are delivered too
            close_client(lf)
        return f"judged scores not posted to LangFuse: {one_line(exc, with_type=True)}"
    if untraced:
        return f"{untraced:,} items have no LangFuse trace: their judged scores were not posted"
    return None
