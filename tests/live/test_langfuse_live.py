"""Smoke test against a real LangFuse. Skipped unless asked for explicitly:

    EXTRACTION_EVAL_LIVE=1 LANGFUSE_PUBLIC_KEY=... LANGFUSE_SECRET_KEY=... \\
    LANGFUSE_BASE_URL=https://cloud.langfuse.com .venv/bin/pytest tests/live -m live

The variables are read when this module is imported, because tests/conftest.py strips service
credentials from every test's environment. It writes only names starting with
``extraction-eval-live`` (a dataset, a prompt, a few traces), idempotently.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    LangfuseTracer,
    close_client,
    connect,
    fetch_prompt,
    push_prompt,
    read_back,
)
from extraction_eval.seeds.from_trace import seed_from_traces
from extraction_eval.types import DatasetItem, Entity, Extraction
from tests.support.live_langfuse import BASE_URL as _BASE_URL
from tests.support.live_langfuse import PUBLIC_KEY as _PUBLIC_KEY
from tests.support.live_langfuse import SECRET_KEY as _SECRET_KEY
from tests.support.live_langfuse import api_get as _get
from tests.support.live_langfuse import live_marks

pytestmark = live_marks(300)

NAME = "extraction-eval-live-smoke"
OUTPUT = {"entities": [{"name": "Ada Lovelace", "type": "person"}], "relationships": []}


@pytest.fixture(scope="module")
def lf() -> Iterator[Any]:
    # a self-hosted server can be slow (first requests compile routes in dev mode): the SDK
    # keeps this client (and its timeout) for every later connect with these keys
    client = connect(
        public_key=_PUBLIC_KEY, secret_key=_SECRET_KEY, base_url=_BASE_URL, timeout_s=60
    )
    yield client
    # flush, never shutdown(): the SDK keeps one client per key for the whole process, and a
    # shut-down one silently drops every later score of that key (tests/live/ run together)
    close_client(client)


def test_dataset_upload_is_idempotent_and_round_trips(lf: Any) -> None:
    items = [
        DatasetItem(
            id="live-1",
            text="Ada Lovelace wrote the first program.",
            expected=Extraction(entities=[Entity(name="Ada Lovelace", type="person")]),
        ),
        DatasetItem(id="live-2", text="Nothing to see."),
    ]
    backend = LangfuseDatasetBackend(lf)
    backend.upload_items(NAME, items, description="extraction-eval live smoke test")
    again = backend.upload_items(NAME, items)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 2)
    # other tests (and earlier sessions) may have added items to this dataset: compare ours
    ours = {i.id for i in items}
    assert [i for i in backend.get_items(NAME) if i.id in ours] == items


def test_prompt_push_fetch_trace_score_read_back_and_seed(lf: Any) -> None:
    version = push_prompt(lf, NAME, label="staging")
    prompt = fetch_prompt(lf, NAME, label="staging", cache_ttl_seconds=0)
    assert (prompt.source, prompt.version) == ("langfuse", version)

    from langfuse import propagate_attributes

    marker = uuid.uuid4().hex[:8]
    with (
        propagate_attributes(trace_name=f"{NAME}-{marker}", tags=["extraction-eval-live"]),
        lf.start_as_current_observation(
            name="handle-request", input={"text": "Ada Lovelace wrote the first program."}
        ) as root,
    ):
        with LangfuseTracer(lf).generation(
            name="extract",
            model="live-smoke",
            model_parameters={"temperature": 0.0},
            input=[{"role": "user", "content": "Ada Lovelace wrote the first program."}],
            prompt=prompt,
        ) as generation:
            generation.update(
                output=OUTPUT,
                usage_details={"input": 10, "output": 5},
                cost_details={"input": 1e-5, "output": 2e-5},
            )
        root.update(output=OUTPUT)
        trace_id = root.trace_id
    lf.create_score(name="entity_f1", value=1.0, trace_id=trace_id, data_type="NUMERIC")
    lf.flush()

    report = read_back(lf, trace_ids=[trace_id], score_names=["entity_f1"], timeout_s=180, poll_s=5)
    assert report.ok, report.lines()
    # the cost we compute reaches the generation as LangFuse's own cost details
    observations = _get("v2/observations", traceId=trace_id, fields="core,basic,usage")["data"]
    generation_cost = [o.get("costDetails") for o in observations if o.get("name") == "extract"]
    assert generation_cost and generation_cost[0]["input"] == pytest.approx(1e-5)

    seeded = seed_from_traces(lf, dataset=f"{NAME}-seeded", trace_ids=[trace_id])
    assert seeded.skipped == () and len(seeded.items) == 1
    items = {i.id: i for i in LangfuseDatasetBackend(lf).get_items(f"{NAME}-seeded")}
    assert items[f"from-{trace_id}"].source_trace_id == trace_id


def test_run_experiment_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """The main job against a real LangFuse: the bundled sample, the offline baseline."""
    from extraction_eval.datasets.bundled import sample_items
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment

    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", _PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", _SECRET_KEY)
    monkeypatch.setenv("LANGFUSE_BASE_URL", _BASE_URL)
    dataset = f"{NAME}-run"
    client = connect(public_key=_PUBLIC_KEY, secret_key=_SECRET_KEY, base_url=_BASE_URL)
    LangfuseDatasetBackend(client).upload_items(dataset, sample_items()[:5])
    outcome = run_experiment(
        RunConfig(dataset=dataset, name=f"live-{uuid.uuid4().hex[:8]}", backend="langfuse")
    )
    assert outcome.summary.items == 5 and outcome.summary.missing == 0
    assert outcome.experiment_url  # the read-back above checked every score name arrived
    for result in outcome.results:  # each result links to its trace in this LangFuse
        assert result.trace_id and result.trace_url
        assert result.trace_url.startswith(_BASE_URL.rstrip("/"))
        assert result.trace_url.endswith(result.trace_id)
    # failure categories are CATEGORICAL scores the server stored as such
    tagged = next(r for r in outcome.results if r.categories)
    # v3 (what the product and the loopback fake read): the category is the value itself
    v3 = _get("v3/scores", traceId=tagged.trace_id, name="failure_category")["data"]
    assert {s["value"] for s in v3} == set(tagged.categories)
    assert {s["dataType"] for s in v3} == {"CATEGORICAL"}
    # the experiment as LangFuse lists it, and its items: one per result, each on its trace
    experiment_id = outcome.run.experiment_id
    since = outcome.run.started_at or "2000-01-01T00:00:00Z"
    (listed,) = _get("experiments", fromStartTime="2000-01-01T00:00:00Z", id=experiment_id)["data"]
    assert listed["name"] == outcome.run.name and listed["itemCount"] == 5
    rows = _get(
        "experiment-items", fromStartTime=since[:10] + "T00:00:00Z", experimentId=experiment_id,
        fields="core,io", limit="100",
    )["data"]  # fmt: skip
    assert {r["traceId"] for r in rows} == {r.trace_id for r in outcome.results}
    for row in rows:  # input and output are JSON objects (as strings on this endpoint)
        assert isinstance(json.loads(row["input"]), dict)
        assert isinstance(json.loads(row["output"]), dict)
        assert row["level"] != "ERROR"  # the offline baseline fails no item


def _use_live(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", _PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", _SECRET_KEY)
    monkeypatch.setenv("LANGFUSE_BASE_URL", _BASE_URL)
    return connect(public_key=_PUBLIC_KEY, secret_key=_SECRET_KEY, base_url=_BASE_URL)


def test_shards_finalize_and_paired_compare(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Two shards write one experiment; finalize posts its run scores once; compare reads the
    gold from this LangFuse."""
    from pathlib import Path

    from extraction_eval.analysis.compare.runs import CompareOptions, compare_runs
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.datasets.bundled import sample_items
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.partition import Shard
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.experiments.shards import finalize_run, merge_runs

    client = _use_live(monkeypatch)
    dataset = f"{NAME}-shards"
    LangfuseDatasetBackend(client).upload_items(dataset, sample_items()[:8])
    name = f"live-shards-{uuid.uuid4().hex[:8]}"
    stores = [LocalStore(Path(tmp_path) / f"s{i}.db") for i in (1, 2)]
    for i, store in enumerate(stores, start=1):
        run_experiment(
            RunConfig(dataset=dataset, name=name, backend="langfuse", shard=Shard(i, 2)),
            store=store,
        )
    merged = merge_runs(stores[0], name, [Path(tmp_path) / "s2.db"])
    assert merged.items == 8
    outcome = finalize_run(stores[0], name)  # posts and reads back the run scores
    assert outcome.summary.items == 8 and outcome.summary.missing == 0
    run = stores[0].get_run(name)
    assert run is not None and run.experiment_id
    # every item's trace in one experiment: a second, unsharded run compares item by item
    other = f"live-whole-{uuid.uuid4().hex[:8]}"
    run_experiment(RunConfig(dataset=dataset, name=other, backend="langfuse"), store=stores[0])
    a, b = stores[0].get_run(name), stores[0].get_run(other)
    assert a is not None and b is not None
    result = compare_runs(a, b, store=stores[0], options=CompareOptions(resamples=200))
    data = result.to_json()
    assert data["items"] == 8
    assert data["metrics"]["entity_f1"]["delta"] == 0.0  # the same pipeline on the same items


