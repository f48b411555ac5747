"""A model server that misbehaves in every way it can (429 with Retry-After, 500, an HTML 503,
truncated and malformed bodies, an answer that is not JSON, connection resets, slow-drip,
hang): every item is a row, a success after retries or its error; none is lost."""

from __future__ import annotations

import asyncio

from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local
from extraction_eval.pipeline.base import PipelineConfig
from tests.support.openai_server import (
    LoopbackServer,
    baseline_answer,
    content,
    disconnect,
    drip,
    hang,
    html_error,
    malformed_body,
    rate_limited,
    reset,
    server_error,
    truncated,
)
from tests.support.tally import Tally

ITEMS = 16
NO_WAITS = {  # backoff and Retry-After waits cut short: the faults are the point, not the clock
    "retry_initial_wait_s": 0.0,
    "retry_max_wait_s": 0.0,
    "retry_jitter_s": 0.0,
    "retry_max_retry_after_s": 0.05,
}


def test_every_item_is_a_row_whatever_the_model_server_does(tally: Tally) -> None:
    store = LocalStore()
    with LoopbackServer(answer=baseline_answer) as server:
        server.inject(
            rate_limited(retry_after=1, times=3),
            server_error(500, times=3),
            html_error(503, times=3),
            truncated(times=2),
            malformed_body(times=2),
            content("<html>not json</html>", times=2),  # a schema failure: not retried
            reset(times=2),
            disconnect(times=2),
            drip(0.001, times=2),
            hang(times=2),
        )
        config = RunConfig(
            name="chaos",
            limit=ITEMS,
            concurrency=4,
            pipeline=PipelineConfig(
                model="openai:m", base_url=server.url, timeout_s=0.5, extra=NO_WAITS
            ),
        )
        outcome = asyncio.run(arun_local(config, store=store))
        injected = sum(1 for r in server.requests if r.fault is not None)
        left = server.pending_faults()
    rows = store.results(outcome.run.id)
    lost = ITEMS - len({r.item_id for r in rows})
    tally.faults(injected=injected, lost=lost)
    assert injected >= 20 and left == 0  # every scripted fault was played
    assert lost == 0
    summary = outcome.run.summary
    assert summary is not None and summary["items"] == ITEMS and summary["missing"] == 0
    failed = [r for r in rows if r.error]
    assert all(r.error_kind in ("provider", "timeout", "schema") for r in failed), failed
    assert any(r.attempts > 1 and r.error is None for r in rows)  # retried to a success
    assert sum(1 for r in rows if r.error_kind == "schema") >= 1
