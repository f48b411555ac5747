"""LangFuse mode's per-item work, cut without changing what LangFuse receives (issue 30): the
spans' values reach the SDK as the JSON text it would have made (no second walk of them in
Python), an item's results are committed to the mirror in groups, and an item's scores are
stamped once. Assertions on what the loopback server received and on the mirror."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from langfuse._client.attributes import _serialize
from langfuse._utils.serializer import EventSerializer

from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.llm.fake import register_fake, unregister_fake
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import DatasetItem
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

DATASET = "extraction-eval"
ANSWER = {"entities": [{"name": "Mara Velloso", "type": "person"}], "relationships": []}
VALUES = ("input", "output", "usage_details", "cost_details", "model.parameters")


@pytest.fixture
def fake_model() -> Iterator[str]:
    register_fake("lf-cpu", {"default": {"json": ANSWER, "usage": {"input": 11, "output": 7}}})
    yield "fake:lf-cpu"
    unregister_fake("lf-cpu")


@pytest.fixture
def walked(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every value the SDK's serializer walked (it walks in Python before encoding)."""
    seen: list[Any] = []
    encode = EventSerializer.encode

    def spy(self: EventSerializer, obj: Any) -> str:
        seen.append(obj)
        return encode(self, obj)

    monkeypatch.setattr(EventSerializer, "encode", spy)
    return seen


def test_a_runs_span_values_are_the_sdks_text_made_without_its_walk(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    fake_model: str,
    walked: list[Any],
) -> None:
    items = LocalStore().get_items(DATASET)[:3]
    upload(server, items, DATASET)
    use_langfuse(server, monkeypatch, "cpu")
    outcome = run_experiment(
        RunConfig(dataset=DATASET, name="cpu-1", pipeline=PipelineConfig(model=fake_model))
    )
    assert outcome.summary.errors == 0
    walked_in_run = list(walked)  # (the checks below walk with the SDK's serializer too)
    mine = [
        s
        for s in server.spans
        if s["name"] in ("extract", "experiment-item-task", "experiment-item-run")
    ]
    assert len(mine) == 3 * len(items)  # one trace per item: run, task, and the model call
    values = []
    for span in mine:
        for key in VALUES:
            text = span["attributes"].get(f"langfuse.observation.{key}")
            if text is None or (span["name"] != "extract" and key != "output"):
                continue  # the SDK's own values (the item's input) are the SDK's business
            value = json.loads(text)
            assert text == _serialize(value), (span["name"], key)  # as the SDK writes it
            values.append(value)
    generations = [s["attributes"] for s in mine if s["name"] == "extract"]
    assert [
        [e["name"] for e in json.loads(a["langfuse.observation.output"])["entities"]]
        for a in generations
    ] == [["Mara Velloso"]] * len(items)
    assert {a["langfuse.observation.usage_details"] for a in generations} == {
        '{"input": 11, "output": 7}'
    }
    # none of them went through the SDK's Python walk (the task's output went twice)
    # extract: input, output, usage, parameters (no cost: the fake model has no price); the
    # task and the run span: the output
    assert len(values) == len(items) * (4 + 2)
    assert [v for v in walked_in_run if any(v == value for value in values)] == []


def test_an_items_scores_share_one_timestamp_and_its_results_are_committed_in_groups(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    fake_model: str,
) -> None:
    grouped: list[bool] = []
    record = LocalStore.record_result

    def spy(self: LocalStore, *args: Any, **kwargs: Any) -> None:
        grouped.append(bool(kwargs.get("group")))
        record(self, *args, **kwargs)

    monkeypatch.setattr(LocalStore, "record_result", spy)
    items: list[DatasetItem] = LocalStore().get_items(DATASET)[:3]
    upload(server, items, DATASET)
    use_langfuse(server, monkeypatch, "stamps")
    store = LocalStore()
    outcome = run_experiment(
        RunConfig(dataset=DATASET, name="stamps-1", pipeline=PipelineConfig(model=fake_model)),
        store=store,
    )
    assert grouped == [True] * len(items)  # into the loop turn's group, as in local mode
    assert store.count_results(outcome.run.id) == len(items)  # and committed
    stamps: dict[str, set[str]] = defaultdict(set)
    for request in server.requests_to("/api/public/scores", "POST"):
        for score in request.body if isinstance(request.body, list) else [request.body]:
            if score.get("traceId"):
                stamps[score["traceId"]].add(score["timestamp"])
    assert len(stamps) == len(items)
    assert all(len(s) == 1 for s in stamps.values()), stamps
