"""A LangFuse-mode item's ``*_judged`` scores: named like its string scores plus ``_judged``
and computed as they are, so an item the judge credits nothing scores the same on both, and a
failed item scores 0 on both (never the both-empty 1.0)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from extraction_eval.analysis.judged import judge_item
from extraction_eval.analysis.judged_runs import item_judged_scores, post_judged_scores
from extraction_eval.evaluators import ScoringConfig, score_dataset_item
from extraction_eval.evaluators.gold_view import scored_gold
from extraction_eval.evaluators.scores import item_scores
from extraction_eval.judge.rules import RulesJudge
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, Score

TEXT = "Barack Obama works for IBM in Paris."
GOLD = Extraction(
    entities=[
        Entity(name="Barack Obama", type="PER"),
        Entity(name="International Business Machines", type="ORG"),
        Entity(name="Paris", type="LOC"),
    ],
    relationships=[
        Relationship(
            source="Barack Obama", type="works_for", target="International Business Machines"
        )
    ],
)
CONFIG = ScoringConfig(resamples=0)


def _judged(
    pred: Extraction | None, gold: Extraction = GOLD
) -> tuple[dict[str, float], dict[str, float]]:
    item = DatasetItem(id="i", text=TEXT, expected=gold)
    score = score_dataset_item(item, pred, CONFIG)
    judged = asyncio.run(judge_item(RulesJudge(), score, TEXT, scored_gold(item), pred, CONFIG))
    string = {s.name: float(s.value) for s in item_scores(score)}
    twins = {s.name: float(s.value) for s in item_judged_scores(judged, "offline:rules")}
    return string, twins


def test_each_judged_score_twins_a_string_item_score() -> None:
    string, twins = _judged(GOLD)  # all matched by string: nothing left to judge
    assert set(twins) == {
        "entity_precision_judged", "entity_recall_judged", "entity_f1_judged",
        "entity_typed_f1_judged", "relationship_precision_judged",
        "relationship_recall_judged", "relationship_f1_judged",
    }  # fmt: skip
    for name, value in twins.items():
        assert value == string[name.removesuffix("_judged")]


def test_a_credited_paraphrase_raises_only_the_judged_figure() -> None:
    pred = Extraction(
        entities=[Entity(name="Obama", type="PER"), Entity(name="Paris", type="LOC")],
        relationships=[],
    )
    string, twins = _judged(pred)
    assert string["entity_f1"] == 0.4  # Paris only: 2·1 / (2·1 + 1 + 2)
    assert twins["entity_f1_judged"] == 0.8  # Obama credited: 2·2 / (2·2 + 0 + 1)
    assert twins["relationship_f1_judged"] == string["relationship_f1"] == 0.0


def test_a_failed_item_scores_zero_on_both_even_with_empty_gold() -> None:
    string, twins = _judged(None, Extraction())
    assert set(twins.values()) == {0.0}
    assert all(string[n.removesuffix("_judged")] == 0.0 for n in twins)


def test_posting_judged_scores_that_fails_midway_still_delivers_what_was_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import extraction_eval.backends.langfuse as langfuse_backend

    flushed: list[int] = []
    posted: list[str] = []

    class Client:
        def flush(self) -> None:
            flushed.append(len(posted))

    def post(lf: object, score: Score, **subject: object) -> None:
        if posted:
            raise RuntimeError("queue full")
        posted.append(score.name)

    monkeypatch.setattr(langfuse_backend, "connect", lambda **kwargs: Client())
    monkeypatch.setattr(langfuse_backend, "post_score", post)
    run = SimpleNamespace(backend="langfuse", experiment_id="exp-1")
    report = {"judge": "offline:rules", "entities": {"f1": 0.5, "precision": 0.5}}
    problem = post_judged_scores(run, report)  # type: ignore[arg-type]  # backend, id only
    assert problem is not None and "queue full" in problem
    assert flushed == [1]  # the one score queued before the failure is delivered
