"""Edges of ``ScoreBatches`` the loopback-server tests do not reach: a score must neither be
lost nor sent twice when the SDK refuses one, when ``close`` meets an ``add``, with a batch
size of 0, or when a 207 answer (outside input) is hostile or huge."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from extraction_eval.backends.langfuse import score_batches as module
from extraction_eval.backends.langfuse.score_batches import ScoreBatches, register_target
from extraction_eval.types import Score

TRACE = "0123456789abcdef0123456789abcdef"


class FakeClient:
    """The SDK client's ``create_score`` (the fallback path), recording what it queued."""

    def __init__(self, refuse: str = "") -> None:
        self.created: list[str] = []
        self.refuse = refuse

    def create_score(self, **kwargs: Any) -> None:
        if kwargs["name"] == self.refuse:
            raise ValueError(f"cannot queue {kwargs['name']}")
        self.created.append(str(kwargs["name"]))


Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def posted() -> list[str]:
    return []


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch, posted: list[str]) -> Iterator[list[Handler]]:
    """Our batches' requests answered by the last handler in the list (no network); the
    names of the scores in answered-2xx requests go to ``posted``."""
    handlers: list[Handler] = [lambda request: httpx.Response(202, json={})]

    def answer(request: httpx.Request) -> httpx.Response:
        response = handlers[-1](request)
        if response.status_code in (200, 202):
            posted.extend(s["name"] for s in json.loads(request.content))
        return response

    client = httpx.Client(base_url="http://127.0.0.1:9", transport=httpx.MockTransport(answer))
    monkeypatch.setattr(ScoreBatches, "_http", lambda self: client)
    monkeypatch.delenv("LANGFUSE_TRACING_ENABLED", raising=False)
    monkeypatch.delenv("LANGFUSE_SAMPLE_RATE", raising=False)
    yield handlers
    client.close()


def batches_for(
    lf: FakeClient, record: list[tuple[int, str | None]], flush_at: int | None = 10
) -> ScoreBatches:
    register_target(
        lf,  # type: ignore[arg-type]  # only create_score is used
        base_url="http://127.0.0.1:9",
        public_key="pk-test",
        secret_key="sk-test",
        flush_at=flush_at,
        flush_interval=30,
        timeout_s=5,
    )
    return ScoreBatches(lf, on_unconfirmed=lambda n, e: record.append((n, e)))  # type: ignore[arg-type]


def add(batches: ScoreBatches, *names: str) -> None:
    for name in names:
        batches.add(Score(name=name, value=0.5), score_id=f"id-{name}", trace_id=TRACE)


@pytest.mark.timeout(30)
def test_a_score_the_sdk_refuses_is_reported_and_the_others_are_handed_over_once(
    wire: list[Handler], posted: list[str]
) -> None:
    wire.append(lambda request: httpx.Response(503))
    lf, record = FakeClient(refuse="bad"), []
    batches = batches_for(lf, record)
    try:
        add(batches, "s0", "bad", "s2")
        batches.flush()
        assert lf.created == ["s0", "s2"]  # each once, the one after the refused one too
        assert len(record) == 1 and record[0][0] == 1 and "'bad'" in str(record[0][1])
        wire.pop()
        add(batches, "s3")  # the sending thread still runs
        batches.flush()
        assert posted == ["s3"] and batches.handed_to_sdk == 2
    finally:
        batches.close()


@pytest.mark.timeout(30)
def test_an_add_that_meets_close_is_still_delivered(
    wire: list[Handler], posted: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lf, record = FakeClient(), []
    batches = batches_for(lf, record)
    stamp = module.score_timestamp
    calls: list[int] = []

    def closing_stamp() -> str:
        calls.append(1)
        if len(calls) == 2:  # the second add is past its closed check: close now
            batches.close()
        return stamp()

    monkeypatch.setattr(module, "score_timestamp", closing_stamp)
    add(batches, "s0", "s1")
    batches.flush()
    assert posted + lf.created == ["s0", "s1"]


@pytest.mark.timeout(30)
def test_a_batch_size_of_zero_from_the_environment_still_delivers_every_score(
    wire: list[Handler], posted: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_FLUSH_AT", "0")
    lf, record = FakeClient(), []
    batches = batches_for(lf, record, flush_at=None)
    try:
        add(batches, "s0", "s1", "s2")
        batches.flush()
        assert sorted(posted + lf.created) == ["s0", "s1", "s2"]
    finally:
        batches.close()


HUGE = '{"rejected":1,"errors":[' + ",".join(['{"message":"x"}'] * 200_000) + "]}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("body", "rejected", "messages"),
    [
        ('{"accepted":0,"rejected":1e400,"errors":[]}', 3, 0),  # inf: int() overflows
        ('{"accepted":0,"rejected":1000000,"errors":[]}', 3, 0),  # more than were sent
        ('{"accepted":3,"rejected":-5,"errors":[]}', 0, 0),
        ('{"rejected":3,"errors":' + json.dumps([{"message": "m"}] * 50) + "}", 3, 5),
        (HUGE, 3, 0),  # over the limit: not parsed, all counted as refused
    ],
)
def test_a_hostile_207_answer_is_counted_within_the_batch_and_not_resent(
    wire: list[Handler], posted: list[str], body: str, rejected: int, messages: int
) -> None:
    wire.append(lambda request: httpx.Response(207, content=body.encode()))
    lf, record = FakeClient(), []
    batches = batches_for(lf, record)
    try:
        add(batches, "s0", "s1", "s2")
        batches.flush()
        assert batches.rejected == rejected and lf.created == []  # none sent again
        said = record[0][1] if record else None
        assert (said or "").count("m") == messages if messages else said is None
    finally:
        batches.close()


@pytest.mark.timeout(30)
def test_a_failing_unconfirmed_callback_neither_resends_the_batch_nor_stops_the_sender(
    wire: list[Handler], posted: list[str]
) -> None:
    wire.append(lambda request: httpx.Response(207, json={"rejected": 1, "errors": []}))
    lf = FakeClient()

    def broken(count: int, error: str | None) -> None:
        raise RuntimeError("log full")

    batches_for(lf, []).close()  # the client's target registered
    batches = ScoreBatches(lf, on_unconfirmed=broken)  # type: ignore[arg-type]
    try:
        add(batches, "s0", "s1")
        batches.flush()
        assert lf.created == [] and batches.rejected == 1
        wire.pop()
        add(batches, "s2")
        batches.flush()
        assert posted == ["s2"]
    finally:
        batches.close()


@pytest.mark.timeout(30)
def test_one_score_over_the_body_limit_does_not_turn_the_batches_off(
    wire: list[Handler], posted: list[str]
) -> None:
    def limited(request: httpx.Request) -> httpx.Response:
        too_large = len(request.content) > module.MAX_BODY_BYTES
        return httpx.Response(413 if too_large else 202, json={})

    wire.append(limited)
    lf = FakeClient()
    batches = batches_for(lf, [])
    try:
        batches.add(Score(name="huge", value=0.5, comment="x" * 1_100_000), trace_id=TRACE)
        batches.flush()
        add(batches, "s1")
        batches.flush()
        assert lf.created == ["huge"] and posted == ["s1"] and batches.direct
    finally:
        batches.close()
