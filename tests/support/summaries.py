"""A run summary folded the way the driver folds it: one ``SummaryAccumulator.add(result,
score)`` per finished item, then ``summary()``."""

from __future__ import annotations

from collections.abc import Iterable

from extraction_eval.evaluators import ItemScore, ScoringConfig
from extraction_eval.experiments.summary import RunSummary, SummaryAccumulator
from extraction_eval.types import ItemResult


def fold_summary(
    results: Iterable[ItemResult],
    scores: Iterable[ItemScore],
    scoring: ScoringConfig,
    *,
    expected_items: int | None = None,
) -> RunSummary:
    acc = SummaryAccumulator(scoring)
    for result, score in zip(results, scores, strict=True):
        acc.add(result, score)
    return acc.summary(expected_items=expected_items)
