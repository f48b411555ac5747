"""LangFuse mode end to end: the real SDK's ``run_experiment`` against the loopback fake server.

Every assertion is on what the server *received* (decoded OTLP spans, posted and stored
scores, requests) or on the local mirror, never on mocks of our own code.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from extraction_eval import __version__
from extraction_eval.backends.base import item_input
from extraction_eval.backends.langfuse import (
    VERIFY_TIMEOUT_ENV,
    close_client,
    langfuse_item_id,
    push_prompt,
)
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.errors import BackendError
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.langfuse_mode import VerificationError
from extraction_eval.experiments.run import run_experiment
from extraction_eval.llm.fake import register_fake, unregister_fake
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import DatasetItem
from tests.support import pipelines
from tests.support.langfuse_env import upload as upload_to
from tests.support.langfuse_env import use_langfuse
from tests.support.langfuse_server import FakeLangfuse, client_for

REPO = Path(__file__).resolve().parents[2]
DATASET = "extraction-eval"
PIPE = "tests.support.pipelines:first_entity"
HEADLINE = ("entity_precision", "entity_recall", "entity_f1", "relationship_accuracy")
ITEM_SCORES = (*HEADLINE, "type_accuracy", "extraction_error")
RUN_SCORES = (
    *("entity_f1", "entity_precision", "entity_recall", "entity_f1_ci_low", "entity_f1_ci_high"),
    *("error_count", "items", "schema_failure_count"),
)

cli = CliRunner()


# --- fixtures and helpers -------------------------------------------------------------------


@pytest.fixture
def items() -> list[DatasetItem]:
    return LocalStore().get_items(DATASET)[:6]


@pytest.fixture(autouse=True)
def _reset_pipeline_hooks() -> Iterator[None]:
    pipelines.CALL_TIMES.clear()
    pipelines.HOOK = None
    yield
    pipelines.HOOK = None


def upload(server: FakeLangfuse, items: list[DatasetItem], dataset: str = DATASET) -> str:
    return upload_to(server, items, dataset)


def expected_experiment_id(server: FakeLangfuse, dataset_id: str, run_name: str) -> str:
    """LangFuse's stable derivation (SDK ``_create_experiment_id``, server byte for byte)."""
    payload = json.dumps(
        ["langfuse-experiment-v1", server.project_id, dataset_id, run_name],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def run_cli(*args: str) -> Result:
    return cli.invoke(_run_app, list(args))


def item_runs(server: FakeLangfuse, experiment_id: str | None = None) -> dict[str, dict[str, Any]]:
    """The root span of every item trace (optionally of one experiment), by trace id."""
    return {
        s["trace_id"]: s
        for s in server.spans_named("experiment-item-run")
        if experiment_id is None or s["attributes"]["langfuse.experiment.id"] == experiment_id
    }


def trace_of(server: FakeLangfuse, item_id: str, experiment_id: str) -> str:
    """The (latest) trace of our item ``item_id`` in the experiment."""
    lf_id = langfuse_item_id(DATASET, item_id)
    traces = [
        t
        for t, s in item_runs(server, experiment_id).items()
        if s["attributes"]["langfuse.experiment.item.id"] == lf_id
    ]
    assert traces, f"no trace for {item_id}"
    return traces[-1]


def span_in(server: FakeLangfuse, trace_id: str, name: str) -> dict[str, Any]:
    (span,) = [s for s in server.spans if s["trace_id"] == trace_id and s["name"] == name]
    return span


def trace_scores(server: FakeLangfuse, trace_id: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in server.scores if s.get("traceId") == trace_id}


def run_scores(server: FakeLangfuse, experiment_id: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in server.scores if s.get("datasetRunId") == experiment_id}


def error_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def mirror(name: str) -> tuple[Any, list[Any]]:
    store = LocalStore()
    run = store.get_run(name, DATASET)
    assert run is not None
    return run, store.results(run.id)


# --- 1, 2, 10: linking, item and run scores, metadata, URL (CLI) ----------------------------


def test_cli_run_links_every_item_scores_every_trace_and_prints_the_url(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    archived = items[0].model_copy(update={"id": "archived-1", "status": "ARCHIVED"})
    dataset_id = upload(server, [*items, archived])
    use_langfuse(server, monkeypatch, "link")
    result = run_cli(
        "--dataset", DATASET, "--name", "baseline-v1", "--model", "offline:baseline",
        "--temperature", "0",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr

    run, results = mirror("baseline-v1")
    experiment_id = run.experiment_id
    assert experiment_id == expected_experiment_id(server, dataset_id, "baseline-v1")
    assert run.backend == "langfuse" and run.status == "finished"

    # every item has exactly one trace, linked to its dataset item in this experiment
    roots = item_runs(server, experiment_id)
    assert len(roots) == len(items)
    linked = {s["attributes"]["langfuse.experiment.item.id"] for s in roots.values()}
    assert linked == {langfuse_item_id(DATASET, i.id) for i in items}  # archived: not run
    active = [i for i in server.dataset_items(DATASET) if i["status"] == "ACTIVE"]
    assert linked == {i["id"] for i in active}
    for span in server.spans:  # every span of every item trace, children included
        if span["trace_id"] in roots:
            attrs = span["attributes"]
            assert attrs["langfuse.experiment.id"] == experiment_id, span["name"]
            assert attrs["langfuse.experiment.dataset.id"] == dataset_id, span["name"]
            assert attrs["langfuse.experiment.item.id"] in linked
            assert attrs["langfuse.experiment.name"] == "baseline-v1"

    # the mirror knows each item's trace, and each trace carries that item's scores
    by_item = {r.item_id: r for r in results}
    assert set(by_item) == {i.id for i in items}
    for item in items:
        trace_id = trace_of(server, item.id, experiment_id)
        assert by_item[item.id].trace_id == trace_id
        scores = trace_scores(server, trace_id)
        assert set(ITEM_SCORES) <= set(scores)
        assert set(scores) == {s.name for s in by_item[item.id].scores}
        task_span = span_in(server, trace_id, "experiment-item-task")
        local_types = {s.name: s.data_type for s in by_item[item.id].scores}
        for name, score in scores.items():
            assert score["observationId"] == task_span["span_id"], name
            assert score["dataType"] == local_types[name], name
        assert {scores[n]["dataType"] for n in HEADLINE} == {"NUMERIC"}
        # each score with its LangFuse score config (created for the project)
        configs = server.score_configs
        for name in (*HEADLINE, "type_accuracy", "extraction_error"):
            config = configs[scores[name]["configId"]]
            assert config["name"] == name, name
        assert configs[scores["entity_f1"]["configId"]]["maxValue"] == 1
        assert configs[scores["extraction_error"]["configId"]]["dataType"] == "BOOLEAN"
        assert scores["extraction_error"]["dataType"] == "BOOLEAN"
        assert scores["extraction_error"]["value"] == 0
        local = {s.name: s.value for s in by_item[item.id].scores}
        assert scores["entity_f1"]["value"] == pytest.approx(local["entity_f1"])

    # run-level scores on the experiment, equal to the mirror's
    on_run = run_scores(server, experiment_id)
    assert set(RUN_SCORES) <= set(on_run)
    stored = {s.name: s.value for s in LocalStore().run_scores(run.id)}
    for name in on_run:
        assert on_run[name]["value"] == pytest.approx(stored[name]), name
    assert on_run["error_count"]["value"] == 0 and on_run["items"]["value"] == len(items)

    # score configs: a 0-1 ratio per ratio, extraction_error boolean, failure_category
    # categorical; created once: a second run finds them and creates none
    configs = {c["name"]: c for c in server.score_configs.values()}
    assert (configs["entity_recall"]["minValue"], configs["entity_recall"]["maxValue"]) == (0, 1)
    assert configs["failure_category"]["dataType"] == "CATEGORICAL"
    assert {"missed", "spurious"} <= {c["label"] for c in configs["failure_category"]["categories"]}
    count = len(server.score_configs)
    again = run_cli("--dataset", DATASET, "--name", "baseline-v2", "--model", "offline:baseline")
    assert again.exit_code == 0, again.stderr
    assert len(server.score_configs) == count
    assert len(server.requests_to("/api/public/score-configs", "POST")) == count

    # parameters recorded on the experiment
    meta = json.loads(next(iter(roots.values()))["attributes"]["langfuse.experiment.metadata"])
    assert meta["provider"] == "offline" and meta["model"] == "offline:baseline"
    assert meta["temperature"] == "0.0" and meta["prompt_name"] == "extraction"
    assert meta["prompt_source"] == "bundled" and meta["extraction_eval_version"] == __version__

    # verified by reading back, and the URL printed
    assert server.requests_to("/api/public/v3/scores", "GET")
    url = f"{server.base_url}/project/{server.project_id}/experiments/results?baseline="
    assert f"experiment: {url}{experiment_id}" in result.stdout


def test_python_api_same_run_name_on_same_dataset_is_the_same_experiment(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    items: list[DatasetItem],
    tmp_path: Path,
) -> None:
    dataset_id = upload(server, items[:3])
    use_langfuse(server, monkeypatch, "same-name")
    config = RunConfig(dataset=DATASET, name="nightly", pipeline=PipelineConfig(pipeline=PIPE))
    first = run_experiment(config)
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "another-machine"))
    second = run_experiment(config)  # a fresh mirror: a new run, same name
    other = run_experiment(RunConfig(dataset=DATASET, name="other", pipeline=config.pipeline))

    expected = expected_experiment_id(server, dataset_id, "nightly")
    assert first.run.experiment_id == second.run.experiment_id == expected
    assert other.run.experiment_id not in (None, expected)
    assert first.experiment_url and first.experiment_url.endswith(f"baseline={expected}")
    assert len(item_runs(server, expected)) == 6  # two runs x three items, one experiment
    assert len(item_runs(server, other.run.experiment_id)) == 3


# --- 3: LLM pipeline: generation, model parameters, usage, prompt by label ------------------


@pytest.fixture
def fake_model() -> Iterator[str]:
    """``fake:lf-exp``: one entity for every item, except an unparseable answer for
    sample-003 (a schema failure)."""
    answer = {"entities": [{"name": "Mara Velloso", "type": "person"}], "relationships": []}
    usage = {"input": 11, "output": 7}
    script = {
        "default": {"json": answer, "usage": usage},
        "items": {"sample-003": {"text": "{not json", "usage": usage}},
    }
    register_fake("lf-exp", script)
    yield "fake:lf-exp"
    unregister_fake("lf-exp")


def test_llm_pipeline_traces_a_generation_linked_to_the_prompt_fetched_by_label(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    items: list[DatasetItem],
    fake_model: str,
) -> None:
    upload(server, items[:3])
    helper = client_for(server, "push")
    assert push_prompt(helper, "extraction", label="staging") == 1
    close_client(helper)
    use_langfuse(server, monkeypatch, "llm")
    result = run_cli(
        "--name", "llm-1", "--model", fake_model, "--prompt-label", "staging",
        "--temperature", "0",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    run, _ = mirror("llm-1")
    roots = item_runs(server, run.experiment_id)
    generations = [s for s in server.spans if s["name"] == "extract"]
    assert len(generations) == 3
    assert items[2].id == "sample-003"  # the fake's schema failure
    broken = trace_of(server, items[2].id, run.experiment_id)
    for gen in generations:
        attrs = gen["attributes"]
        failed = gen["trace_id"] == broken
        # the failed call is a WARNING: the item's one ERROR is its task span
        assert attrs.get("langfuse.observation.level") == ("WARNING" if failed else None)
        levels = [
            (s["name"], s["attributes"].get("langfuse.observation.level"))
            for s in server.spans
            if s["trace_id"] == gen["trace_id"]
        ]
        errors = [name for name, level in levels if level == "ERROR"]
        assert errors == (["experiment-item-task"] if failed else [])
        assert attrs["langfuse.observation.type"] == "generation"
        assert attrs["langfuse.observation.model.name"] == "lf-exp"
        assert json.loads(attrs["langfuse.observation.model.parameters"]) == {"temperature": 0.0}
        assert json.loads(attrs["langfuse.observation.usage_details"]) == {"input": 11, "output": 7}
        assert attrs["langfuse.observation.prompt.name"] == "extraction"
        assert attrs["langfuse.observation.prompt.version"] == 1
        # inside the item's trace, under the SDK's task span, linked to the experiment
        assert gen["trace_id"] in roots
        task = span_in(server, gen["trace_id"], "experiment-item-task")
        assert gen["parent_span_id"] == task["span_id"]
        assert attrs["langfuse.experiment.id"] == run.experiment_id
    meta = json.loads(next(iter(roots.values()))["attributes"]["langfuse.experiment.metadata"])
    assert (meta["provider"], meta["model"], meta["temperature"]) == ("fake", fake_model, "0.0")
    assert (meta["prompt_name"], meta["prompt_label"]) == ("extraction", "staging")
    assert (meta["prompt_version"], meta["prompt_source"]) == ("1", "langfuse")
    error = trace_scores(server, broken)["extraction_error"]
    assert error["value"] == 1 and "SchemaFailure" in error["comment"]
    on_run = run_scores(server, run.experiment_id)
    assert on_run["schema_failure_count"]["value"] == 1 and on_run["error_count"]["value"] == 1
    assert run.config["prompt"] == {
        "name": "extraction",
        "label": "staging",
        "version": 1,
        "source": "langfuse",
    }


def test_missing_prompt_label_falls_back_to_the_local_template_visibly(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    items: list[DatasetItem],
    fake_model: str,
) -> None:
    upload(server, items[:2])
    use_langfuse(server, monkeypatch, "fallback")
    result = run_cli("--name", "fb", "--model", fake_model, "--prompt-label", "nope")
    assert result.exit_code == 0, result.stderr
    assert "warning:" in result.stderr and "prompt_source=fallback" in result.stderr
    run, _ = mirror("fb")
    assert run.config["prompt"]["source"] == "fallback"
    roots = item_runs(server, run.experiment_id)
    meta = json.loads(next(iter(roots.values()))["attributes"]["langfuse.experiment.metadata"])
    assert meta["prompt_source"] == "fallback" and meta["prompt_label"] == "nope"
    generations = [s for s in server.spans if s["name"] == "extract"]
    assert len(generations) == 2
    assert not any("langfuse.observation.prompt.name" in g["attributes"] for g in generations)


# --- 4: failing items -----------------------------------------------------------------------


def test_failing_items_are_scored_marked_error_counted_and_mirrored(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    items: list[DatasetItem],
    caplog: pytest.LogCaptureFixture,
) -> None:
    upload(server, items)
    use_langfuse(server, monkeypatch, "failing")
    failing = {items[1].id, items[4].id}
    monkeypatch.setenv("E2E_FAIL", ",".join(failing))
    result = run_cli("--name", "f1", "--pipeline", PIPE)
    assert result.exit_code == 0, result.stderr
    assert "2 (0 schema failures)" in result.stdout  # the summary reports the failures

    run, results = mirror("f1")
    assert {r.item_id for r in results} == {i.id for i in items}  # no item vanished
    experiment_id = run.experiment_id
    assert len(item_runs(server, experiment_id)) == len(items)
    for item in items:
        trace_id = trace_of(server, item.id, experiment_id)
        scores = trace_scores(server, trace_id)
        assert set(ITEM_SCORES) <= set(scores)
        levels = {
            name: span_in(server, trace_id, name)["attributes"].get("langfuse.observation.level")
            for name in ("experiment-item-run", "experiment-item-task")
        }
        error = scores["extraction_error"]
        assert error["dataType"] == "BOOLEAN"
        # every trace, failed or not, reads like an item: its input as a JSON object, the
        # dataset item id, the model, the prompt and the run's metadata
        root = span_in(server, trace_id, "experiment-item-run")["attributes"]
        assert json.loads(root["langfuse.observation.input"]) == item_input(item)
        assert json.loads(root["langfuse.observation.metadata.dataset_item_id"]) == (
            langfuse_item_id(DATASET, item.id)
        )
        assert json.loads(root["langfuse.observation.metadata.model"]) == f"pipeline:{PIPE}"
        assert f"(pipeline:{PIPE})" in root["langfuse.experiment.description"]
        assert json.loads(root["langfuse.observation.metadata.prompt_name"]) == "extraction"
        assert isinstance(json.loads(root["langfuse.observation.output"]), dict)
        errors = [
            s["name"]
            for s in server.spans
            if s["trace_id"] == trace_id
            and s["attributes"].get("langfuse.observation.level") == "ERROR"
        ]
        if item.id in failing:
            message = f"RuntimeError: scripted failure for {item.id}"
            assert error["value"] == 1 and error["comment"] == message
            assert scores["entity_recall"]["value"] == 0  # scored as an empty prediction
            assert errors == ["experiment-item-task"]  # exactly one ERROR observation
            task = span_in(server, trace_id, "experiment-item-task")["attributes"]
            assert task["langfuse.observation.status_message"] == message
            assert json.loads(root["langfuse.observation.output"])["error"] == message
            assert (
                error["observationId"]
                == span_in(server, trace_id, "experiment-item-task")["span_id"]
            )
        else:
            assert error["value"] == 0
            assert errors == [] and "ERROR" not in levels.values()
    # LangFuse's own view agrees: its error count (ERROR observations) is ours
    experiment = [o for o in server.observations() if o["traceId"] in item_runs(server)]
    assert sum(o["level"] == "ERROR" for o in experiment) == 2
    on_run = run_scores(server, experiment_id)
    assert on_run["error_count"]["value"] == 2 and on_run["items"]["value"] == len(items)
    assert on_run["error_rate"]["value"] == pytest.approx(2 / len(items))
    by_item = {r.item_id: r for r in results}
    assert all(by_item[i].error and "scripted failure" in str(by_item[i].error) for i in failing)
    # handled failures are not re-reported by the SDK's "Item N failed" error log
    assert not [r for r in caplog.records if r.name == "langfuse" and "failed" in r.getMessage()]


def test_every_items_scores_come_from_the_score_sink_once_with_no_evaluator_span(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    """Ok and failed items alike: the scores the mirror has, each posted once on the task
    observation, and no stand-in evaluator in the trace (nothing parked for one)."""
    upload(server, items[:3])
    use_langfuse(server, monkeypatch, "sink")
    monkeypatch.setenv("E2E_FAIL", items[1].id)
    config = RunConfig(dataset=DATASET, name="sink", pipeline=PipelineConfig(pipeline=PIPE))
    outcome = run_experiment(config)
    experiment_id = outcome.run.experiment_id
    roots = item_runs(server, experiment_id)
    assert len(roots) == 3 and outcome.summary.errors == 1
    in_traces = [s for s in server.spans if s["trace_id"] in roots]
    assert {s["name"] for s in in_traces} == {"experiment-item-run", "experiment-item-task"}
    for result in outcome.results:
        task = span_in(server, str(result.trace_id), "experiment-item-task")
        posted = [s for s in server.posted_scores if s.get("traceId") == result.trace_id]
        sent = sorted((s["name"], str(s["value"]), s["dataType"], s.get("comment")) for s in posted)
        local = sorted(
            (s.name, str(float(s.value) if s.data_type != "CATEGORICAL" else s.value),
             s.data_type, s.comment)
            for s in result.scores
        )  # fmt: skip
        assert sent == local, result.item_id
        assert {s["observationId"] for s in posted} == {task["span_id"]}


# --- 5: verification ------------------------------------------------------------------------


def test_rejected_scores_fail_verification_in_one_line_and_no_verify_skips_it(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    upload(server, items[:3])
    use_langfuse(server, monkeypatch, "reject", verify_timeout=0.3)
    server.reject_scores(400)
    started = time.monotonic()
    result = run_cli("--name", "rej", "--pipeline", PIPE)
    assert result.exit_code == 3, result.stdout
    (line,) = error_lines(result)
    assert "LangFuse is missing data from run 'rej'" in line
    assert "missing 0 of" not in line and "traces" not in line.split("(first")[0]
    assert "item scores" in line and "run scores" in line
    assert "Traceback" not in result.stderr + result.stdout
    assert time.monotonic() - started < 10
    assert server.posted_scores and server.scores == []  # sent, and refused
    run, results = mirror("rej")
    assert len(results) == 3 and run.status == "finished"  # nothing lost locally

    server.reset_requests()
    result = run_cli("--name", "rej-nv", "--pipeline", PIPE, "--no-verify")
    assert result.exit_code == 0, result.stderr
    assert not server.requests_to("/api/public/v3/scores", "GET")
    assert not server.requests_to("/api/public/v2/observations", "GET")


def test_verification_error_carries_the_finished_outcome(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    upload(server, items[:2])
    use_langfuse(server, monkeypatch, "reject-api", verify_timeout=0.2)
    server.reject_scores(None, names=["entity_f1"])  # a 207: only entity_f1 refused
    config = RunConfig(dataset=DATASET, name="partial", pipeline=PipelineConfig(pipeline=PIPE))
    with pytest.raises(VerificationError) as caught:
        run_experiment(config)
    error = caught.value
    assert isinstance(error, BackendError) and error.exit_code == 3
    assert error.outcome.summary.items == 2 and error.outcome.experiment_url
    assert {name for _, name in error.report.missing_scores} == {"entity_f1"}
    assert error.report.missing_run_scores == ("entity_f1",)
    assert "missing 2 of" in str(error) and "entity_f1" in str(error)


# --- 6: before spending ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_bad_keys_unreachable_server_missing_dataset_fail_before_spending(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    items: list[DatasetItem],
    tmp_path: Path,
) -> None:
    upload(server, items[:2])
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("E2E_CALL_LOG", str(calls))
    cases: list[tuple[str, int, str]] = []

    use_langfuse(server, monkeypatch, "bad-secret")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-wrong")
    server.reset_requests()
    result = run_cli("--name", "x", "--pipeline", PIPE)
    cases.append((result.stderr, result.exit_code, "rejected the API keys (401)"))
    assert [r.path for r in server.requests] == ["/api/public/projects"]
    assert "sk-lf-wrong" not in result.stderr

    use_langfuse(server, monkeypatch, "unreachable")
    monkeypatch.setenv("LANGFUSE_BASE_URL", f"http://127.0.0.1:{_free_port()}")
    result = run_cli("--name", "x", "--pipeline", PIPE)
    cases.append((result.stderr, result.exit_code, "cannot reach LangFuse"))

    use_langfuse(server, monkeypatch, "no-dataset")
    result = run_cli("--dataset", "nope", "--name", "x", "--pipeline", PIPE)
    cases.append((result.stderr, result.exit_code, "dataset 'nope' not found in LangFuse"))

    monkeypatch.setenv(VERIFY_TIMEOUT_ENV, "soon")
    result = run_cli("--name", "x", "--pipeline", PIPE)
    cases.append((result.stderr, result.exit_code, VERIFY_TIMEOUT_ENV))

    monkeypatch.setenv(VERIFY_TIMEOUT_ENV, "1")
    for name in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(name)
    result = run_cli("--name", "x", "--pipeline", PIPE, "--backend", "langfuse")
    cases.append((result.stderr, result.exit_code, "keys missing"))

    expected_codes = [3, 3, 2, 2, 2]
    for (stderr, code, needle), expected in zip(cases, expected_codes, strict=True):
        assert code == expected, stderr
        assert needle in stderr and "Traceback" not in stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
    assert not calls.exists()  # the pipeline was never called
    assert LocalStore().get_run("x", DATASET) is None


# --- 7: resume and retry-errors -------------------------------------------------------------


def test_resume_skips_finished_items_and_retry_errors_reruns_failures_in_one_experiment(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    items: list[DatasetItem],
    tmp_path: Path,
) -> None:
    upload(server, items)
    use_langfuse(server, monkeypatch, "resume")
    ids = [i.id for i in items]
    monkeypatch.setenv("E2E_FAIL", ids[1])
    log = tmp_path / "first.log"
    monkeypatch.setenv("E2E_CALL_LOG", str(log))
    assert run_cli("--name", "r", "--pipeline", PIPE, "--limit", "3").exit_code == 0
    run, _ = mirror("r")
    experiment_id = run.experiment_id
    assert sorted(log.read_text().split()) == sorted(ids[:3])

    log = tmp_path / "resume.log"
    monkeypatch.setenv("E2E_CALL_LOG", str(log))
    result = run_cli("--name", "r", "--pipeline", PIPE, "--resume")
    assert result.exit_code == 0, result.stderr
    assert sorted(log.read_text().split()) == sorted(ids[3:])  # finished items skipped
    assert mirror("r")[0].experiment_id == experiment_id
    assert len(item_runs(server, experiment_id)) == 6  # the new traces joined the experiment
    on_run = run_scores(server, experiment_id)
    assert on_run["items"]["value"] == 6 and on_run["error_count"]["value"] == 1
    posted_items = [s for s in server.posted_scores if s["name"] == "items"]
    assert len(posted_items) == 2 and len({s["id"] for s in posted_items}) == 1  # overwritten

    monkeypatch.setenv("E2E_FAIL", "")
    log = tmp_path / "retry.log"
    monkeypatch.setenv("E2E_CALL_LOG", str(log))
    result = run_cli("--name", "r", "--pipeline", PIPE, "--retry-errors")
    assert result.exit_code == 0, result.stderr
    assert log.read_text().split() == [ids[1]]
    run, results = mirror("r")
    assert run.experiment_id == experiment_id and len(results) == 6
    assert all(r.ok for r in results)
    retried = trace_of(server, ids[1], experiment_id)  # the newest trace of that item
    assert {r.item_id: r.trace_id for r in results}[ids[1]] == retried
    assert trace_scores(server, retried)["extraction_error"]["value"] == 0
    assert run_scores(server, experiment_id)["error_count"]["value"] == 0
    assert f"baseline={experiment_id}" in result.stdout  # a resumed run prints its URL

    traces_before = len(server.spans_named("experiment-item-run"))
    result = run_cli("--name", "r", "--pipeline", PIPE, "--resume")  # nothing left to do
    assert result.exit_code == 0, result.stderr
    assert len(server.spans_named("experiment-item-run")) == traces_before
    assert f"baseline={experiment_id}" in result.stdout
    assert run_scores(server, experiment_id)["items"]["value"] == 6


def test_resume_reuses_the_stored_experiment_id_even_when_the_sdk_picked_a_random_one(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    """When the SDK cannot resolve the project id it picks a random experiment id (and no
    URL); the mirror keeps it, so a resumed run still writes into that same experiment."""
    from langfuse import Langfuse

    upload(server, items[:4])
    use_langfuse(server, monkeypatch, "random-id")

    def no_project(self: Any) -> str | None:
        raise RuntimeError("projects endpoint unavailable (test)")

    monkeypatch.setattr(Langfuse, "_get_project_id", no_project)
    pipeline = PipelineConfig(pipeline=PIPE)
    first = run_experiment(RunConfig(dataset=DATASET, name="rnd", pipeline=pipeline, limit=2))
    resumed = run_experiment(RunConfig(dataset=DATASET, name="rnd", pipeline=pipeline, resume=True))
    assert first.experiment_url is None and resumed.experiment_url is None
    assert first.run.experiment_id and resumed.run.experiment_id == first.run.experiment_id
    assert len(item_runs(server, first.run.experiment_id)) == 4
    assert run_scores(server, first.run.experiment_id)["items"]["value"] == 4


# --- 8: LangFuse trouble mid-run ------------------------------------------------------------


def test_server_down_mid_run_finishes_locally_and_reports_the_loss(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    upload(server, items[:3])
    use_langfuse(server, monkeypatch, "down", verify_timeout=0.2)
    # The SDK retries each refused score batch with backoff (~1.5 s); fewer, larger batches
    # keep this test short. (Its flush blocks until every queued batch gave up.)
    monkeypatch.setenv("LANGFUSE_FLUSH_AT", "100")
    finished: list[str] = []

    def hook(item: DatasetItem) -> None:
        finished.append(item.id)
        if len(finished) == 1:
            server.down("refuse")

    pipelines.HOOK = hook
    pipeline = PipelineConfig(pipeline="tests.support.pipelines:timed_sync")
    config = RunConfig(dataset=DATASET, name="down", pipeline=pipeline, concurrency=1)
    with pytest.raises(VerificationError) as caught:
        run_experiment(config)
    message = str(caught.value)
    assert "missing 3 of 3 traces" in message and "cannot reach LangFuse" in message
    run, results = mirror("down")
    assert {r.item_id for r in results} == {i.id for i in items[:3]}
    assert run.status == "finished" and caught.value.outcome.summary.items == 3
    server.up()


def test_429s_are_retried_by_the_sdk_and_lost_batches_are_reported(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    upload(server, items[:3])
    use_langfuse(server, monkeypatch, "throttled", verify_timeout=0.3)
    server.fail_next("/api/public/scores", 2, status=429, retry_after="0", method="POST")
    server.fail_next("/api/public/otel/v1/traces", 2, status=429, retry_after="0")
    pipeline = PipelineConfig(pipeline=PIPE)
    outcome = run_experiment(RunConfig(dataset=DATASET, name="t1", pipeline=pipeline))
    statuses = Counter((r.path, r.status) for r in server.requests)
    assert statuses[("/api/public/scores", 429)] == 2
    assert statuses[("/api/public/otel/v1/traces", 429)] == 2
    assert len(item_runs(server, outcome.run.experiment_id)) == 3  # verified, nothing lost

    server.fail_next("/api/public/otel/v1/traces", 50, status=429, retry_after="0")
    with pytest.raises(VerificationError) as caught:
        run_experiment(RunConfig(dataset=DATASET, name="t2", pipeline=pipeline))
    assert "missing 3 of 3 traces" in str(caught.value)
    assert len(mirror("t2")[1]) == 3


# --- 9: concurrency -------------------------------------------------------------------------


def _max_overlap(intervals: list[tuple[str, float, float]]) -> int:
    return max(sum(1 for _, s, e in intervals if s <= start < e) for _, start, _ in intervals)


@pytest.mark.parametrize("function", ["timed_sync", "timed_async"])
def test_items_really_overlap_in_langfuse_mode(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    function: str,
) -> None:
    # more items (and as much concurrency) than asyncio's default thread pool has workers
    # (min(32, CPUs + 4)): sync functions must still all run at once
    n = min(32, (os.cpu_count() or 1) + 4) + 2
    some = LocalStore().get_items(DATASET)[:n]
    upload(server, some)
    use_langfuse(server, monkeypatch, f"overlap-{function}")
    monkeypatch.setenv("E2E_DELAY", "0.2")
    pipeline = PipelineConfig(pipeline=f"tests.support.pipelines:{function}")
    config = RunConfig(dataset=DATASET, name=f"c-{function}", pipeline=pipeline, concurrency=n)
    outcome = run_experiment(config)
    assert outcome.summary.items == n
    calls = pipelines.CALL_TIMES
    assert len(calls) == n
    # every call was running at one moment (serial gives 1); counted, not timed, so a loaded
    # machine cannot make it flaky
    assert _max_overlap(calls) == n


# --- Ctrl-C ---------------------------------------------------------------------------------


def test_ctrl_c_while_an_item_is_being_mirrored_still_scores_its_trace(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem]
) -> None:
    """SIGINT lands while the second result is being written to the mirror: the row is
    kept, and its trace gets its scores although the SDK's evaluator never runs."""
    upload(server, items[:4])
    use_langfuse(server, monkeypatch, "sigint")
    record = LocalStore.record_result
    writes: list[str] = []

    def slow_record(self: LocalStore, run_id: int, result: Any, **kwargs: Any) -> None:
        writes.append(result.item_id)
        if len(writes) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # asyncio cancels the run's tasks
            time.sleep(0.3)
        record(self, run_id, result, **kwargs)

    monkeypatch.setattr(LocalStore, "record_result", slow_record)
    config = RunConfig(
        dataset=DATASET, name="sigint", pipeline=PipelineConfig(pipeline=PIPE), concurrency=1
    )
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config)
    run, results = mirror("sigint")
    assert run.status == "interrupted"
    assert [r.item_id for r in results] == writes == [items[0].id, items[1].id]
    for result in results:
        scores = trace_scores(server, str(result.trace_id))
        assert {s.name for s in result.scores} == set(scores), result.item_id
    assert run_scores(server, str(run.experiment_id))["items"]["value"] == 2


def test_ctrl_c_saves_and_flushes_what_finished_then_resume_completes(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    twelve = LocalStore().get_items(DATASET)[:12]
    upload(server, twelve)
    use_langfuse(server, monkeypatch, "ctrl-c")
    log = tmp_path / "calls.log"
    env = {**os.environ, "E2E_CALL_LOG": str(log), "E2E_DELAY": "0.3", "PYTHONPATH": str(REPO)}
    code = "from extraction_eval.cli import run_experiment_main; run_experiment_main()"
    cmd = [sys.executable, "-c", code, "--name", "cc", "--pipeline", PIPE, "--concurrency", "2"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().split()) >= 5:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr.decode()
    assert b"interrupted" in stderr and b"Traceback" not in stderr

    run, results = mirror("cc")
    done = len(results)
    assert run.status == "interrupted" and 2 <= done < 12
    assert run.experiment_id  # known from the first finished item
    # what finished reached LangFuse before the process exited: traces and run scores
    roots = item_runs(server, run.experiment_id)
    assert {r.trace_id for r in results} <= set(roots)
    assert run_scores(server, run.experiment_id)["items"]["value"] == done

    monkeypatch.setenv("E2E_DELAY", "0")
    result = run_cli("--name", "cc", "--pipeline", PIPE, "--resume")
    assert result.exit_code == 0, result.stderr
    run, results = mirror("cc")
    assert run.status == "finished" and len(results) == 12
    assert run_scores(server, run.experiment_id)["items"]["value"] == 12


# --- failure taxonomy: one categorical score per category, trace URLs in the mirror ---------


def test_failure_categories_are_categorical_scores_on_every_trace_failed_ones_too(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    items: list[DatasetItem],
    fake_model: str,
) -> None:
    upload(server, items[:4])
    use_langfuse(server, monkeypatch, "taxonomy")
    result = run_cli("--name", "tax-1", "--model", fake_model)
    assert result.exit_code == 0, result.stderr  # the read-back found every score
    run, results = mirror("tax-1")
    by_item = {r.item_id: r for r in results}
    assert not by_item["sample-003"].ok  # the fake's schema failure
    seen: set[str] = set()
    for item in items[:4]:
        local = by_item[item.id]
        trace_id = trace_of(server, item.id, run.experiment_id)
        received = [
            s
            for s in server.scores
            if s.get("traceId") == trace_id and s["name"] == "failure_category"
        ]
        assert local.categories, item.id  # one entity for every item: never a clean match
        assert sorted(s["value"] for s in received) == sorted(local.categories), item.id
        for score in received:
            assert score["dataType"] == "CATEGORICAL"
            count = local.categories[score["value"]]
            assert score["comment"].startswith(f"{count} object(s): ")
            labels = [t.label for t in local.taxonomy or [] if t.category == score["value"]]
            assert labels[0] in score["comment"]
        seen |= {s["value"] for s in received}
        # the mirror has the trace URL the SDK builds, without a project lookup per item
        expected_url = f"{server.base_url}/project/{server.project_id}/traces/{trace_id}"
        assert local.trace_id == trace_id and local.trace_url == expected_url
    assert {"missed", "context_bleed"} <= seen  # "Mara Velloso" is sample-001's text
    failed_trace = trace_of(server, "sample-003", run.experiment_id)
    failed = {s["value"] for s in server.scores if s.get("traceId") == failed_trace}
    assert "missed" in failed  # a failed item is scored as empty: all its gold missed
    assert len(server.requests_to("/api/public/projects", "GET")) <= 3
    # run-level means skip the categorical values; the export carries URL and categories
    assert run.summary is not None and "failure_category" not in run.summary["score_means"]
    export = cli.invoke(app, ["runs", "export", "tax-1"])
    rows = {json.loads(x)["item_id"]: json.loads(x) for x in export.stdout.splitlines()}
    assert rows["sample-003"]["trace_url"] == by_item["sample-003"].trace_url
    assert rows["sample-003"]["categories"] == by_item["sample-003"].categories
    show = cli.invoke(app, ["runs", "show", "tax-1", "--category", "context_bleed"])
    assert show.exit_code == 0, show.stderr
    assert by_item["sample-002"].trace_url in show.stdout.replace("\n", "")
    # the worst-case view links every listed item to its trace
    worst = cli.invoke(app, ["runs", "show", "tax-1", "--worst"])
    assert worst.exit_code == 0, worst.stderr
    shown = worst.stdout.replace("\n", "")
    assert shown.index("sample-003") < shown.index("sample-001")  # the errored item first
    for item in items[:4]:
        assert f"{item.id}  {by_item[item.id].trace_url}" in worst.stdout, item.id
    per_category = cli.invoke(app, ["runs", "show", "tax-1", "--worst", "--by-category"])
    assert per_category.exit_code == 0, per_category.stderr
    assert f"missed: sample-003  {by_item['sample-003'].trace_url}" in per_category.stdout
    assert "context_bleed: sample-00" in per_category.stdout


# --- cost on the generation and in the experiment metadata ----------------------------------


def test_generation_carries_the_cost_and_the_experiment_names_its_prices(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, items: list[DatasetItem], fake_model: str
) -> None:
    upload(server, items[:3])
    use_langfuse(server, monkeypatch, "cost")
    result = run_cli(
        "--name", "cost-1", "--model", fake_model, "--price-in", "1", "--price-out", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    run, rows = mirror("cost-1")
    generations = [s for s in server.spans if s["name"] == "extract"]
    assert len(generations) == 3
    for gen in generations:  # the fake reports 11 in / 7 out: $1 and $2 per 1M tokens
        cost = json.loads(gen["attributes"]["langfuse.observation.cost_details"])
        assert cost == {"input": pytest.approx(11 / 1e6), "output": pytest.approx(14 / 1e6)}
    # the schema failure's call was paid too: every row carries its cost
    assert [r.usage.cost_usd for r in rows] == [pytest.approx(25 / 1e6)] * 3
    assert run.summary["cost_usd"] == pytest.approx(round(75 / 1e6, 6))
    roots = item_runs(server, run.experiment_id)
    meta = json.loads(next(iter(roots.values()))["attributes"]["langfuse.experiment.metadata"])
    assert (meta["price_source"], meta["price_input_per_mtok"]) == ("override", "1.0")
    assert meta["price_output_per_mtok"] == "2.0"
