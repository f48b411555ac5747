"""LangFuse mode posts its item scores in large batches (fewer requests from the SDK's
background thread, which shares the GIL with the run's event loop); LANGFUSE_FLUSH_AT wins."""

from __future__ import annotations

from typing import Any

import pytest

from extraction_eval.backends.langfuse import close_client, connect
from extraction_eval.backends.langfuse.score_batches import ScoreBatches
from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.langfuse_mode import RUN_FLUSH_AT
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import Score
from tests.integration.test_langfuse_experiment import DATASET, PIPE, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse, client_for


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


# --- our batches (backends/langfuse/score_batches.py): the SDK's queue only as the fallback ---

TRACE = "0123456789abcdef0123456789abcdef"
OBSERVATION = "0123456789abcdef"


def batches_on(
    server: FakeLangfuse, label: str, flush_at: int, *, record: list[tuple[int, str | None]]
) -> tuple[Any, ScoreBatches]:
    """A client from ``connect`` on ``server`` (fresh keys), and a ``ScoreBatches`` on it
    whose unconfirmed counts go to ``record``. A long flush interval: batches by size only."""
    public, secret = server.new_keys(label)
    lf = connect(
        public_key=public,
        secret_key=secret,
        base_url=server.base_url,
        flush_at=flush_at,
        flush_interval=30,
        timeout_s=5,
    )
    return lf, ScoreBatches(lf, on_unconfirmed=lambda n, e: record.append((n, e)))


def scores(n: int, prefix: str = "s") -> list[Score]:
    kinds: list[Score] = [
        Score(name="entity_f1", value=0.5),
        Score(name="extraction_error", value=True, data_type="BOOLEAN"),
        Score(name="failure_category", value="wrong_type", data_type="CATEGORICAL", comment="c"),
    ]
    return [kinds[i % 3].model_copy(update={"name": f"{prefix}{i}"}) for i in range(n)]


def score_posts(server: FakeLangfuse) -> list[Any]:
    return server.requests_to("/api/public/scores", "POST")


def from_sdk(request: Any) -> bool:
    """The SDK's generated REST client marks its requests (ours do not)."""
    return "x-fern-language" in request.headers


