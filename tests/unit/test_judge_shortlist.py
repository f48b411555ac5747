"""The judge's candidates: at most ``SHORTLIST_K`` gold objects per prediction, the most
similar by a cheap string similarity, and only of the prediction's type (casefolded), in the
typed and the untyped figure alike: a pair of two types is never asked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rapidfuzz import fuzz

from extraction_eval.analysis.judged import SHORTLIST_K
from extraction_eval.analysis.score_files import score_files
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.judge.base import JudgePair, JudgeStats, Verdict
from extraction_eval.judge.rules import rules_verdict

CONFIG = ScoringConfig(resamples=0)


class Recorder:
    """``offline:rules``' verdicts, recording every pair it is asked."""

    identity = "recorder"

    def __init__(self) -> None:
        self.asked: list[JudgePair] = []
        self.stats = JudgeStats()

    async def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        self.asked += pairs
        self.stats.pairs += len(pairs)
        return [Verdict(*rules_verdict(p.a, p.b, p.type), source="rules") for p in pairs]

    async def aclose(self) -> None:
        return None


def _files(tmp: Path, gold: dict[str, object], pred: dict[str, object]) -> tuple[Path, Path]:
    g, p = tmp / "gold.jsonl", tmp / "pred.jsonl"
    g.write_text(json.dumps(gold) + "\n", encoding="utf-8")
    p.write_text(json.dumps(pred) + "\n", encoding="utf-8")
    return g, p


def test_at_most_k_most_similar_candidates_per_prediction(tmp_path: Path) -> None:
    people = ["Barack Obama", "Michelle Obama", "Obadiah Stane", "Bob Oman", "Jane Doe"]
    people += ["John Smith", "Mary Major", "Ann Lee"]
    gold = {
        "id": "a",
        "text": " ".join(people),
        "entities": [{"name": n, "type": "PER"} for n in people],
    }
    pred = {"id": "a", "entities": [{"name": "Obama", "type": "PER"}]}
    judge = Recorder()
    report = score_files(*_files(tmp_path, gold, pred), CONFIG, judge=judge).report
    asked = {p.b for p in judge.asked}
    assert len(asked) == SHORTLIST_K < len(people)
    ranked = sorted(people, key=lambda n: -fuzz.WRatio("obama", n.casefold()))
    assert asked == set(ranked[:SHORTLIST_K])
    assert report["judged"]["shortlist_k"] == SHORTLIST_K
    assert report["judged"]["candidates"]["per_item"] == len(judge.asked)


def test_a_pair_of_two_types_is_never_a_candidate(tmp_path: Path) -> None:
    gold = {
        "id": "a",
        "text": "Barack Obama visited Lyon.",
        "entities": [{"name": "Barack Obama", "type": "PER"}, {"name": "Lyon", "type": "LOC"}],
    }
    pred = {
        "id": "a",
        "entities": [{"name": "Obama", "type": "ORG"}, {"name": "Obama", "type": "per"}],
    }
    judge = Recorder()
    report = score_files(*_files(tmp_path, gold, pred), CONFIG, judge=judge).report
    judged = report["judged"]
    # only the "per" prediction (types casefolded) is asked, and only about the person
    assert judge.asked == [JudgePair("Obama", "Barack Obama", "PER", gold["text"])]
    assert judged["matches"]["entities"] == judged["matches"]["entities_typed"] == 1