def test_gold_build_writes_a_langfuse_dataset_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.datasets.bundled import sample_items
    from extraction_eval.llm.fake import register_fake, unregister_fake
    from extraction_eval.seeds.ensemble.build import build_gold
    from extraction_eval.seeds.ensemble.config import GoldConfig, parse_models

    client = _use_live(monkeypatch)
    backend = LangfuseDatasetBackend(client)
    dataset = f"{NAME}-gold-{uuid.uuid4().hex[:6]}"
    items = sample_items()[:3]
    backend.upload_items(dataset, items)
    answers = {i.id: i.expected.model_dump(mode="json") for i in items}
    register_fake("live-a", {"items": answers})
    register_fake("live-b", {"items": answers})
    try:
        build = build_gold(
            GoldConfig(dataset=dataset, models=parse_models(["fake:live-a,fake:live-b"])),
            LocalStore(),
            backend,
        )
    finally:
        unregister_fake()
    assert build.upload is not None and build.upload.updated == 3
    stored = {i.id: i for i in backend.get_items(dataset)}
    for item in build.items:
        assert stored[item.id].metadata["gold"] == item.metadata["gold"]
        assert stored[item.id].expected == item.expected


def test_batch_run_in_langfuse_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """--batch against a loopback Batch API, traced and scored in this LangFuse."""
    from extraction_eval.datasets.bundled import sample_items
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig
    from tests.support.openai_batch_server import BatchServer
    from tests.support.openai_server import input_text

    client = _use_live(monkeypatch)
    monkeypatch.setenv("EXTRACTION_EVAL_BATCH_POLL_S", "0.05")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    dataset = f"{NAME}-batch"
    items = sample_items()[:4]
    LangfuseDatasetBackend(client).upload_items(dataset, items)
    gold = {i.text: i.expected.model_dump(mode="json") for i in items}
    with BatchServer(answer=lambda body: gold[input_text(body)]) as server:
        outcome = run_experiment(
            RunConfig(
                dataset=dataset,
                name=f"live-batch-{uuid.uuid4().hex[:8]}",
                pipeline=PipelineConfig(model="openai:gpt-4o-mini", base_url=server.url),
                backend="langfuse",
                batch=True,
            )
        )
    assert len(server.batches) == 1
    assert outcome.summary.items == 4 and outcome.summary.missing == 0  # read back: all arrived
    assert outcome.summary.values["entity_f1"] == 1.0
    assert all(r.trace_url for r in outcome.results)


