"""The run report and summary are folds: one pass over a stream of items gives exactly the
report of the list (so ``finalize`` can stream a 100,000-item run from the store)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import extraction_eval
from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.evaluators import (
    ItemScore,
    ReportAccumulator,
    ScoringConfig,
    aggregate,
    item_scores,
    score_item,
)
from extraction_eval.pipeline.baseline import extract_baseline
from extraction_eval.types import ItemResult, Usage
from tests.support.summaries import fold_summary

PACKAGE_DATA = Path(extraction_eval.__file__).parent / "data"
# as the ``shared_data`` fixture finds it (a parametrize list cannot take a fixture)
SHARED = Path(
    os.environ.get("EXTRACTION_EVAL_SHARED_DATA")
    or Path(__file__).resolve().parents[3] / "shared" / "data"
)
SOURCES = {
    "sample": PACKAGE_DATA / "sample_dataset.jsonl",
    "journal": PACKAGE_DATA / "journal_dataset.jsonl",  # attributes and schema declarations
    "conll04_test": SHARED / "conll04_test.jsonl",
}
CFG = ScoringConfig(resamples=300)


def _scored(path: Path) -> tuple[list[ItemScore], list[ItemResult]]:
    """Gold against the offline baseline; every 7th item failed, every 5th is its gold with
    one attribute dropped (so attribute agreement and the failure paths are in the report)."""
    gold, _ = read_gold(path)
    scores, results = [], []
    for n, g in enumerate(gold):
        pred = None if n % 7 == 3 else extract_baseline(g.text, g.schema)
        if pred is not None and n % 5 == 0:  # the gold, with one attribute dropped
            dropped = [
                e.model_copy(update={"attributes": dict(list(e.attributes.items())[1:])})
                for e in g.extraction.entities
            ]
            pred = g.extraction.model_copy(update={"entities": dropped})
        s = score_item(
            item_id=g.id, text=g.text, gold=g.extraction, pred=pred, config=CFG, schema=g.schema
        )
        scores.append(s)
        results.append(
            ItemResult(
                item_id=g.id,
                output=pred,
                error=None if pred else "RuntimeError: boom",
                latency_ms=float(n % 11) + 0.25,
                usage=Usage(tokens_in=n, tokens_out=2, cost_usd=None if n % 4 else n / 3e5),
                scores=item_scores(s),
            )
        )
    return scores, results


def _dump(report: object) -> str:
    return json.dumps(report, sort_keys=True)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_one_pass_over_a_stream_gives_the_report_and_summary_of_the_list(name: str) -> None:
    path = SOURCES[name]
    if not path.is_file():
        pytest.skip(f"{path} not found")
    scores, results = _scored(path)
    report = aggregate(scores, CFG)
    assert report["items"] == len(scores) and report["failed_items"] > 0
    assert _dump(aggregate(iter(scores), CFG)) == _dump(report)
    assert _dump(aggregate(reversed(scores), CFG)) == _dump(report)

    # a fold can be looked at midway and goes on unchanged
    acc = ReportAccumulator(CFG)
    half = len(scores) // 2
    for s in scores[:half]:
        acc.add(s)
    assert _dump(acc.report()) == _dump(aggregate(scores[:half], CFG))
    for s in scores[half:]:
        acc.add(s)
    assert _dump(acc.report()) == _dump(report)

    summary = fold_summary(results, scores, CFG).to_json()
    assert summary["report"] == report and summary["items"] == len(results)
