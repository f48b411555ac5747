"""The README's journal walkthrough, end to end through the CLI: upload the bundled journal
dataset, run the example lexicon pipeline with span matching, gate on attribute accuracy."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app

REPO = Path(__file__).resolve().parents[2]
PIPELINE = f"{REPO / 'examples' / 'journal_pipeline.py'}:run"
RUN = ["--dataset", "journal-example", "--pipeline", PIPELINE, "--match", "span"]
runner = CliRunner()


def test_journal_walkthrough_scores_attributes_and_gates_on_them() -> None:
    up = runner.invoke(app, ["datasets", "upload", "journal-example"])
    assert up.exit_code == 0, up.stderr
    assert "journal-example: 24 created" in up.stdout

    first = runner.invoke(_run_app, [*RUN, "--name", "journal-v1"])
    assert first.exit_code == 0, first.stderr
    assert "attr.polarity" in first.stdout and "attribute violations" in first.stdout

    run = LocalStore().get_run("journal-v1", "journal-example")
    assert run is not None and run.summary is not None
    values = run.summary["values"]
    polarity = values["attr.polarity"]
    # a real, imperfect pipeline: attributes mostly right, not all; some objects off-schema
    assert 0.5 < polarity < 1.0
    assert values["attr.polarity_ci_low"] <= polarity <= values["attr.polarity_ci_high"]
    assert 0.0 < values["attribute_violation_rate"] < 0.5
    violations = run.summary["report"]["attributes"]["violations"]
    assert violations["objects"] >= 1 and violations["checked"] > violations["objects"]

    # per-item: the off-schema value is listed on its item's score, the item still scored
    exported = runner.invoke(app, ["runs", "export", "journal-v1"])
    assert exported.exit_code == 0, exported.stderr
    rows = {r["item_id"]: r for r in map(json.loads, exported.stdout.splitlines())}
    assert len(rows) == 24 and all(r["error"] is None for r in rows.values())
    flagged = [r for r in rows.values() if r["scores"].get("attribute_violations", 0) > 0]
    assert flagged and all("entity_f1" in r["scores"] for r in flagged)

    below = runner.invoke(
        _run_app, [*RUN, "--name", "gate-high", "--fail-under", f"attr.polarity={polarity + 0.001}"]
    )
    assert below.exit_code == 1, below.stderr
    assert "attr.polarity=" in below.stderr and "is below" in below.stderr

    met = runner.invoke(
        _run_app, [*RUN, "--name", "gate-ok", "--fail-under", f"attr.polarity={polarity - 0.001}"]
    )
    assert met.exit_code == 0, met.stderr


def test_unknown_attribute_is_refused_before_any_run_record_exists() -> None:
    assert runner.invoke(app, ["datasets", "upload", "journal-example"]).exit_code == 0
    result = runner.invoke(
        _run_app, [*RUN, "--name", "gate-typo", "--fail-under", "attr.polarty=0.9"]
    )
    assert result.exit_code == 2
    assert "has no attribute 'polarty'" in result.stderr and "polarity" in result.stderr
    assert LocalStore().get_run("gate-typo", "journal-example") is None
    assert LocalStore().list_runs("journal-example") == []