def test_matrix_cells_are_experiments_on_one_dataset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2-cell matrix (scripted models) in LangFuse mode: one experiment per cell, each with
    its run scores, on the same dataset version; then a budget-limited run stops early."""
    from extraction_eval.datasets.bundled import sample_items
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.matrix import run_matrix
    from extraction_eval.experiments.matrix_config import MatrixConfig
    from extraction_eval.llm.fake import register_fake, unregister_fake

    client = _use_live(monkeypatch)
    dataset = f"{NAME}-matrix"
    items = sample_items()[:4]
    LangfuseDatasetBackend(client).upload_items(dataset, items)
    answers = {i.id: i.expected.model_dump(mode="json") for i in items}
    register_fake("live-mx-a", {"items": answers})
    register_fake("live-mx-b", {"default": {"entities": [], "relationships": []}})
    prefix = f"live-mx-{uuid.uuid4().hex[:6]}"
    try:
        outcome = run_matrix(
            MatrixConfig(
                models=("fake:live-mx-a", "fake:live-mx-b"),
                name=prefix,
                base=RunConfig(dataset=dataset, backend="langfuse", concurrency=4),
            )
        )
    finally:
        unregister_fake()
    assert outcome.problems == []  # every cell's traces and scores read back
    assert len(outcome.cells) == 2
    experiments = {c.run.experiment_id for c in outcome.cells}
    assert len(experiments) == 2 and None not in experiments
    assert len({c.run.dataset_version for c in outcome.cells}) == 1
    f1 = {c.cell.model: c.run.summary["values"]["entity_f1"] for c in outcome.cells}
    assert f1 == {"fake:live-mx-a": 1.0, "fake:live-mx-b": 0.0}


def test_a_failed_item_is_one_error_observation_with_its_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LangFuse's error count of a run (ERROR observations) equals ours: exactly one per
    failed item, and the failed item's trace still carries its input as an object."""
    from extraction_eval.datasets.bundled import sample_items
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig

    client = _use_live(monkeypatch)
    dataset = f"{NAME}-errors"
    items = sample_items()[:4]
    LangfuseDatasetBackend(client).upload_items(dataset, items)
    monkeypatch.setenv("E2E_FAIL", items[1].id)
    outcome = run_experiment(
        RunConfig(
            dataset=dataset,
            name=f"live-errors-{uuid.uuid4().hex[:8]}",
            backend="langfuse",
            pipeline=PipelineConfig(pipeline="tests.support.pipelines:first_entity"),
        )
    )
    assert outcome.summary.items == 4 and outcome.summary.errors == 1
    levels: dict[str, list[str]] = {}
    for result in outcome.results:
        observations = _get("v2/observations", traceId=result.trace_id, fields="core,basic")["data"]
        levels[result.item_id] = [o["level"] for o in observations]
    errors = {item_id: lv.count("ERROR") for item_id, lv in levels.items()}
    assert errors == {i.id: int(i.id == items[1].id) for i in items}, levels
    since = outcome.run.started_at or "2000-01-01T00:00:00Z"
    rows = _get(
        "experiment-items", fromStartTime=since[:10] + "T00:00:00Z",
        experimentId=outcome.run.experiment_id, fields="core,io", limit="100",
    )["data"]  # fmt: skip
    trace_id = next(r.trace_id for r in outcome.results if r.item_id == items[1].id)
    failed = next(r for r in rows if r["traceId"] == trace_id)
    assert json.loads(failed["input"])["text"] == items[1].text


