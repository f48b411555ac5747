"""A stored run's figures re-scored in memory with other scoring settings (``report --aliases
FILE`` / ``--no-aliases``: :func:`analysis.stored.rescored_with`), beside the figures it was
stored with, never instead of them: the store is not touched, and the report labels them."""

from __future__ import annotations

from typing import Any

from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.evaluators import ContextIndex, score_dataset_item
from extraction_eval.evaluators.report import ReportAccumulator

__all__ = ["rescored_report"]


def rescored_report(store: LocalStore, run: RunRecord) -> dict[str, Any]:
    """The run report (as ``summary["report"]``) of ``run``'s stored outputs scored with the
    scoring config its record carries, against the gold it was scored with; an errored item
    is a failed item, as when it ran. Items no longer in its dataset version are left out."""
    scoring = run_scoring(run)
    gold = run_gold(store, run)
    texts = ContextIndex({item_id: item.text for item_id, item in gold.items()})
    fold = ReportAccumulator(scoring)
    for result in store.iter_results(run.id, order_by="item_id"):
        item = gold.get(result.item_id)
        if item is None:
            continue
        pred = result.output if result.error is None else None
        fold.add(score_dataset_item(item, pred, scoring, context_texts=texts))
    return fold.report()
