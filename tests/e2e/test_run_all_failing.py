"""A pipeline that fails on every item must fail the run's thresholds (issue 7).

Before issue 7 it reported "zero-FP pass 7/7, 0 hallucinated", passed
``--fail-under zero_fp_pass_rate=0.9`` and had a macro entity F1 above 0 while producing nothing.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app

runner = CliRunner()


def test_all_failing_pipeline_fails_zero_fp_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "240")  # one summary fact per line
    args = ["run", "--dataset", "extraction-eval", "--name", "crash"]
    args += ["--pipeline", "tests.support.pipelines:always_fails"]
    result = runner.invoke(app, [*args, "--fail-under", "zero_fp_pass_rate=0.9"])
    assert result.exit_code == 1, result.stderr

    items = LocalStore().get_items("extraction-eval")
    n_empty = sum(1 for i in items if not i.expected.entities and not i.expected.relationships)
    assert (len(items), n_empty) == (48, 7)
    out = " ".join(result.stdout.split())  # whitespace-insensitive
    assert f"zero-FP pass 0/{n_empty} ({n_empty} errored) = 0.000" in out
    assert "hallucinated objects 0/0 items with output = —" in out
    assert "macro F1 entities 0.000 · typed 0.000 · relationships 0.000" in out
    assert f"{len(items)} (0 schema failures) of {len(items)} items; error_rate 1.0000" in out
    assert "zero_fp_pass_rate=0.0000 is below 0.9" in result.stderr

    run = LocalStore().get_run("crash", "extraction-eval")
    assert run is not None
    assert run.summary is not None
    report = run.summary["report"]
    assert report["failed_items"] == len(items)
    assert report["negative_space"]["errored"] == n_empty
    assert report["negative_space"]["zero_fp_pass_count"] == 0
    assert report["macro"]["entity_f1"] == 0.0

    code_export = runner.invoke(app, ["runs", "export", "crash", "--format", "jsonl"])
    assert code_export.exit_code == 0, code_export.stderr
    rows = [json.loads(line) for line in code_export.stdout.splitlines()]
    assert len(rows) == len(items) and all(r["error"] for r in rows)
    empty_ids = {i.id for i in items if not i.expected.entities and not i.expected.relationships}
    for r in rows:
        assert r["scores"]["entity_f1"] == 0.0 and r["scores"]["relationship_f1"] == 0.0
        if r["item_id"] in empty_ids:
            assert r["scores"]["zero_fp_pass"] is False


def test_lower_is_better_figures_take_a_ceiling() -> None:
    """``--fail-over error_rate=X`` fails a run with more errors than X; a floor on it (which
    would fail a run for having too few errors) is refused before anything runs."""
    crash = ["run", "--name", "ceil", "--pipeline", "tests.support.pipelines:always_fails"]
    result = runner.invoke(app, [*crash, "--fail-over", "error_rate=0.5"])
    assert result.exit_code == 1, result.stderr
    assert "error_rate=1.0000 is above 0.5" in result.stderr
    baseline = runner.invoke(app, ["run", "--name", "ok", "--fail-over", "error_rate=0"])
    assert baseline.exit_code == 0, baseline.stderr
    refused = runner.invoke(app, ["run", "--name", "floor", "--fail-under", "error_rate=0.1"])
    assert refused.exit_code == 2 and "better when lower" in refused.stderr
    assert LocalStore().get_run("floor", "extraction-eval") is None
