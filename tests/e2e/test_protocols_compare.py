"""``compare --protocol``: each stored run's protocol figures, scored against the gold the run
was scored with; a run that echoes the gold scores 1 everywhere, a run with a failed item
counts that item's gold as missed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.cli import _run_app, app

runner = CliRunner()
PIPELINES = "tests.support.pipelines"


def _ok(result: Any) -> str:
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def test_compare_protocols_per_run(shared_data: Path, tmp_path: Path) -> None:
    lines = (shared_data / "conll04_test.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    gold = [json.loads(line) for line in lines]
    path = tmp_path / "c04.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ok(runner.invoke(app, ["datasets", "upload", "c04", str(path)]))
    failed = gold[0]["id"]
    for name, pipeline, env in (
        ("gold", "echo_gold", {}),
        ("first", "first_entity", {"E2E_FAIL": failed}),
    ):
        result = runner.invoke(
            _run_app,
            ["--dataset", "c04", "--name", name, "--pipeline", f"{PIPELINES}:{pipeline}"],
            env=env,
        )
        assert result.exit_code == 0, result.stderr
    args = ["compare", "first", "gold", "--resamples", "200", "--format", "json"]
    protocols = ["--protocol", "semeval", "--protocol", "re", "--protocol", "docred"]
    data = json.loads(_ok(runner.invoke(app, [*args, *protocols])))["protocols"]
    b = data["b"]
    assert {m: b["semeval"][m]["f1"] for m in ("strict", "exact", "partial", "ent_type")} == {
        m: 1.0 for m in ("strict", "exact", "partial", "ent_type")
    }
    assert b["re_strict"]["f1"] == b["re_boundaries"]["f1"] == b["docred"]["f1"] == 1.0
    a = data["a"]["semeval"]["strict"]
    first_found = sum(1 for d in gold if d["id"] != failed and d["entities"])
    assert (a["correct"], a["actual"]) == (first_found, first_found)
    assert a["possible"] == sum(len(d["entities"]) for d in gold)
    assert a["ci"]["f1"]["low"] <= a["f1"] <= a["ci"]["f1"]["high"]
    relations = sum(len(d["relationships"]) for d in gold)
    assert (data["a"]["re_strict"]["tp"], data["a"]["re_strict"]["fn"]) == (0, relations)
    paired = data["paired"]["semeval.strict.f1"]
    # 2tp / (2tp + fp + fn) there, nervaluate's 2PR / (P + R) in the block: the last digit
    assert (paired["a"], paired["b"]) == (pytest.approx(a["f1"], abs=1e-12), 1.0)
    assert paired["ci"]["low"] <= paired["delta"] <= paired["ci"]["high"]
    assert paired["ci"]["low"] > 0 and paired["items"] == 30
    gate = ["--fail-on-regression", "semeval.strict.f1=0.01"]
    improved = runner.invoke(
        app, ["compare", "first", "gold", "--resamples", "200", *protocols, *gate]
    )
    assert improved.exit_code == 0 and "protocol gate: pass" in improved.stderr
    worse = runner.invoke(
        app, ["compare", "gold", "first", "--resamples", "200", *protocols, *gate]
    )
    assert worse.exit_code == 1 and "protocol gate: FAIL semeval.strict.f1" in worse.stderr
    alone = runner.invoke(app, ["compare", "gold", "first", *gate])
    assert alone.exit_code == 2 and "needs --protocol" in alone.stderr
    text = _ok(runner.invoke(app, ["compare", "first", "gold", "--resamples", "200", *protocols]))
    assert "A: first" in text and "B: gold" in text and "re_boundaries" in text
    assert "B against A (paired)" in text
    refused = runner.invoke(app, ["compare", "first", "gold", "--protocol", "muc"])
    assert refused.exit_code == 2 and "unknown protocol 'muc'" in refused.stderr


def test_run_prints_each_protocol_after_the_run(shared_data: Path, tmp_path: Path) -> None:
    lines = (shared_data / "conll04_test.jsonl").read_text(encoding="utf-8").splitlines()[:10]
    path = tmp_path / "c04.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ok(runner.invoke(app, ["datasets", "upload", "c04", str(path)]))
    run = ["--dataset", "c04", "--name", "gold", "--pipeline", f"{PIPELINES}:echo_gold"]
    protocols = ["--protocol", "re", "--protocol", "docred", "--train", str(path)]
    result = runner.invoke(_run_app, [*run, *protocols])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "protocols: gold" in out and "re_strict" in out and "DocRED: " in out
    refused = runner.invoke(
        _run_app, ["--dataset", "c04", "--protocol", "re", "--train", str(path)]
    )
    assert refused.exit_code == 2 and "--train" in refused.stderr


def test_run_baseline_gates_on_protocol_metrics(shared_data: Path, tmp_path: Path) -> None:
    lines = (shared_data / "conll04_test.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    path = tmp_path / "c04.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ok(runner.invoke(app, ["datasets", "upload", "c04", str(path)]))

    def run(name: str, pipeline: str, *extra: str) -> Any:
        args = ["--dataset", "c04", "--name", name, "--pipeline", f"{PIPELINES}:{pipeline}"]
        return runner.invoke(_run_app, [*args, *extra])

    assert run("gold", "echo_gold").exit_code == 0
    assert run("first", "first_entity").exit_code == 0
    gate = ["--protocol", "semeval", "--fail-on-regression", "semeval.strict.f1=0.01"]
    worse = run("worse", "first_entity", "--baseline", "gold", *gate)
    assert worse.exit_code == 1, worse.stderr
    assert "protocol gate: FAIL semeval.strict.f1" in worse.stderr
    assert "protocols vs baseline 'gold'" in worse.stdout and "semeval.strict.f1" in worse.stdout
    better = run("better", "echo_gold", "--baseline", "first", *gate)
    assert better.exit_code == 0, better.stderr
    assert "protocol gate: pass (semeval.strict.f1)" in better.stderr
    # refused before anything runs: no --protocol, a metric no chosen protocol has
    alone = run("x1", "echo_gold", "--baseline", "gold", *gate[2:])
    assert alone.exit_code == 2 and "--protocol" in alone.stderr
    other = run("x2", "echo_gold", "--baseline", "gold", "--protocol", "re", *gate[2:])
    assert other.exit_code == 2 and "unknown protocol metric 'semeval.strict.f1'" in other.stderr
    from extraction_eval.backends.local import LocalStore

    assert LocalStore().get_run("x1", "c04") is None and LocalStore().get_run("x2", "c04") is None
