"""LangFuse mode goes through the same ``prepare``: a refused setup leaves no run in the local
mirror and no experiment in LangFuse, and the same name then works without ``--resume``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app
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


def test_a_server_older_than_v4_59_is_refused_in_one_line_before_any_model_call(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    upload(server, LocalStore().get_items(DATASET)[:2])
    use_langfuse(server, monkeypatch, "old-server")
    monkeypatch.delenv("EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD", raising=False)
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("E2E_CALL_LOG", str(calls))
    server.server_version = "4.16.0"
    result = CliRunner().invoke(_run_app, ["--name", "old", "--pipeline", PIPE])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "v4.16.0" in line and "v4.59.0 or later" in line
    assert "EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD=1" in line
    assert server.requests_to("/api/public/health", "GET")
    assert not calls.exists()  # no model call
    assert server.spans == [] and server.posted_scores == []
    assert LocalStore().list_runs() == []


def test_allow_old_turns_the_refusal_into_one_warning_line_and_runs(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(server, LocalStore().get_items(DATASET)[:2])
    use_langfuse(server, monkeypatch, "old-allowed")
    server.server_version = "4.16.0"
    monkeypatch.setenv("EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD", "1")
    result = CliRunner().invoke(_run_app, ["--name", "old-ok", "--pipeline", PIPE])
    assert result.exit_code == 0, result.stderr
    # one warning line, before the tables; the one-line recap at the end names it too
    lines = result.stderr.splitlines()
    warnings = [line for line in lines if "v4.16.0" in line and "above the tables" not in line]
    assert len(warnings) == 1 and "EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD=1" in warnings[0]
    assert [line for line in lines if "above the tables" in line]
    assert len(server.spans_named("experiment-item-run")) == 2
    assert result.stdout.strip().splitlines()[-1].startswith("verified in LangFuse: 2 traces")
