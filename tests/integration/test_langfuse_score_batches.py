"""LangFuse mode posts its item scores in large batches (fewer requests from the SDK's
background thread, which shares the GIL with the run's event loop); LANGFUSE_FLUSH_AT wins."""

from __future__ import annotations

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.langfuse_mode import RUN_FLUSH_AT
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from tests.integration.test_langfuse_experiment import DATASET, PIPE, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse


def score_batches(server: FakeLangfuse) -> list[int]:
    return [len(r.body) for r in server.requests_to("/api/public/scores", "POST")]


def test_a_run_posts_its_scores_in_batches_larger_than_the_sdk_default(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_FLUSH_AT", raising=False)
    items = LocalStore().get_items(DATASET)[:6]
    upload(server, items)
    use_langfuse(server, monkeypatch, "batches")
    outcome = run_experiment(
        RunConfig(dataset=DATASET, name="b1", pipeline=PipelineConfig(pipeline=PIPE))
    )
    batches = score_batches(server)
    assert sum(batches) == len(server.scores) > 6 * 6  # every item and run score arrived
    assert max(batches) > 15 and max(batches) <= RUN_FLUSH_AT  # the SDK's default is 15
    assert outcome.summary.items == 6


def test_langfuse_flush_at_in_the_environment_wins(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = LocalStore().get_items(DATASET)[:6]
    upload(server, items)
    use_langfuse(server, monkeypatch, "batches-env")
    monkeypatch.setenv("LANGFUSE_FLUSH_AT", "4")
    run_experiment(RunConfig(dataset=DATASET, name="b2", pipeline=PipelineConfig(pipeline=PIPE)))
    batches = score_batches(server)
    assert sum(batches) == len(server.scores) > 6 * 6
    assert max(batches) == 4
