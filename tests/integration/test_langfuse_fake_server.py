"""The loopback LangFuse itself: what the SDK sends arrives decoded, and the SDK parses what
the fake answers (experiments, cursors, encoded names). Later experiment tests rely on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

from tests.support.langfuse_server import FakeLangfuse


def test_run_experiment_spans_scores_and_experiment_reads(server: FakeLangfuse, lf: Any) -> None:
    from langfuse import Evaluation

    lf.create_dataset(name="exp/ds")
    for i in range(3):
        lf.create_dataset_item(dataset_name="exp/ds", id=f"it-{i}", input={"text": f"t{i}"})
    dataset = lf.get_dataset("exp/ds")
    assert server.requests_to("/api/public/v2/datasets/exp/ds")[0].raw_path.endswith("exp%2Fds")

    def task(*, item: Any, **_: Any) -> str:
        if item.id == "it-2":
            raise RuntimeError("boom")
        return str(item.input["text"]).upper()

    def evaluator(**_: Any) -> Evaluation:
        return Evaluation(name="ok", value=1.0)

    result = dataset.run_experiment(
        name="exp", run_name="run-1", task=task, evaluators=[evaluator], metadata={"m": "x"}
    )
    assert len(result.item_results) == 2  # the SDK drops the failed item from its result
    roots = server.spans_named("experiment-item-run")
    assert len(roots) == 3
    for span in roots:
        attrs = span["attributes"]
        assert attrs["langfuse.experiment.id"] == result.experiment_id
        assert attrs["langfuse.experiment.dataset.id"] == dataset.id
        assert attrs["langfuse.experiment.item.id"] in {"it-0", "it-1", "it-2"}
    failed = next(s for s in roots if s["attributes"]["langfuse.experiment.item.id"] == "it-2")
    assert failed["attributes"]["langfuse.observation.level"] == "ERROR"
    scored = {s["traceId"] for s in server.scores if s["name"] == "ok"}
    assert scored == {r.trace_id for r in result.item_results}

    since = datetime.now(UTC) - timedelta(hours=1)
    experiments = lf.api.experiments.list(from_start_time=since, fields="core,metadata")
    (experiment,) = experiments.data
    assert (experiment.id, experiment.name, experiment.item_count) == (
        result.experiment_id,
        "run-1",
        3,
    )
    assert experiment.dataset_id == dataset.id and experiment.metadata == {"m": "x"}
    items = lf.api.experiments.list_items(
        from_start_time=since, experiment_id=result.experiment_id, fields="core,scores"
    )
    assert sorted(i.experiment_item_id for i in items.data) == ["it-0", "it-1", "it-2"]
    levels = {i.experiment_item_id: i.level for i in items.data}
    assert str(getattr(levels["it-2"], "value", levels["it-2"])) == "ERROR"


def test_observation_cursor_pages_through_everything(server: FakeLangfuse, lf: Any) -> None:
    seeded = {server.seed_trace(input=f"doc {i}", output="{}").trace_id for i in range(5)}
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = lf.api.observations.get_many(is_root_observation=True, limit=2, cursor=cursor)
        seen.extend(o.trace_id for o in page.data)
        pages += 1
        cursor = page.meta.cursor
        if not cursor:
            break
    assert pages == 3 and sorted(seen) == sorted(seeded)


def test_score_read_back_shapes_follow_the_data_type(server: FakeLangfuse, lf: Any) -> None:
    trace = server.seed_trace(input="x", output="{}")
    lf.create_score(name="n", value=0.25, trace_id=trace.trace_id, data_type="NUMERIC")
    lf.create_score(name="b", value=True, trace_id=trace.trace_id, data_type="BOOLEAN")
    lf.create_score(name="c", value="good", trace_id=trace.trace_id, data_type="CATEGORICAL")
    lf.flush()
    (batch,) = server.requests_to("/api/public/scores", "POST")
    assert isinstance(batch.body, list) and len(batch.body) == 3  # one JSON array
    page = lf.api.scores.get_many(trace_id=trace.trace_id, fields="subject")
    values = {s.name: s.value for s in page.data}
    assert values == {"n": 0.25, "b": True, "c": "good"}
    assert {s.subject.id for s in page.data} == {trace.trace_id}


def test_score_reads_have_the_v3_shape_the_sdk_parses(server: FakeLangfuse, lf: Any) -> None:
    """Every score read (``GET /v3/scores``, experiment items' ``scores``) is a ScoreV3: the
    value itself is typed by ``dataType`` (a CATEGORICAL score's category is its ``value``, a
    BOOLEAN's is true/false) and there is no ``stringValue``. That is the v1/v2 shape
    (``GET /v2/scores``: numeric ``value`` plus ``stringValue``), which neither the product
    nor the fake reads; a v1-shaped row here would fail the SDK's own parsing."""
    import httpx
    from langfuse.api.core.pydantic_utilities import parse_obj_as
    from langfuse.api.scores.types.get_scores_v3response import GetScoresV3Response

    trace = server.seed_trace(input="x", output="{}")
    posted = {"n": (0.25, "NUMERIC"), "b": (1, "BOOLEAN"), "c": ("good", "CATEGORICAL")}
    posted["t"] = ("free text", "TEXT")
    for name, (value, data_type) in posted.items():
        lf.create_score(name=name, value=value, trace_id=trace.trace_id, data_type=data_type)
    lf.flush()
    public, secret = server.new_keys("raw-read")
    raw = httpx.get(
        f"{server.base_url}/api/public/v3/scores",
        params={"traceId": trace.trace_id},
        auth=(public, secret),
    ).json()
    rows = {row["name"]: row for row in raw["data"]}
    assert {n: (r["value"], r["dataType"]) for n, r in rows.items()} == {
        "n": (0.25, "NUMERIC"),
        "b": (True, "BOOLEAN"),
        "c": ("good", "CATEGORICAL"),
        "t": ("free text", "TEXT"),
    }
    assert not any("stringValue" in r for r in rows.values())
    parsed = parse_obj_as(GetScoresV3Response, raw)  # what lf.api.scores.get_many does
    assert {s.name: s.value for s in parsed.data} == {
        "n": 0.25,
        "b": True,
        "c": "good",
        "t": "free text",
    }
    with pytest.raises(pydantic.ValidationError):  # the v1 shape is not a v3 score
        parse_obj_as(
            GetScoresV3Response,
            {"data": [{**rows["c"], "value": 0, "stringValue": "good"}], "meta": raw["meta"]},
        )


def test_server_errors_on_score_batches_are_retried_by_the_sdk(
    server: FakeLangfuse, lf: Any
) -> None:
    trace = server.seed_trace(input="x", output="{}")
    server.fail_next("/api/public/scores", 1, status=500)
    lf.create_score(name="n", value=1.0, trace_id=trace.trace_id)
    lf.flush()
    assert [r.status for r in server.requests_to("/api/public/scores")] == [500, 202]
    assert [s["name"] for s in server.scores] == ["n"]


def test_sdk_gotcha_a_shut_down_client_poisons_its_public_key(server: FakeLangfuse) -> None:
    """SDK 5.0.4 keeps the shut-down client cached per public key: a new client with the same
    key silently drops scores (spans still go out). Hence close_client() only flushes."""
    from langfuse import Langfuse

    public, secret = server.new_keys("poisoned")
    trace = server.seed_trace(input="x", output="{}")
    Langfuse(public_key=public, secret_key=secret, base_url=server.base_url).shutdown()
    again = Langfuse(public_key=public, secret_key=secret, base_url=server.base_url)
    again.create_score(name="dropped", value=1.0, trace_id=trace.trace_id)
    again.flush()
    assert server.requests_to("/api/public/scores") == []
