"""The κ ``judge calibrate`` prints is recomputed here, with Cohen's formula written out in
this test (no project code), from the per-pair file the same command wrote: on pairs that
``judge pairs`` built from Re-DocRED's mention clusters, judged by ``offline:rules``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.commands.judge import judge_app
from extraction_eval.judge.rules import RULES_MODEL

runner = CliRunner()


def cohen(labels: list[bool], verdicts: list[bool]) -> float:
    """κ = (p_o − p_e) / (1 − p_e): observed agreement against chance from the marginals."""
    n = len(labels)
    p_o = sum(a == b for a, b in zip(labels, verdicts, strict=True)) / n
    yes_l, yes_v = sum(labels) / n, sum(verdicts) / n
    p_e = yes_l * yes_v + (1 - yes_l) * (1 - yes_v)
    return (p_o - p_e) / (1 - p_e)


@pytest.fixture
def pairs(shared_data: Path, tmp_path: Path) -> Path:
    out = tmp_path / "pairs.jsonl"
    gold = shared_data / "redocred_dev_first100.jsonl"
    made = runner.invoke(judge_app, ["pairs", "--gold", str(gold), "--out", str(out)])
    assert made.exit_code == 0, made.output
    return out


def test_printed_kappa_is_recomputed_from_the_per_pair_file(pairs: Path, tmp_path: Path) -> None:
    per_pair = tmp_path / "verdicts.jsonl"
    args = ["calibrate", "--judge", RULES_MODEL, "--pairs", str(pairs), "--no-store"]
    result = runner.invoke(judge_app, [*args, "--per-pair", str(per_pair), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = [json.loads(x) for x in per_pair.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(pairs.read_text(encoding="utf-8").splitlines())
    judged = [r for r in rows if isinstance(r["verdict"], bool)]
    labels = [bool(r["same"]) for r in judged]
    verdicts = [bool(r["verdict"]) for r in judged]
    assert any(labels) and not all(labels) and any(verdicts) and not all(verdicts)
    tp = sum(a and b for a, b in zip(labels, verdicts, strict=True))
    fp = sum(b and not a for a, b in zip(labels, verdicts, strict=True))
    fn = sum(a and not b for a, b in zip(labels, verdicts, strict=True))
    tn = len(judged) - tp - fp - fn
    assert (report["tp"], report["fp"], report["fn"], report["tn"]) == (tp, fp, fn, tn)
    assert report["precision"] == pytest.approx(tp / (tp + fp))
    assert report["recall"] == pytest.approx(tp / (tp + fn))
    assert report["accuracy"] == pytest.approx((tp + tn) / len(judged))
    kappa = cohen(labels, verdicts)
    assert report["kappa"] == pytest.approx(kappa, abs=1e-12)
    assert report["kappa_ci"]["low"] <= kappa <= report["kappa_ci"]["high"]
    # and the table a person reads shows the same κ
    table = runner.invoke(judge_app, args)
    assert table.exit_code == 0, table.output
    printed = re.search(r"^\s*kappa\s+(-?\d\.\d{3})\s*$", table.stdout, re.MULTILINE)
    assert printed is not None, table.stdout
    assert printed.group(1) == f"{kappa:.3f}"
    assert f"judge κ {kappa:.2f} [" in table.stdout
