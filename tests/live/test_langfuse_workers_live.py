"""``--workers 2`` in LangFuse mode against a real LangFuse (skipped unless asked for, as the
rest of tests/live): two worker processes, each running its share of the items through the
SDK's ``run_experiment``, write one experiment whose items LangFuse lists on their traces."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from extraction_eval.backends.langfuse import LangfuseDatasetBackend, close_client, connect
from tests.support.live_langfuse import BASE_URL as _BASE_URL
from tests.support.live_langfuse import PUBLIC_KEY as _PUBLIC_KEY
from tests.support.live_langfuse import SECRET_KEY as _SECRET_KEY
from tests.support.live_langfuse import api_get as _get
from tests.support.live_langfuse import live_marks

pytestmark = live_marks(300)

NAME = "extraction-eval-live-workers"


def test_two_workers_write_one_experiment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from extraction_eval.datasets.bundled import sample_items
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig

    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", _PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", _SECRET_KEY)
    monkeypatch.setenv("LANGFUSE_BASE_URL", _BASE_URL)
    client = connect(public_key=_PUBLIC_KEY, secret_key=_SECRET_KEY, base_url=_BASE_URL)
    try:
        LangfuseDatasetBackend(client).upload_items(NAME, sample_items()[:8])
    finally:
        close_client(client)
    name = f"live-workers-{uuid.uuid4().hex[:8]}"
    pids = tmp_path / "pids.log"
    monkeypatch.setenv("E2E_PID_LOG", str(pids))  # each item's "id pid" (which process ran it)
    pipeline = PipelineConfig(pipeline="tests.support.pipelines:fails_two_ways")
    outcome = run_experiment(
        RunConfig(
            dataset=NAME,
            name=name,
            backend="langfuse",
            pipeline=pipeline,
            concurrency=4,
            workers=2,
        )
    )
    ran_in = {line.split()[1] for line in pids.read_text().splitlines()}
    assert len(ran_in) == 2 and str(os.getpid()) not in ran_in  # both workers ran items
    assert outcome.summary.items == 8 and outcome.summary.missing == 0
    assert not [w for w in outcome.warnings if "worker process" in w], outcome.warnings
    assert outcome.langfuse_verified and "8 traces" in outcome.langfuse_verified
    experiment_id = outcome.run.experiment_id
    (listed,) = _get("experiments", fromStartTime="2000-01-01T00:00:00Z", id=experiment_id)["data"]
    assert listed["name"] == name and listed["itemCount"] == 8  # one experiment, every item
    since = outcome.run.started_at or "2000-01-01T00:00:00Z"
    rows = _get(
        "experiment-items", fromStartTime=since[:10] + "T00:00:00Z", experimentId=experiment_id,
        fields="core", limit="100",
    )["data"]  # fmt: skip
    assert {r["traceId"] for r in rows} == {r.trace_id for r in outcome.results}
    for result in outcome.results:
        assert result.trace_url and result.trace_url.endswith(result.trace_id or "-")
