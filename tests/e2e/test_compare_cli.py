"""``compare A B`` end to end on real local runs: the paired figures (JSON and text), byte
stability, refusals and ``--force``, the regression gate on ``compare`` and on
``run-experiment --baseline``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.evaluators.counts import METRICS

runner = CliRunner()
FIRST = "tests.support.pipelines:first_entity"  # the first gold entity only: recall < 1


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(_run_app, list(args), env=env)
    return result.exit_code, result.stderr


def _json(*args: str) -> dict[str, Any]:
    code, out, err = _invoke("compare", *args, "--format", "json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


@pytest.fixture
def two_runs() -> None:
    """'first' (first gold entity per item, item sample-003 fails) and 'base' (offline baseline)."""
    code, err = _run("--name", "first", "--pipeline", FIRST, env={"E2E_FAIL": "sample-003"})
    assert code == 0, err
    code, err = _run("--name", "base")
    assert code == 0, err


def test_json_has_each_runs_own_figures_and_a_paired_interval(two_runs: None) -> None:
    data = _json("first", "base", "--resamples", "2000")
    assert list(data) == [
        *("a", "b", "items", "bootstrap", "metrics", "mcnemar", "per_type", "scoring"),
        *("only_in_a", "only_in_b", "not_in_gold", "differences", "warnings", "gate"),
        "diff",  # the extraction-aware diff (RunDiff.to_json)
    ]
    assert list(data["metrics"]) == list(METRICS)
    store = LocalStore()
    for side, name in (("a", "first"), ("b", "base")):
        run = store.get_run(name)
        assert run is not None and run.summary is not None
        values = run.summary["values"]
        for metric in METRICS:  # re-scored from the stored outputs: the run's own figures
            if metric in values:
                assert data["metrics"][metric][side] == pytest.approx(values[metric]), metric
    n = store.count_results(store.get_run("first").id)  # type: ignore[union-attr]
    assert data["items"] == n == 48
    f1 = data["metrics"]["entity_f1"]
    assert f1["delta"] == pytest.approx(f1["b"] - f1["a"])
    assert f1["ci"]["low"] <= f1["delta"] <= f1["ci"]["high"]
    err = data["metrics"]["error_rate"]
    assert (err["a"], err["b"]) == (pytest.approx(1 / 48), 0.0)
    mc = data["mcnemar"]
    assert mc["both_right"] + mc["b01"] + mc["b10"] + mc["both_wrong"] == 48
    assert data["gate"] is None
    assert set(data["per_type"]["entities"]) and all(
        t["support"] > 0 for t in data["per_type"]["entities"].values()
    )


def test_same_seed_same_bytes_other_seed_other_interval(two_runs: None) -> None:
    args = ("compare", "first", "base", "--format", "json", "--resamples", "500")
    first, again = _invoke(*args, "--seed", "3"), _invoke(*args, "--seed", "3")
    assert first[0] == 0 and first[1] == again[1]
    other = _invoke(*args, "--seed", "4")
    assert json.loads(other[1])["metrics"] != json.loads(first[1])["metrics"]


def test_text_view_shows_the_interval_verdict_mcnemar_and_types(two_runs: None) -> None:
    code, out, err = _invoke("compare", "first", "base", "--resamples", "1000")
    assert code == 0, err
    data = _json("first", "base", "--resamples", "1000")
    row = next(line for line in out.splitlines() if line.split()[:1] == ["entity_recall"])
    ci = data["metrics"]["entity_recall"]["ci"]
    assert f"[{ci['low']:+.3f}, {ci['high']:+.3f}]" in row
    assert data["metrics"]["entity_recall"]["verdict"] == "improved" and "improved" in row
    mc = data["mcnemar"]
    assert f"{mc['b01']} items wrong in A and right in B (b01)" in " ".join(out.split())
    assert "F1 per type" in out


def test_the_gate_fails_on_a_regression_and_passes_an_improvement(two_runs: None) -> None:
    # base -> first loses recall: the CI's low bound is far below -0.01
    code, out, err = _invoke("compare", "base", "first", "--fail-on-regression", "entity_f1=0.01")
    assert code == 1
    line = [x for x in err.splitlines() if "regression gate" in x]
    assert len(line) == 1 and "FAILED" in line[0] and "entity_f1" in line[0], err
    code, out, err = _invoke(
        "compare", "first", "base", "--fail-on-regression", "entity_f1=0.01",
        "--fail-on-regression", "error_rate=0",
    )  # fmt: skip
    assert code == 0, err
    assert "regression gate passed" in err
    # the JSON carries the gate too (the line goes to stderr: stdout stays pure JSON)
    code, out, err = _invoke(
        "compare", "base", "first", "--format", "json", "--fail-on-regression", "entity_f1=0.01"
    )
    assert code == 1
    gate = json.loads(out)["gate"]
    assert gate["passed"] is False and gate["failures"][0]["metric"] == "entity_f1"
    assert gate["failures"][0]["ci_bound"] < -0.01


def test_a_huge_tolerance_passes_even_a_regression(two_runs: None) -> None:
    code, _, err = _invoke("compare", "base", "first", "--fail-on-regression", "entity_f1=1")
    assert code == 0, err


def test_other_item_set_needs_force_and_is_named(two_runs: None) -> None:
    code, err = _run("--name", "short", "--limit", "5")
    assert code == 0, err
    code, out, err = _invoke("compare", "base", "short")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--force" in err and "item set" in err, err
    code, out, err = _invoke("compare", "base", "short", "--force", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["items"] == 5 and data["only_in_a"]["count"] == 43
    assert "item set: 43 items only in 'base'" in err


def test_other_dataset_version_needs_force(two_runs: None) -> None:
    store = LocalStore()
    items = store.get_items("extraction-eval")
    changed = items[0].model_copy(update={"text": items[0].text + " More."})
    store.upload_items("extraction-eval", [changed])  # version 2
    code, err = _run("--name", "v2")
    assert code == 0, err
    code, _, err = _invoke("compare", "base", "v2")
    assert code == 2 and "dataset version 1 vs 2" in err and "--force" in err, err
    code, _, err = _invoke("compare", "base", "v2", "--force")
    assert code == 0, err
    warning = "warning: the runs differ (compared anyway, forced): dataset version 1 vs 2"
    assert warning in " ".join(err.split()), err


def test_run_experiment_baseline_gate() -> None:
    code, err = _run("--name", "base")
    assert code == 0, err
    # a worse candidate: exit 1, the reason in one line
    code, err = _run(
        "--name", "cand", "--pipeline", FIRST, "--baseline", "base",
        "--fail-on-regression", "entity_f1=0.01",
    )  # fmt: skip
    assert code == 1, err
    gate = [x for x in err.splitlines() if "regression gate" in x]
    assert len(gate) == 1 and "FAILED" in gate[0] and "'cand' vs baseline 'base'" in gate[0]
    # the same model again: Δ = 0 everywhere, the gate passes
    code, err = _run(
        "--name", "again", "--baseline", "base", "--fail-on-regression", "entity_f1=0",
        "--fail-on-regression", "relationship_f1=0",
    )  # fmt: skip
    assert code == 0, err
    assert "regression gate passed" in err and "entity_f1 Δ CI low bound +0.0000" in err


def test_all_items_errored_in_b_is_a_regression() -> None:
    code, err = _run("--name", "base")
    assert code == 0, err
    code, err = _run("--name", "broken", "--pipeline", "tests.support.pipelines:always_fails")
    assert code == 0, err
    data = _json("base", "broken", "--resamples", "500")
    assert data["metrics"]["error_rate"]["b"] == 1.0
    assert data["metrics"]["error_rate"]["verdict"] == "regressed"
    assert data["metrics"]["entity_f1"]["b"] == 0.0
    assert data["mcnemar"]["b01"] == 0 and data["mcnemar"]["b10"] > 0


def test_an_unknown_gate_metric_is_refused_before_the_runs_are_read() -> None:
    # no run exists: the metric name is what the one error line is about
    code, out, err = _invoke("compare", "x", "y", "--fail-on-regression", "entity_f2=0.1")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "unknown metric 'entity_f2'" in err and "entity_f1" in err, err
    code, err = _run("--baseline", "nope", "--fail-on-regression", "entity_f1=0.1")
    assert code == 2 and "--baseline" in err and "no run named 'nope'" in err, err
    assert LocalStore().list_runs() == []


def test_run_experiment_baseline_on_another_dataset_version_is_refused_after_the_run() -> None:
    code, err = _run("--name", "base")
    assert code == 0, err
    store = LocalStore()
    items = store.get_items("extraction-eval")
    store.upload_items("extraction-eval", [items[1].model_copy(update={"text": "Changed."})])
    code, err = _run("--name", "cand", "--baseline", "base", "--fail-on-regression", "entity_f1=0")
    assert code == 2
    assert "--baseline 'base' cannot be compared with 'cand': dataset version 1 vs 2" in err, err
    cand = store.get_run("cand")
    assert cand is not None and store.count_results(cand.id) == 48  # the run itself is kept
