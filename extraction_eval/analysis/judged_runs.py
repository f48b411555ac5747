"""Judged figures of a stored run (``run-experiment --judge``): its items re-scored exactly as
the run scored them (its scoring config, its gold view), then judged like ``score --judge``.
The run's record and its string figures are left as they are; the judged block is kept
beside them (``run_judged``)."""

from __future__ import annotations

from typing import Any

from extraction_eval.analysis.judged import judge_items, judged_report
from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.evaluators import score_dataset_item
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.evaluators.item import ItemScore
from extraction_eval.judge.base import Judge
from extraction_eval.types import Extraction


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
