"""A failed item (no output) never counts as a pass of anything — hand-computed.

Each value below is worked out by hand from the counts; on the code before issue 7 the both-empty
1.0 was awarded to crashes (zero-FP pass 7/7 for a pipeline that failed on every item).
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from rich.console import Console
from typer.testing import CliRunner

from extraction_eval.cli import app
from extraction_eval.evaluators import ItemScore, ScoringConfig, aggregate, item_scores, score_item
from extraction_eval.evaluators.stats.bootstrap import bootstrap_prf
from extraction_eval.experiments.runner import ItemRunner, run_bounded
from extraction_eval.pipeline.base import PipelineOutput
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult, Relationship
from extraction_eval.views.score_report import render_report
from tests.support.summaries import fold_summary

CFG = ScoringConfig(resamples=400, seed=1)
EMPTY = Extraction()
ANN_ACME = Extraction(entities=[Entity(name="Ann", type="PER"), Entity(name="Acme", type="ORG")])
PRF = ("precision", "recall", "f1")
RATIOS = (
    "entity_precision",
    "entity_recall",
    "entity_f1",
    "entity_typed_precision",
    "entity_typed_recall",
    "entity_typed_f1",
    "type_accuracy",
    "relationship_precision",
    "relationship_recall",
    "relationship_f1",
    "relationship_accuracy",
)


def _score(item_id: str, gold: Extraction, pred: Extraction | None) -> ItemScore:
    return score_item(item_id=item_id, text="Ann works at Acme.", gold=gold, pred=pred, config=CFG)


# ---- one item --------------------------------------------------------------------------------


def test_failed_gold_empty_item_fails_zero_fp_and_scores_zero() -> None:
    s = _score("f", EMPTY, None)
    assert s.failed and s.gold_empty
    assert s.zero_fp_pass is False
    values = s.values()
    assert {k: values[k] for k in RATIOS} == dict.fromkeys(RATIOS, 0.0)
    assert values["evidence_coverage_rate"] is None  # nothing predicted, nothing to ground

    scores = {x.name: x for x in item_scores(s)}
    assert scores["zero_fp_pass"].value is False
    assert scores["zero_fp_pass"].data_type == "BOOLEAN"
    assert "errored" in (scores["zero_fp_pass"].comment or "")
    assert all(scores[k].value == 0.0 for k in scores if k != "zero_fp_pass")
    # no output, nothing to count hallucinations in (so its mean stays hallucination_rate)
    assert "hallucination_count" not in scores

    line = s.to_json()
    assert line["negative_space"] == {"zero_fp_pass": False, "hallucination_count": None}
    for block in ("entities", "entities_typed", "relationships"):
        assert [line[block][k] for k in PRF] == [0.0, 0.0, 0.0]
    assert line["entities"]["type_accuracy"] == line["relationships"]["accuracy"] == 0.0


def test_the_same_item_with_an_empty_output_still_passes() -> None:
    s = _score("ok", EMPTY, EMPTY)
    assert s.zero_fp_pass is True
    assert all(s.values()[k] == 1.0 for k in RATIOS)  # nothing expected, nothing predicted


def test_failed_item_gets_no_both_empty_one_on_the_group_it_has_no_gold_for() -> None:
    # Gold has entities but no relationships: the relationship counts are all 0, and a crash
    # must not turn that into relationship F1 = 1.0.
    s = _score("f", ANN_ACME, None)
    v = s.values()
    assert v["relationship_f1"] == v["relationship_precision"] == v["relationship_recall"] == 0.0
    assert v["relationship_accuracy"] == v["type_accuracy"] == 0.0
    assert v["entity_recall"] == 0.0
    assert s.zero_fp_pass is None  # not gold-empty


# ---- runs ------------------------------------------------------------------------------------


def test_all_failed_run_scores_zero_everywhere() -> None:
    items = [_score("e1", EMPTY, None), _score("e2", EMPTY, None), _score("g", ANN_ACME, None)]
    r = aggregate(items, CFG)
    assert r["entities"] == {
        "tp": 0,
        "fp": 0,
        "fn": 2,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "type_correct": 0,
    }
    # every relationship count is 0 and every item failed: 0.0, not the both-empty 1.0
    assert r["relationships"] == {
        "tp": 0,
        "fp": 0,
        "fn": 0,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }
    assert r["type_accuracy"] == r["relationship_accuracy"] == 0.0
    assert all(r["macro"][k] == 0.0 for k in RATIOS)
    assert r["macro"]["evidence_coverage_rate"] is None
    assert r["negative_space"] == {
        "gold_empty_items": 2,
        "errored": 2,
        "scored": 0,
        "zero_fp_pass_count": 0,
        "zero_fp_pass_rate": 0.0,
        "hallucination_count": 0,
        "hallucination_rate": None,  # no gold-empty item produced an output
    }
    for prefix in ("entity", "entity_typed", "relationship"):
        for metric in PRF:
            assert r["ci"][f"{prefix}_{metric}"] == {"low": 0.0, "high": 0.0}
    assert r["items"] == 3 and r["failed_items"] == 3


def test_all_failed_and_all_gold_empty_micro_is_zero() -> None:
    # Summed counts are all 0 in every group: the both-empty rule alone would give 1.0.
    r = aggregate([_score("e1", EMPTY, None), _score("e2", EMPTY, None)], CFG)
    for block in ("entities", "entities_typed", "relationships"):
        assert [r[block][k] for k in PRF] == [0.0, 0.0, 0.0]
    assert r["negative_space"]["zero_fp_pass_rate"] == 0.0
    assert r["ci"]["entity_f1"] == {"low": 0.0, "high": 0.0}


def _mixed() -> list[ItemScore]:
    return [
        # entities tp 1 fp 0 fn 1: P 1, R 1/2, F1 2/3; relationships both empty: 1.0
        _score("i1", ANN_ACME, Extraction(entities=[Entity(name="Ann", type="PER")])),
        _score("i2", EMPTY, EMPTY),  # gold-empty, passes, every ratio 1.0
        _score("i3", EMPTY, None),  # gold-empty, errored: every ratio 0, zero-FP failure
        _score("i4", Extraction(entities=[Entity(name="Bob", type="PER")]), None),  # errored
        # gold-empty, 1 hallucinated entity: entity ratios 0; relationships both empty: 1.0
        _score("i5", EMPTY, Extraction(entities=[Entity(name="Zed", type="PER")])),
    ]


def test_mixed_run_by_hand() -> None:
    r = aggregate(_mixed(), CFG)
    assert r["no_prediction"] == {"count": 2, "ids": ["i3", "i4"]}
    # micro entities: tp 1, fp 1 (Zed), fn 2 (Acme, Bob)
    assert r["entities"]["precision"] == 1 / 2
    assert r["entities"]["recall"] == 1 / 3
    assert r["entities"]["f1"] == 2 / 5
    assert r["type_accuracy"] == 1.0  # 1 type-correct of 1 matched
    # no relationship anywhere, but two items failed: no both-empty 1.0
    assert r["relationships"]["f1"] == 0.0 and r["relationship_accuracy"] == 0.0
    # macro: means over the 5 items, failed items contributing 0
    assert r["macro"]["entity_f1"] == pytest.approx((2 / 3 + 1 + 0 + 0 + 0) / 5)
    assert r["macro"]["entity_precision"] == pytest.approx((1 + 1 + 0 + 0 + 0) / 5)
    assert r["macro"]["entity_recall"] == pytest.approx((1 / 2 + 1 + 0 + 0 + 0) / 5)
    assert r["macro"]["relationship_f1"] == pytest.approx((1 + 1 + 0 + 0 + 1) / 5)
    assert r["macro"]["type_accuracy"] == pytest.approx((1 + 1 + 0 + 0 + 0) / 5)
    assert r["items"] == 5 and r["failed_items"] == 2
    assert r["macro_items"]["entity_f1"] == 5
    assert r["macro_items"]["evidence_coverage_rate"] == 0
    assert r["negative_space"] == {
        "gold_empty_items": 3,
        "errored": 1,
        "scored": 2,
        "zero_fp_pass_count": 1,  # i2
        "zero_fp_pass_rate": 1 / 3,  # i3 errored: a failure, in the denominator
        "hallucination_count": 1,  # Zed on i5
        "hallucination_rate": 1 / 2,  # over the 2 gold-empty items with an output
    }


def test_failure_flags_do_not_depend_on_item_order() -> None:
    items = _mixed()
    assert aggregate(items, CFG) == aggregate(items[::-1], CFG)


# ---- bootstrap -------------------------------------------------------------------------------


def _arr(rows: list[tuple[int, int, int]]) -> NDArray[np.int64]:
    return np.asarray(rows, dtype=np.int64)


def test_bootstrap_both_empty_resample_that_drew_a_failed_item_scores_zero() -> None:
    rows = _arr([(0, 0, 0), (0, 0, 0)])
    # item 0 failed: a resample avoids it with probability 1/4 (1.0), else draws it (0.0)
    ci = bootstrap_prf({"r": rows}, resamples=2000, seed=0, failed=np.array([True, False]))
    assert ci == {"r": {"precision": [0.0, 1.0], "recall": [0.0, 1.0], "f1": [0.0, 1.0]}}
    ci = bootstrap_prf({"r": rows}, resamples=200, seed=0, failed=np.array([True, True]))
    assert ci == {"r": {"precision": [0.0, 0.0], "recall": [0.0, 0.0], "f1": [0.0, 0.0]}}
    # no failure: the both-empty rule as before
    ci = bootstrap_prf({"r": rows}, resamples=200, seed=0, failed=np.array([False, False]))
    assert ci == {"r": {"precision": [1.0, 1.0], "recall": [1.0, 1.0], "f1": [1.0, 1.0]}}


def test_bootstrap_failure_flag_stays_with_its_row_through_the_canonical_sort() -> None:
    # Rows are sorted by counts before resampling: (0,0,0) comes first. The flag must move
    # with it; were it left in place it would sit on (2,0,0) and the all-(0,0,0) resamples
    # (1 in 4) would score 1.0 instead of 0.0.
    rows = _arr([(2, 0, 0), (0, 0, 0)])
    ci = bootstrap_prf({"e": rows}, resamples=2000, seed=0, failed=np.array([False, True]))
    assert ci is not None and ci["e"]["f1"] == [0.0, 1.0]
    swapped = bootstrap_prf(
        {"e": rows[::-1].copy()}, resamples=2000, seed=0, failed=np.array([True, False])
    )
    assert swapped == ci
    with pytest.raises(ValueError, match="failed has shape"):
        bootstrap_prf({"e": rows}, resamples=10, seed=0, failed=np.array([True]))


# ---- the run summary and its rendering --------------------------------------------------------


class _Crash:
    async def extract(self, item: DatasetItem) -> PipelineOutput:
        raise RuntimeError("boom")


def _crash_run(items: list[DatasetItem]) -> tuple[list[ItemResult], list[ItemScore], ItemRunner]:
    runner = ItemRunner(pipeline=_Crash(), scoring=CFG)
    results: list[ItemResult] = []
    asyncio.run(run_bounded(items, runner.run_item, concurrency=2, on_result=results.append))
    by_id = {i.id: i for i in items}
    return results, [runner.score(by_id[r.item_id], r.output) for r in results], runner


def test_summary_of_an_all_failing_run_fails_its_thresholds() -> None:
    items = [
        DatasetItem(id="e1", text="Nothing.", expected=EMPTY),
        DatasetItem(id="e2", text="Nothing.", expected=EMPTY),
        DatasetItem(
            id="g",
            text="Ann met Bob.",
            expected=Extraction(
                entities=[Entity(name="Ann", type="PER")],
                relationships=[Relationship(source="Ann", type="knows", target="Bob")],
            ),
        ),
    ]
    results, scores, runner = _crash_run(items)
    s = fold_summary(results, scores, runner.scoring)
    assert s.errors == 3
    assert s.values["zero_fp_pass_rate"] == 0.0
    assert s.values["entity_f1"] == 0.0 and s.values["relationship_f1"] == 0.0
    assert "hallucination_rate" not in s.values  # undefined: no gold-empty item had output
    assert s.score_means["zero_fp_pass"] == 0.0 and s.score_counts["zero_fp_pass"] == 2
    assert s.score_counts["entity_f1"] == 3
    assert s.to_json()["score_counts"] == s.score_counts

    console = Console(file=io.StringIO(), width=200)
    render_report(s.report, console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "zero-FP pass 0/2 (2 errored) = 0.000" in out
    assert "hallucinated objects 0/0 items with output = —" in out
    assert "(means over 3 items)" in out


# ---- `extraction-eval score`: a gold id with no prediction line is a failed item ---------------


def test_score_cli_gold_id_without_prediction_is_a_zero_fp_failure(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        "\n".join(
            json.dumps({"id": i, "text": "Nothing here.", "entities": [], "relationships": []})
            for i in ("a", "b", "c")
        )
        + "\n",
        encoding="utf-8",
    )
    pred = tmp_path / "pred.jsonl"  # "a" has no line; "b" predicts nothing; "c" one object
    pred.write_text(
        json.dumps({"id": "b", "entities": [], "relationships": []})
        + "\n"
        + json.dumps({"id": "c", "entities": [{"name": "Zed", "type": "PER"}]})
        + "\n",
        encoding="utf-8",
    )
    per_item = tmp_path / "items.jsonl"
    args = ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"]
    result = CliRunner().invoke(app, [*args, "--per-item", str(per_item), "--resamples", "0"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["negative_space"] == {
        "gold_empty_items": 3,
        "errored": 1,
        "scored": 2,
        "zero_fp_pass_count": 1,
        "zero_fp_pass_rate": 1 / 3,
        "hallucination_count": 1,
        "hallucination_rate": 1 / 2,
    }
    # per item entity F1: a 0 (failed), b 1 (both empty), c 0 (1 fp)
    assert r["macro"]["entity_f1"] == pytest.approx(1 / 3)
    lines = {x["id"]: x for x in map(json.loads, per_item.read_text().splitlines())}
    assert lines["a"]["failed"] is True
    assert lines["a"]["negative_space"] == {"zero_fp_pass": False, "hallucination_count": None}
    assert lines["a"]["entities"]["f1"] == 0.0
