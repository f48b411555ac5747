"""The runner with the real ``openai`` client over HTTP against a loopback server that
injects 429 (Retry-After), 500, slow answers and malformed JSON: retries happen, errors are
rows and scores, nothing is lost."""

from __future__ import annotations

import asyncio

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local
from extraction_eval.pipeline.base import PipelineConfig
from tests.support.openai_server import (
    LoopbackServer,
    baseline_answer,
    content,
    malformed_body,
    rate_limited,
    server_error,
    slow,
)

FAST_RETRIES = {"retry_initial_wait_s": 0, "retry_max_wait_s": 0, "retry_jitter_s": 0}


def test_faults_become_retries_or_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    store = LocalStore()
    items = store.get_items("extraction-eval")[:8]
    t = [i.text for i in items]
    with LoopbackServer(answer=baseline_answer) as server:
        server.inject(
            rate_limited(retry_after=0.2, match=t[0]),  # retried after Retry-After
            server_error(500, match=t[1]),  # retried
            server_error(503, match=t[2], times=3),  # every attempt fails -> error row
            slow(2.0, match=t[3], times=3),  # beyond the timeout on every attempt
            content("{not json", match=t[4]),  # schema failure, not retried
            malformed_body(match=t[5]),  # broken HTTP body: retried
        )
        config = RunConfig(
            name="faults",
            pipeline=PipelineConfig(
                model="openai:loopback-model",
                base_url=server.url,
                temperature=0.3,
                timeout_s=0.5,
                max_attempts=3,
                extra=FAST_RETRIES,
                response_format="json_schema",  # pinned: no format probe among the counts
            ),
            scoring=ScoringConfig(resamples=200),
            limit=8,
            concurrency=4,
            backend="local",
        )
        outcome = asyncio.run(arun_local(config, store=store))
        bodies = [r.body for r in server.chat_requests]

    by_id = {r.item_id: r for r in outcome.results}
    assert sorted(by_id) == sorted(i.id for i in items)  # nothing lost
    ok, failed = items[0].id, items[2].id
    assert by_id[ok].ok and by_id[ok].attempts == 2
    assert by_id[items[1].id].ok and by_id[items[1].id].attempts == 2
    assert by_id[failed].error_kind == "provider" and by_id[failed].attempts == 3
    assert by_id[items[3].id].error_kind == "timeout" and by_id[items[3].id].attempts == 3
    assert by_id[items[4].id].error_kind == "schema" and by_id[items[4].id].attempts == 1
    assert by_id[items[4].id].raw_output == "{not json"
    assert by_id[items[5].id].ok and by_id[items[5].id].attempts == 2
    for r in outcome.results:
        err = {s.name: s for s in r.scores}["extraction_error"]
        assert err.value is (not r.ok)
    assert outcome.summary.errors == 3 and outcome.summary.items == 8
    assert outcome.summary.values["error_rate"] == pytest.approx(3 / 8)
    # what the server received: 8 first calls + 1 + 1 + 2 + 2 + 0 + 1 retries
    assert len(bodies) == 15
    assert all(b["temperature"] == 0.3 and b["model"] == "loopback-model" for b in bodies)
    assert all(b["response_format"]["type"] == "json_schema" for b in bodies)
    stored = store.results(outcome.run.id)
    assert len(stored) == 8
