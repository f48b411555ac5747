"""LangFuse mode goes through the same ``prepare``: a refused setup leaves no run in the local
mirror and no experiment in LangFuse, and the same name then works without ``--resume``."""

from __future__ import annotations

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import ConfigError, InvalidValue
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from tests.integration.test_langfuse_experiment import DATASET, PIPE, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse


@pytest.mark.parametrize(
    ("pipeline", "error", "message"),
    [
        (PipelineConfig(model="nope:x"), ConfigError, "unknown model provider"),
        (PipelineConfig(model="openai:gpt-4o-mini"), ConfigError, "OPENAI_API_KEY"),
        (PipelineConfig(pipeline="nosuchmod:fn"), InvalidValue, "cannot import"),
        # a label the pipeline would not send: refused, never recorded as if it had run
        (PipelineConfig(prompt_label="staging"), InvalidValue, "sends no prompt"),
        (PipelineConfig(pipeline=PIPE, prompt_version=1), InvalidValue, "sends no prompt"),
    ],
)
def test_refused_setup_leaves_no_run_and_the_name_is_free(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    pipeline: PipelineConfig,
    error: type[Exception],
    message: str,
) -> None:
    upload(server, LocalStore().get_items(DATASET)[:2])
    use_langfuse(server, monkeypatch, "setup-failure")
    with pytest.raises(error, match=message):
        run_experiment(RunConfig(dataset=DATASET, name="same", pipeline=pipeline))
    assert LocalStore().list_runs() == []
    assert server.spans_named("experiment-item-run") == []

    outcome = run_experiment(
        RunConfig(dataset=DATASET, name="same", pipeline=PipelineConfig(pipeline=PIPE))
    )
    assert outcome.run.status == "finished" and len(outcome.results) == 2