def test_n_scores_arrive_in_ceil_n_over_batch_requests_as_the_sdk_would_send_them(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_FLUSH_AT", raising=False)
    record: list[tuple[int, str | None]] = []
    lf, batches = batches_on(server, "ceil", 10, record=record)
    try:
        for i, score in enumerate(scores(25)):
            batches.add(score, score_id=f"id-{i}", trace_id=TRACE, observation_id=OBSERVATION)
        batches.flush()
        posts = score_posts(server)
        assert [len(r.body) for r in posts] == [10, 10, 5]  # ceil(25 / 10) requests
        assert not any(from_sdk(r) for r in posts) and batches.handed_to_sdk == 0
        assert {s["id"] for s in server.scores} == {f"id-{i}" for i in range(25)}
        ours = {s["name"]: s for s in server.posted_scores}
        # the very body the SDK sends for the same score (its own path, another client)
        sdk_lf = client_for(server, "ceil-sdk")
        for i, score in enumerate(scores(3, prefix="sdk")):
            sdk_lf.create_score(
                name=score.name, value=score.value, data_type=score.data_type,
                comment=score.comment, trace_id=TRACE, observation_id=OBSERVATION,
                score_id=f"sdk-{i}",
            )  # fmt: skip
        sdk_lf.flush()
        sdk_lf.shutdown()
        theirs = {s["name"]: s for s in server.posted_scores if s["name"].startswith("sdk")}
        for i in range(3):
            mine, sdk = ours[f"s{i}"], theirs[f"sdk{i}"]
            assert set(mine) == set(sdk)
            assert {k: v for k, v in mine.items() if k not in ("id", "name", "timestamp")} == {
                k: v for k, v in sdk.items() if k not in ("id", "name", "timestamp")
            }
            assert mine["timestamp"].endswith("Z") and sdk["timestamp"].endswith("Z")
        assert record == []
    finally:
        batches.close()
        close_client(lf)


def test_a_207_partial_reject_is_counted_and_reported_and_not_resent(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_FLUSH_AT", raising=False)
    record: list[tuple[int, str | None]] = []
    lf, batches = batches_on(server, "partial", 10, record=record)
    server.reject_scores(None, names=["s1", "s4"])
    try:
        for score in scores(6):
            batches.add(score, trace_id=TRACE, observation_id=OBSERVATION)
        batches.flush()
        lf.flush()
        assert batches.rejected == 2 and batches.handed_to_sdk == 0
        assert len(record) == 1 and record[0][0] == 2 and "s1" in str(record[0][1])
        assert len(score_posts(server)) == 1  # a rejected score is not retried
        assert sorted(s["name"] for s in server.scores) == ["s0", "s2", "s3", "s5"]
    finally:
        batches.close()
        close_client(lf)


def test_a_failed_batch_goes_to_the_sdks_queue_with_its_ids_and_nothing_is_lost(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_FLUSH_AT", raising=False)
    record: list[tuple[int, str | None]] = []
    lf, batches = batches_on(server, "failed", 5, record=record)
    server.fail_next("/api/public/scores", status=503, method="POST")
    try:
        for i, score in enumerate(scores(10)):
            batches.add(score, score_id=f"id-{i}", trace_id=TRACE)
        batches.flush()
        lf.flush()
        assert {s["id"] for s in server.scores} == {f"id-{i}" for i in range(10)}
        assert batches.handed_to_sdk == 5 and batches.direct  # a 5xx is not for good
        posts = score_posts(server)
        assert posts[0].status == 503 and not from_sdk(posts[0])
        resent = [r for r in posts if from_sdk(r)]
        assert [s["id"] for r in resent for s in r.body] == [f"id-{i}" for i in range(5)]
        assert sum(len(r.body) for r in posts if not from_sdk(r) and r.status == 202) == 5
    finally:
        batches.close()
        close_client(lf)


def test_after_a_4xx_answer_every_later_score_takes_the_sdks_path(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_FLUSH_AT", raising=False)
    record: list[tuple[int, str | None]] = []
    lf, batches = batches_on(server, "refused", 4, record=record)
    server.fail_next("/api/public/scores", status=400, method="POST")
    try:
        for score in scores(4):
            batches.add(score, trace_id=TRACE)
        batches.flush()
        assert not batches.direct
        for score in scores(3, prefix="later"):
            batches.add(score, trace_id=TRACE)
        batches.flush()
        lf.flush()
        assert len(server.scores) == 7
        posts = score_posts(server)
        assert [from_sdk(r) for r in posts][:1] == [False]
        assert all(from_sdk(r) for r in posts[1:])
    finally:
        batches.close()
        close_client(lf)


def test_with_tracing_off_scores_take_the_sdks_path_which_sends_nothing(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_TRACING_ENABLED", "false")
    record: list[tuple[int, str | None]] = []
    lf, batches = batches_on(server, "off", 4, record=record)
    try:
        assert not batches.direct
        for score in scores(5):
            batches.add(score, trace_id=TRACE)
        batches.flush()
        lf.flush()
        assert score_posts(server) == []
    finally:
        batches.close()
        close_client(lf)


def test_a_runs_scores_go_in_our_batches_not_through_the_sdks_queue(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANGFUSE_FLUSH_AT", raising=False)
    items = LocalStore().get_items(DATASET)[:6]
    upload(server, items)
    use_langfuse(server, monkeypatch, "direct")
    run_experiment(RunConfig(dataset=DATASET, name="d1", pipeline=PipelineConfig(pipeline=PIPE)))
    posts = score_posts(server)
    assert posts and not any(from_sdk(r) for r in posts)
    assert sum(len(r.body) for r in posts) == len(server.scores) > 6 * 6
