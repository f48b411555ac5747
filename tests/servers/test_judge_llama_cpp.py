"""The semantic judge against llama.cpp's real server (SmolLM2-135M-Instruct): a handful of
pairs through the same path ``score --judge ... --judge-base-url`` takes.

A 135M model is no judge; what is checked is the wire: the response format is detected
(``json_schema`` refused, the schema sent with ``json_object``), every pair gets a verdict or
a counted error, usage is priced as unknown, the string figures do not move, and a re-run
answers from the cache without a request. Run with scripts/test-servers.sh.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction_eval.analysis.score_files import score_files
from extraction_eval.backends.local import LocalStore
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.judge.model import ModelJudge
from extraction_eval.llm.retry import RetryPolicy

pytestmark = pytest.mark.timeout(1800)

GOLD = {
    "id": "j1",
    "text": "International Business Machines (IBM) hired Barack Obama. Lyon is not Paris.",
    "entities": [
        {"name": "International Business Machines", "type": "ORG"},
        {"name": "Barack Obama", "type": "PER"},
        {"name": "Paris", "type": "LOC"},
    ],
}
PRED = {
    "id": "j1",
    "entities": [
        {"name": "IBM", "type": "ORG"},
        {"name": "Obama", "type": "PER"},
        {"name": "Lyon", "type": "LOC"},
    ],
}
CONFIG = ScoringConfig(resamples=0)


def test_the_real_server_judges_a_handful_of_pairs(llama_server: str, tmp_path: Path) -> None:
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    gold.write_text(json.dumps(GOLD) + "\n", encoding="utf-8")
    pred.write_text(json.dumps(PRED) + "\n", encoding="utf-8")
    plain = score_files(gold, pred, CONFIG).report
    with LocalStore(seed=False) as store:

        def judge() -> ModelJudge:
            return ModelJudge(
                "openai:smollm2",
                base_url=llama_server,
                cache=store.cache(),
                retry=RetryPolicy.immediate(max_attempts=1, timeout_s=600),
                timeout_s=600,
            )

        first = judge()
        report = score_files(gold, pred, CONFIG, judge=first).report
        judged = report.pop("judged")
        assert report == plain  # the string figures never move
        stats = judged["stats"]
        assert stats["pairs"] == 3 and stats["calls"] == 1
        choice = getattr(first.provider, "format_choice", None)
        assert choice is not None and choice.used == "json_object_schema", choice
        # each pair: a verdict, or an error that was counted (a 135M model may ramble)
        assert 0 <= stats["errors"] <= 3
        assert judged["matches"]["entities"] <= 3 - stats["errors"]
        second = judge()
        again = score_files(gold, pred, CONFIG, judge=second).report["judged"]
        assert again["stats"]["calls"] == (1 if stats["errors"] else 0)
        assert again["stats"]["cache_hits"] == 3 - stats["errors"]
