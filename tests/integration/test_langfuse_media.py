"""A run's client does not search its spans for media (the SDK walks every input, output and
metadata value for base64 data URIs on each span update, a tenth of a run's CPU): a text that
is a data URI stays the text the model was given; LANGFUSE_MEDIA_UPLOAD_ENABLED wins."""

from __future__ import annotations

import json

import pytest

from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import DatasetItem, Extraction
from tests.integration.test_langfuse_experiment import PIPE, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

DATA_URI = "data:text/plain;base64,QWRhIExvdmVsYWNlIHdvcmtlZCB3aXRoIEJhYmJhZ2Uu"


def task_inputs(server: FakeLangfuse) -> list[object]:
    return [
        json.loads(s["attributes"]["langfuse.observation.input"])
        for s in server.spans_named("experiment-item-task")
    ]


def run_on_a_data_uri(server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    item = DatasetItem(id="uri-1", text=DATA_URI, expected=Extraction())
    upload(server, [item], dataset="media")
    use_langfuse(server, monkeypatch, name)
    run_experiment(RunConfig(dataset="media", name=name, pipeline=PipelineConfig(pipeline=PIPE)))


def test_a_runs_item_text_that_is_a_data_uri_stays_text_unless_the_environment_says(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_MEDIA_UPLOAD_ENABLED", raising=False)
    run_on_a_data_uri(server, monkeypatch, "media-off")
    assert server.requests_to("/api/public/media") == []
    assert [i["text"] for i in task_inputs(server)] == [DATA_URI]  # type: ignore[index]
    server.reset_requests()
    monkeypatch.setenv("LANGFUSE_MEDIA_UPLOAD_ENABLED", "true")  # the user's setting wins
    run_on_a_data_uri(server, monkeypatch, "media-on")
    assert server.requests_to("/api/public/media", "POST")  # the SDK's upload, as before
