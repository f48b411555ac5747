"""LangFuse mode: a repaired reply is an ``answer_repair`` score on its item's trace and the
run's ``answers_repaired`` score on the experiment, as the loopback fake LangFuse received
them (the real SDK's ``run_experiment``, a scripted fake model)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.langfuse import langfuse_item_id
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app
from extraction_eval.llm.fake import register_fake, unregister_fake
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

DATASET = "extraction-eval"
ANSWER = {"entities": [{"name": "Mara Velloso", "type": "person"}], "relationships": []}


@pytest.fixture
def fake_model() -> Iterator[str]:
    """Bare JSON for every item but two: one fenced, one wrapped in ``{"result": ...}``."""
    script = {
        "default": {"json": ANSWER},
        "items": {
            "sample-002": {"text": f"```json\n{json.dumps(ANSWER)}\n```"},
            "sample-003": {"text": json.dumps({"result": ANSWER})},
        },
    }
    register_fake("lf-replies", script)
    yield "fake:lf-replies"
    unregister_fake("lf-replies")


def test_repairs_are_scores_on_each_trace_and_on_the_experiment(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, fake_model: str
) -> None:
    items = LocalStore().get_items(DATASET)[:4]
    upload(server, items, DATASET)
    use_langfuse(server, monkeypatch, "replies")
    result = CliRunner().invoke(_run_app, ["--name", "rep-1", "--model", fake_model])
    assert result.exit_code == 0, result.stderr  # the read-back found every score
    run = LocalStore().get_run("rep-1", DATASET)
    assert run is not None and run.backend == "langfuse" and run.experiment_id
    trace_of = {
        s["attributes"]["langfuse.experiment.item.id"]: s["trace_id"]
        for s in server.spans_named("experiment-item-run")
        if s["attributes"]["langfuse.experiment.id"] == run.experiment_id
    }
    received = {
        item.id: sorted(
            s["value"]
            for s in server.scores
            if s.get("traceId") == trace_of[langfuse_item_id(DATASET, item.id)]
            and s["name"] == "answer_repair"
        )
        for item in items
    }
    assert received == {
        "sample-001": [],
        "sample-002": ["fence"],
        "sample-003": ["wrapper"],
        "sample-004": [],
    }
    fence = next(s for s in server.scores if s["name"] == "answer_repair" and s["value"] == "fence")
    assert fence["dataType"] == "CATEGORICAL" and "Markdown code fence" in fence["comment"]
    on_run = [
        s
        for s in server.scores
        if s.get("datasetRunId") == run.experiment_id and s["name"] == "answers_repaired"
    ]
    assert [s["value"] for s in on_run] == [2.0]
    assert "fence 1, wrapper 1" in on_run[0]["comment"]