def test_mention_clusters_round_trip_and_score_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset whose gold lists mentions keeps them in LangFuse (expected output), and a run
    naming entities by those mentions scores 1.0 with ``via alias`` in the stored comments."""
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig
    from extraction_eval.types import Mention

    client = _use_live(monkeypatch)
    dataset = f"{NAME}-aliases"
    ada = Entity(
        name="Ada Lovelace",
        type="PER",
        mentions=[
            Mention(name="Ada Lovelace", start=0, end=12),
            Mention(name="Countess of Lovelace"),
        ],
    )
    item = DatasetItem(
        id="al-1",
        text="Ada Lovelace wrote notes. The Countess of Lovelace lived in London.",
        expected=Extraction(entities=[ada, Entity(name="London", type="LOC")]),
    )
    backend = LangfuseDatasetBackend(client)
    backend.upload_items(dataset, [item])
    (read,) = [i for i in backend.get_items(dataset) if i.id == "al-1"]
    assert read.expected.entities[0].mentions[1].name == "Countess of Lovelace"
    outcome = run_experiment(
        RunConfig(
            dataset=dataset,
            name=f"live-al-{uuid.uuid4().hex[:8]}",
            backend="langfuse",
            pipeline=PipelineConfig(pipeline="tests.support.pipelines:by_mention"),
        )
    )
    (result,) = outcome.results
    assert result.trace_id
    # v3 returns a score's comment only with fields=details
    v3 = _get("v3/scores", traceId=result.trace_id, name="entity_f1", fields="details")["data"]
    assert [s["value"] for s in v3] == [1.0]
    assert "via alias=1" in (v3[0].get("comment") or "")  # Ada by "Countess of Lovelace"
