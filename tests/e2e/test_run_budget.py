"""The budget end to end (CLI, scripted fake provider reporting token usage, priced with
``--price-in/--price-out`` through the same ``Pricer`` as every item): ``--dry-run``, a refusal
on the estimate, a stop at the ceiling mid-run, and ``--resume`` with a higher ceiling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.experiments.budget import CostEstimate
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import estimate_run
from extraction_eval.pipeline.base import PipelineConfig
from tests.support.fake_log import read_fake_log

runner = CliRunner()
PRICES = ["--price-in", "1", "--price-out", "1"]  # USD per 1M tokens
# every call reports 5,000 tokens in and out: $0.01 a call at these prices
USAGE = {"input": 5000, "output": 5000}
COMMON = ["--limit", "6", "--concurrency", "1", *PRICES, "--backend", "local"]


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    items = LocalStore().get_items("extraction-eval")[:6]
    script = {
        "default": {"json": {"entities": [], "relationships": []}, "usage": USAGE},
        "items": {
            items[0].id: {"json": items[0].expected.model_dump(mode="json"), "usage": USAGE},
            items[2].id: {"text": "{not json", "usage": USAGE},  # a paid schema failure
            items[4].id: {"json": items[4].expected.model_dump(mode="json"), "usage": USAGE},
        },
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(path))
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_LOG", str(log))
    return log


def _run(*args: str) -> Result:
    return runner.invoke(_run_app, [*COMMON, *args])


def _estimate(model: str) -> CostEstimate:
    config = RunConfig(
        limit=6,
        backend="local",
        pipeline=PipelineConfig(model=model, price_in=1.0, price_out=1.0),
    )
    return estimate_run(config)


def _export(name: str) -> list[dict[str, object]]:
    out = runner.invoke(app, ["runs", "export", name, "--deterministic"])
    assert out.exit_code == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_dry_run_prints_the_estimate_and_calls_and_creates_nothing(calls: Path) -> None:
    est = _estimate("fake:budget")
    assert est.items == est.calls == 6 and est.skipped_done == est.skipped_cached == 0
    assert est.tokens_in > 6 * 100 and est.tokens_out > 0
    assert est.usd == pytest.approx((est.tokens_in + est.tokens_out) / 1e6)
    result = _run("--model", "fake:budget", "--name", "dry", "--dry-run")
    assert result.exit_code == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert f"tokens in ~{est.tokens_in}" in out and f"tokens out ~{est.tokens_out}" in out
    assert f"est. USD {est.usd:.6f}" in out and "model calls 6" in out
    assert not calls.exists()  # no model call
    assert LocalStore().list_runs() == []


def test_max_cost_below_the_estimate_refuses_before_anything(calls: Path) -> None:
    est = _estimate("fake:budget")
    assert est.usd is not None
    result = _run("--model", "fake:budget", "--name", "poor", "--max-cost", f"{est.usd / 2:.6f}")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --max-cost ")
    assert "estimated cost" in lines[0] and "nothing was run" in lines[0]
    assert not calls.exists()
    assert LocalStore().list_runs() == []


def test_unknown_price_with_a_ceiling_is_refused(calls: Path) -> None:
    result = runner.invoke(
        _run_app, ["--limit", "2", "--model", "fake:no-such-model-xyz", "--max-cost", "5"]
    )
    assert result.exit_code == 2
    assert "cannot be estimated" in result.stderr and "unknown price" in result.stderr
    assert LocalStore().list_runs() == [] and not calls.exists()


def test_stops_at_the_ceiling_then_resume_with_a_higher_one_equals_a_straight_run(
    calls: Path,
) -> None:
    # each call spends $0.01; the estimate (~$0.005 for six items) is within $0.025
    est = _estimate("fake:budget")
    assert est.usd is not None and est.usd < 0.025
    stopped = _run("--model", "fake:budget", "--name", "capped", "--max-cost", "0.025")
    assert stopped.exit_code == 1, stopped.stderr
    assert "stopped: budget" in stopped.stderr and "3 items not run" in stopped.stderr
    assert "stopped: budget" in stopped.stdout
    assert len(read_fake_log(calls)) == 3  # $0.01, $0.02, $0.03 >= $0.025: no 4th call
    store = LocalStore()
    run = store.get_run("capped")
    assert run is not None and run.status == "stopped: budget"
    rows = store.results(run.id)
    assert len(rows) == 3  # three whole rows, the rest unrun (no partial row)
    assert all(r.usage.cost_usd == pytest.approx(0.01) for r in rows)
    assert run.summary is not None and run.summary["missing"] == 3

    # the same ceiling again: spent already $0.03 >= $0.025 -> refused up front
    again = _run("--model", "fake:budget", "--name", "capped", "--resume", "--max-cost", "0.025")
    assert again.exit_code == 2 and "spent already" in again.stderr
    assert len(read_fake_log(calls)) == 3

    resumed = _run("--model", "fake:budget", "--name", "capped", "--resume", "--max-cost", "0.1")
    assert resumed.exit_code == 0, resumed.stderr
    assert len(read_fake_log(calls)) == 6  # only the three unrun items were called
    run = store.get_run("capped")
    assert run is not None and run.status == "finished"
    assert run.summary is not None and run.summary["cost_usd"] == pytest.approx(0.06)

    # another model name: the same answers, not served from the first run's cache
    straight = _run("--model", "fake:straight", "--name", "straight")
    assert straight.exit_code == 0, straight.stderr
    assert _export("capped") == _export("straight")
    capped, full = store.get_run("capped"), store.get_run("straight")
    assert capped is not None and full is not None
    assert capped.summary is not None and full.summary is not None
    assert capped.summary["values"] == full.summary["values"]
    assert capped.summary["items"] == full.summary["items"] == 6


def test_resume_estimate_leaves_out_done_and_cached_items(calls: Path) -> None:
    first = _run("--model", "fake:budget", "--name", "c1", "--max-cost", "0.025")
    assert first.exit_code == 1
    est = estimate_run(
        RunConfig(
            name="c1",
            resume=True,
            limit=6,
            backend="local",
            pipeline=PipelineConfig(model="fake:budget", price_in=1.0, price_out=1.0),
        )
    )
    assert (est.skipped_done, est.items) == (3, 3)
    # a new run of the same model: the two parsed answers of c1 are in the response cache
    # (the schema failure is not cached), so only four items would call the model
    fresh = _estimate("fake:budget")
    assert (fresh.skipped_cached, fresh.calls) == (2, 4)
