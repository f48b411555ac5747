"""Judged figures of a stored run (``run-experiment --judge``): its items re-scored exactly as
the run scored them (its scoring config, its gold view), then judged like ``score --judge``.
The run's record and its string figures are left as they are; the judged block is kept
beside them (``run_judged``). People's verdicts on judged pairs (the dataset's ``same`` /
``not_same`` gold overrides) win over the judge's."""

from __future__ import annotations

from typing import Any

from extraction_eval.analysis.judged import judge_items, judged_report
from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.evaluators import score_dataset_item
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.evaluators.item import ItemScore
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
    return report


JUDGED_SCORES = (
    ("entities", "entity"),
    ("entities_typed", "entity_typed"),
    ("relationships", "relationship"),
)


def judged_scores(report: dict[str, Any]) -> list[Score]:
    """The judged block as run-level scores named like the string ones plus ``_judged``
    (``entity_f1_judged``, ...), each commented with the judge and what backs it."""
    comment = f"{report.get('judge')}; {report.get('backing')}"
    out = []
    for block, prefix in JUDGED_SCORES:
        for metric in ("precision", "recall", "f1"):
            value = (report.get(block) or {}).get(metric)
            if isinstance(value, (int, float)):
                out.append(Score(name=f"{prefix}_{metric}_judged", value=value, comment=comment))
    return out


def post_judged_scores(run: RunRecord, report: dict[str, Any]) -> str | None:
    """A LangFuse-mode run's judged figures as ``*_judged`` run-level scores on its
    experiment (deterministic ids: judging again replaces them). Returns a one-line problem
    when they could not be posted (the judged figures stay in the local store), else None;
    a local run posts nothing."""
    if run.backend != "langfuse" or not run.experiment_id:
        return None
    from extraction_eval.backends.langfuse import close_client, connect, post_score, run_score_id
    from extraction_eval.errors import ExtractionEvalError, one_line

    try:
        lf = connect(check=False)
    except ExtractionEvalError as exc:
        return f"judged scores not posted to LangFuse: {one_line(exc)}"
    try:
        for score in judged_scores(report):
            post_score(
                lf,
                score,
                dataset_run_id=run.experiment_id,
                score_id=run_score_id(run.experiment_id, score.name),
            )
        close_client(lf)
    except Exception as exc:  # the SDK's own errors too: a warning, never a failed run
        return f"judged scores not posted to LangFuse: {one_line(exc, with_type=True)}"
    return None
