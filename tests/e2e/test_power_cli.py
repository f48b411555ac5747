"""``extraction-eval power`` and the MDE line of ``compare``, end to end on local runs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from extraction_eval.cli import _run_app, app

runner = CliRunner()
FIRST = "tests.support.pipelines:first_entity"


@pytest.fixture
def two_runs() -> None:
    for args in (["--name", "base"], ["--name", "first", "--pipeline", FIRST]):
        result = runner.invoke(_run_app, args)
        assert result.exit_code == 0, result.stderr


def test_power_from_one_run_and_from_two(two_runs: None) -> None:
    one = runner.invoke(app, ["power", "--baseline", "base", "--delta", "0.02", "--format", "json"])
    assert one.exit_code == 0, one.stderr
    p = json.loads(one.stdout)
    assert (p["metric"], p["n"], p["correlation_source"], p["correlation"]) == (
        "entity_f1",
        48,
        "assumed",
        0.5,
    )
    assert p["mde"] == pytest.approx(2.801585 * p["sd_item"] / 48**0.5, rel=1e-5)
    assert p["n_needed"] >= 2 and 0 < p["power_at_delta"] < 1
    two = runner.invoke(
        app, ["power", "--baseline", "base", "--against", "first", "--format", "json"]
    )
    assert two.exit_code == 0, two.stderr
    q = json.loads(two.stdout)
    assert q["correlation_source"] == "measured" and q["n_needed"] is None
    text = runner.invoke(app, ["power", "--baseline", "base", "--delta", "0.05"])
    assert text.exit_code == 0, text.stderr
    flat = " ".join(text.stdout.split())
    assert f"with 48 items, the smallest detectable |Δ| (MDE) is {p['mde']:.4f}" in flat
    bad = runner.invoke(app, ["power", "--baseline", "base", "--metric", "latency"])
    assert bad.exit_code == 2 and "--metric must be one of" in bad.stderr, bad.stderr


def test_compare_prints_the_mde_of_the_comparison_it_made(two_runs: None) -> None:
    data = json.loads(runner.invoke(app, ["compare", "base", "first", "--format", "json"]).stdout)
    mde = data["power"]["entity_f1"]["mde"]
    assert data["power"]["entity_f1"]["correlation_source"] == "measured"
    out = runner.invoke(app, ["compare", "base", "first"]).stdout
    assert f"this comparison could detect entity_f1 |Δ| ≥ {mde:.3f}" in " ".join(out.split())
