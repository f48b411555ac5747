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


STRING_FIELDS = ("name", "value", "comment", "dataType", "configId")


def _run(name: str, judge: list[str]) -> Any:
    return CliRunner().invoke(
        _run_app,
        ["--dataset", DATASET, "--name", name, "--model", "fake:lfjudge", *judge],
    )


def _by_item(server: FakeLangfuse, run_name: str) -> dict[str, list[dict[str, Any]]]:
    """The item scores LangFuse received for each item of a run (by its mirror's traces)."""
    run = LocalStore().get_run(run_name, DATASET)
    assert run is not None
    traces = {r.item_id: r.trace_id for r in LocalStore().iter_results(run.id)}
    assert all(traces.values())
    return {
        item: [s for s in server.scores if s.get("traceId") == trace]
        for item, trace in traces.items()
    }


def test_judged_item_scores_sit_beside_unchanged_string_scores(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = LocalStore().get_items(DATASET)[:3]
    upload(server, items, DATASET)
    use_langfuse(server, monkeypatch, "judged-items")
    last_word = last_word_answers(items)
    register_fake("lfjudge", {"items": last_word})
    try:
        plain = _run("lf-plain", [])
        judged = _run("lf-judged-items", ["--judge", "offline:rules"])
    finally:
        unregister_fake()
    assert plain.exit_code == 0, plain.stderr
    assert judged.exit_code == 0, judged.stderr
    without, with_judge = _by_item(server, "lf-plain"), _by_item(server, "lf-judged-items")
    assert set(without) == set(with_judge) == {i.id for i in items}
    raised = 0
    for item_id, scores in with_judge.items():
        by_name = {s["name"]: s for s in scores}
        string = sorted(
            tuple(str(s.get(k)) for k in STRING_FIELDS)
            for s in scores
            if not s["name"].endswith("_judged")
        )
        before = sorted(tuple(str(s.get(k)) for k in STRING_FIELDS) for s in without[item_id])
        assert string == before  # the string scores are what a run without --judge sends
        for name in ("entity_f1", "entity_typed_f1", "relationship_f1", "entity_recall"):
            twin = by_name[f"{name}_judged"]
            assert twin["traceId"] == by_name[name]["traceId"]
            assert twin["observationId"] == by_name[name]["observationId"]
            assert twin["value"] >= by_name[name]["value"]
            assert "offline:rules" in twin["comment"] and "judged matches=" in twin["comment"]
        raised += by_name["entity_f1_judged"]["value"] > by_name["entity_f1"]["value"]
    assert raised >= 1  # "Obama" credited for "Barack Obama" on some item
    run = LocalStore().get_run("lf-judged-items", DATASET)
    assert run is not None and run.experiment_id
    summary = run_scores(server, run.experiment_id)["judged_matches"]
    assert summary["value"] >= raised
    for part in ("offline:rules", "judge calls=0", "cache hits=0", "errors=0", "no calibration"):
        assert part in summary["comment"]
