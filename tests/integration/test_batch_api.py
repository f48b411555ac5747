"""``--batch``: the OpenAI Batch API through the official client against a loopback server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
from extraction_eval.cli import app
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from tests.support.batches import polling_interrupted
from tests.support.openai_batch_server import BatchServer
from tests.support.openai_server import input_text

runner = CliRunner()


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXTRACTION_EVAL_BATCH_POLL_S", "0.01")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")


@pytest.fixture
def gold_by_text() -> dict[str, dict[str, Any]]:
    return {
        i.text: i.expected.model_dump(mode="json") for i in LocalStore().get_items(SAMPLE_DATASET)
    }


@pytest.fixture
def server(gold_by_text: dict[str, dict[str, Any]]) -> Iterator[BatchServer]:
    with BatchServer(answer=lambda body: gold_by_text[input_text(body)]) as s:
        yield s


def run_config(server: BatchServer, name: str, **kw: Any) -> RunConfig:
    return RunConfig(
        dataset=SAMPLE_DATASET,
        name=name,
        pipeline=PipelineConfig(model="openai:gpt-4o-mini", base_url=server.url),
        batch=True,
        backend="local",
        **kw,
    )


def test_run_through_the_batch_api(server: BatchServer) -> None:
    outcome = run_experiment(run_config(server, "b1", limit=10))
    # one file, one batch, polled until done; no synchronous chat call at all
    assert [c for c in server.calls if c[0] == "POST"] == [
        ("POST", "/v1/files"),
        ("POST", "/v1/batches"),
    ]
    assert not any(p.endswith("/chat/completions") for _, p in server.calls)
    (batch_id,) = server.batches
    lines = server.input_lines(batch_id)
    assert len(lines) == 10 and {x["url"] for x in lines} == {"/v1/chat/completions"}
    assert lines[0]["body"]["response_format"]["type"] == "json_schema"
    assert server.files[server.batches[batch_id].input_file_id][0] == "batch"
    assert outcome.summary.values["entity_f1"] == 1.0
    results = outcome.results
    assert len(results) == 10 and all(r.ok and not r.cache_hit for r in results)
    assert any("batch API: 10 requests, 10 answered" in w for w in outcome.warnings)
    # the ledger knows the batch, with every request it covered
    with LocalStore() as store:
        (record,) = store.batches_covering([lines[0]["custom_id"]])
        assert record.batch_id == batch_id and len(record.custom_ids) == 10
        assert record.status == "completed"


def test_batch_cost_is_half_the_synchronous_price(server: BatchServer) -> None:
    cfg = run_config(server, "priced", limit=3)
    priced = PipelineConfig(
        model="openai:gpt-4o-mini", base_url=server.url, price_in=2.0, price_out=8.0
    )
    outcome = run_experiment(RunConfig(**{**cfg.__dict__, "pipeline": priced}))
    for r in outcome.results:
        full = (r.usage.tokens_in or 0) * 2.0 / 1e6 + (r.usage.tokens_out or 0) * 8.0 / 1e6
        assert r.usage.cost_usd == pytest.approx(full * 0.5)


def test_errors_and_an_expired_batch_become_item_errors(
    gold_by_text: dict[str, dict[str, Any]],
) -> None:
    texts = list(gold_by_text)

    def fail(_: str, body: dict[str, Any]) -> tuple[int, str] | None:
        return (400, "context too long") if input_text(body) == texts[1] else None

    with BatchServer(
        answer=lambda b: gold_by_text[input_text(b)], fail=fail, expire_after=4
    ) as server:
        outcome = run_experiment(run_config(server, "partial", limit=6))
    results = {r.item_id: r for r in outcome.results}
    assert len(results) == 6  # every item a row
    errors = sorted((r.error or "") for r in results.values() if not r.ok)
    assert len(errors) == 3
    assert sum("status 400" in e and "context too long" in e for e in errors) == 1
    assert sum("expired before this request finished" in e for e in errors) == 2
    assert outcome.summary.values["error_rate"] == pytest.approx(3 / 6)


def test_interrupted_command_resumes_polling_instead_of_paying_again(
    server: BatchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import extraction_eval.llm.batch as batch_mod

    with polling_interrupted(monkeypatch, batch_mod):
        run_experiment(run_config(server, "resumable", limit=5))
    assert len(server.batches) == 1
    # the run died before its first item, so it was removed; the batch was not
    outcome = run_experiment(run_config(server, "resumable", limit=5))
    assert len(server.batches) == 1  # polled the same batch, submitted nothing new
    assert [c for c in server.calls if c == ("POST", "/v1/batches")] == [("POST", "/v1/batches")]
    assert all(r.ok for r in outcome.results) and len(outcome.results) == 5
    assert any("resumed batch_1" in w for w in outcome.warnings)


def test_large_runs_are_split_across_batches(
    server: BatchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXTRACTION_EVAL_BATCH_MAX_REQUESTS", "4")
    outcome = run_experiment(run_config(server, "split", limit=10))
    assert sorted(len(server.input_lines(b)) for b in server.batches) == [2, 4, 4]
    assert len(outcome.results) == 10 and all(r.ok for r in outcome.results)


def test_gold_build_with_batch_cli(server: BatchServer, tmp_path: Path) -> None:
    with LocalStore() as store:
        store.upload_items("small", store.get_items(SAMPLE_DATASET)[:3])
    models = "openai:gpt-4o-mini:2:1"
    result = runner.invoke(
        app,
        ["gold", "build", "--dataset", "small", "--models", models, "--base-url", server.url,
         "--batch"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    # two runs of one model: two batches (the run index makes their requests different)
    assert len(server.batches) == 2
    ids = [{x["custom_id"] for x in server.input_lines(b)} for b in server.batches]
    assert ids[0].isdisjoint(ids[1])
    assert "openai:gpt-4o-mini#1: batch API: 3 requests, 3 answered" in result.stderr
    with LocalStore() as store:
        items = store.get_items("small")
        assert all(
            i.metadata["gold"]["min_confidence"] == 1.0 for i in items if i.expected.entities
        )
    # a rebuild finds every answer in the response cache: no new batch
    again = runner.invoke(
        app,
        ["gold", "build", "--dataset", "small", "--models", models, "--base-url", server.url,
         "--batch"],
    )  # fmt: skip
    assert again.exit_code == 0, again.stderr
    assert len(server.batches) == 2


def test_batch_needs_an_openai_model() -> None:
    result = runner.invoke(app, ["run", "--model", "offline:baseline", "--batch", "--name", "x"])
    assert result.exit_code == 2
    assert "--batch needs an OpenAI, OpenAI-compatible or Anthropic model" in result.stderr
    with LocalStore() as store:
        assert store.get_run("x") is None  # refused before the run existed


def test_langfuse_mode_batch_run_links_and_scores_every_item(
    server: BatchServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from extraction_eval.backends.langfuse import LangfuseDatasetBackend
    from tests.support.langfuse_server import client_for, running_fake_langfuse

    items = LocalStore().get_items(SAMPLE_DATASET)[:4]
    with running_fake_langfuse() as lf_server:
        uploader = client_for(lf_server, "batch-upload")
        LangfuseDatasetBackend(uploader).upload_items(SAMPLE_DATASET, items)
        uploader.flush()
        public, secret = lf_server.new_keys("batch-run")
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)
        monkeypatch.setenv("LANGFUSE_BASE_URL", lf_server.base_url)
        cfg = run_config(server, "lf-batch")
        outcome = run_experiment(RunConfig(**{**cfg.__dict__, "backend": "langfuse"}))
        f1 = [s for s in lf_server.scores if s.get("name") == "entity_f1" and s.get("traceId")]
        generations = lf_server.spans_named("extract")
    # every item's trace got its scores, and its generation says what the batch answered
    assert sorted(s["traceId"] for s in f1) == sorted(r.trace_id for r in outcome.results)
    assert len(generations) == 4
    assert len(server.batches) == 1 and len(server.input_lines("batch_1")) == 4
    assert not any(p.endswith("/chat/completions") for _, p in server.calls)
    assert len(outcome.results) == 4 and all(r.ok for r in outcome.results)
    assert all(r.trace_id for r in outcome.results)
    assert outcome.summary.values["entity_f1"] == 1.0


def test_retry_errors_asks_an_errored_request_again_in_a_new_batch(
    gold_by_text: dict[str, dict[str, Any]],
) -> None:
    texts = list(gold_by_text)

    def fail(_: str, body: dict[str, Any]) -> tuple[int, str] | None:
        return (500, "server overloaded") if input_text(body) == texts[1] else None

    with BatchServer(answer=lambda b: gold_by_text[input_text(b)], fail=fail) as server:
        first = run_experiment(run_config(server, "retried", limit=3))
        assert sum(not r.ok for r in first.results) == 1
        server.fail = lambda _cid, _body: None  # the provider has recovered
        again = run_experiment(
            run_config(server, "retried", limit=3, resume=True, retry_errors=True)
        )
        # the completed batch's error line is not an answer: the request goes in a new batch
        assert len(server.batches) == 2
        assert len(server.input_lines("batch_2")) == 1
    assert {r.item_id for r in again.results} == {r.item_id for r in first.results}
    assert all(r.ok for r in again.results)
