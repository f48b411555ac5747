"""The --max-cost ceiling in LangFuse mode: the real SDK's ``run_experiment`` against the
loopback fake server, with the scripted fake provider reporting token usage."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.llm.fake import register_fake, unregister_fake
from tests.integration.test_langfuse_experiment import (
    DATASET,
    item_runs,
    run_cli,
    upload,
    use_langfuse,
)
from tests.support.langfuse_server import FakeLangfuse

# $0.01 a call at --price-in 1 --price-out 1
USAGE = {"input": 5000, "output": 5000}


@pytest.fixture
def priced_fake() -> Iterator[str]:
    register_fake("lf-budget", {"default": {"json": {"entities": [], "relationships": []},
                                            "usage": USAGE}})  # fmt: skip
    yield "fake:lf-budget"
    unregister_fake("lf-budget")


def test_langfuse_run_stops_at_the_ceiling_and_resumes_into_the_same_experiment(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, priced_fake: str
) -> None:
    items = LocalStore().get_items(DATASET)[:4]
    upload(server, items)
    use_langfuse(server, monkeypatch, "budget")
    args = ["--name", "lf-cap", "--model", priced_fake, "--concurrency", "1"]
    args += ["--price-in", "1", "--price-out", "1"]
    stopped = run_cli(*args, "--max-cost", "0.015")
    assert stopped.exit_code == 1, stopped.stderr
    assert "stopped: budget" in stopped.stderr and "2 items not run" in stopped.stderr
    store = LocalStore()
    run = store.get_run("lf-cap", DATASET)
    assert run is not None and run.status == "stopped: budget"
    done = {r.item_id for r in store.results(run.id)}
    assert len(done) == 2
    # LangFuse has the scores of exactly the items that ran
    scored = {s["traceId"] for s in server.scores if s["name"] == "entity_f1" and s.get("traceId")}
    ran_traces = {r.trace_id for r in store.results(run.id)}
    assert ran_traces <= scored and len(scored) == 2
    # the two items held back at the ceiling: WARNING traces (not run is not an error, so
    # LangFuse's error count stays ours) whose message names no CLI flag
    tasks = server.spans_named("experiment-item-task")
    assert not [s for s in tasks if s["attributes"].get("langfuse.observation.level") == "ERROR"]
    held = [
        s["attributes"]["langfuse.observation.status_message"]
        for s in tasks
        if s["attributes"].get("langfuse.observation.level") == "WARNING"
    ]
    assert len(held) == 2 and all("not run: the run's cost ceiling was reached" in m for m in held)
    assert not any("--" in m for m in held), held

    resumed = run_cli(*args, "--resume", "--max-cost", "1")
    assert resumed.exit_code == 0, resumed.stderr
    run = store.get_run("lf-cap", DATASET)
    assert run is not None and run.status == "finished"
    assert {r.item_id for r in store.results(run.id)} == {i.id for i in items}
    assert run.summary is not None and run.summary["cost_usd"] == pytest.approx(0.04)
    assert {s["attributes"]["langfuse.experiment.id"] for s in item_runs(server).values()} == {
        run.experiment_id
    }


def test_langfuse_dry_run_estimates_from_the_langfuse_dataset_and_sends_nothing(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, priced_fake: str
) -> None:
    items = LocalStore().get_items(DATASET)[:3]
    upload(server, items)
    use_langfuse(server, monkeypatch, "budget-dry")
    result = run_cli(
        "--name", "lf-dry", "--model", priced_fake, "--price-in", "1", "--price-out", "1",
        "--dry-run",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "items to run 3" in out and "est. USD" in out
    assert server.spans_named("experiment-item-run") == []
    assert not any(s.get("traceId") for s in server.scores)
    assert LocalStore().list_runs() == []
