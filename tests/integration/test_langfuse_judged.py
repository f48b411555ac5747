"""``run-experiment --judge`` in LangFuse mode: the judged figures reach the experiment as
``*_judged`` run-level scores (deterministic ids, commented with the judge and its backing),
beside the string scores, which do not change. Against the loopback fake LangFuse."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app
from extraction_eval.llm.fake import register_fake, unregister_fake
from tests.support.judging import last_word_answers
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

DATASET = "extraction-eval"


def run_scores(server: FakeLangfuse, experiment_id: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in server.scores if s.get("datasetRunId") == experiment_id}


def test_judged_scores_reach_the_experiment(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = LocalStore().get_items(DATASET)[:3]
    upload(server, items, DATASET)
    use_langfuse(server, monkeypatch, "judged")
    last_word = last_word_answers(items)
    register_fake("lfjudge", {"items": last_word})
    try:
        result = CliRunner().invoke(
            _run_app,
            [
                *("--dataset", DATASET, "--name", "lf-judged", "--model", "fake:lfjudge"),
                *("--judge", "offline:rules"),
            ],
        )
    finally:
        unregister_fake()
    assert result.exit_code == 0, result.stderr
    assert "judged by offline:rules" in result.stdout
    run = LocalStore().get_run("lf-judged", DATASET)
    assert run is not None and run.backend == "langfuse" and run.experiment_id
    scores = run_scores(server, run.experiment_id)
    assert {"entity_f1", "entity_f1_judged", "relationship_f1_judged"} <= set(scores)
    assert scores["entity_f1_judged"]["value"] > scores["entity_f1"]["value"]
    assert "offline:rules" in scores["entity_f1_judged"]["comment"]
    assert "no calibration" in scores["entity_f1_judged"]["comment"]
