"""``run-experiment --judge``: the run's judged figures printed under its summary, read back
from the stored run (its string figures and record untouched); a bad judge is refused before
the run spends anything."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.analysis.judged_runs import judge_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.judge.rules import RulesJudge
from extraction_eval.llm.fake import register_fake, unregister_fake
from tests.support.judging import last_word_answers

runner = CliRunner()


def test_a_run_prints_judged_figures_beside_its_own() -> None:
    items = LocalStore().get_items("extraction-eval")[:3]
    # the model names every entity by its last word: string matching misses multi-word names
    renamed = last_word_answers(items)
    register_fake("renamer", {"items": renamed})
    try:
        plain = runner.invoke(
            app, ["run", "--model", "fake:renamer", "--limit", "3", "--name", "plain"]
        )
        judged = runner.invoke(
            app,
            [
                *("run", "--model", "fake:renamer", "--limit", "3", "--name", "judged"),
                *("--judge", "offline:rules"),
            ],
        )
    finally:
        unregister_fake()
    assert plain.exit_code == 0, plain.output
    assert judged.exit_code == 0, judged.output
    assert "judged by offline:rules" not in plain.stdout
    assert "judged by offline:rules" in judged.stdout
    assert "no calibration for this judge" in judged.stdout
    store = LocalStore()
    a = store.get_run("plain", "extraction-eval")
    b = store.get_run("judged", "extraction-eval")
    assert a is not None and b is not None
    assert a.summary is not None and b.summary is not None
    for key in ("entities", "entities_typed", "relationships", "ci"):
        assert json.dumps(a.summary["report"][key]) == json.dumps(b.summary["report"][key])
    assert "judged" not in b.summary["report"]  # the record holds string figures only
    assert a.summary["report"]["entities"]["f1"] < 1.0
    kept = store.run_judged(b.id)
    assert store.run_judged(a.id) == [] and len(kept) == 1
    matches = [m for ms in kept[0]["items"].values() for m in ms]
    assert matches and all(m["reason"] and m["source"] == "rules" for m in matches)
    shown = runner.invoke(app, ["runs", "show", "judged"])
    assert shown.exit_code == 0, shown.output
    assert "judged by offline:rules" in shown.stdout
    assert "judged by" not in runner.invoke(app, ["runs", "show", "plain"]).stdout
    exported = runner.invoke(app, ["runs", "export", "judged"])
    lines = [json.loads(x) for x in exported.stdout.splitlines()]
    assert lines and all(set(x["judged"]) == {RulesJudge().identity} for x in lines)
    assert any(x["judged"][RulesJudge().identity] for x in lines)
    plain_lines = runner.invoke(app, ["runs", "export", "plain"]).stdout.splitlines()
    assert all("judged" not in json.loads(x) for x in plain_lines)
    csv_text = runner.invoke(app, ["runs", "export", "judged", "--format", "csv"]).stdout
    assert "judged" in csv_text.splitlines()[0].split(",")
    again = judge_run(store, b, RulesJudge(), None, keep=False)  # the numbers printed
    assert again["items"] == 3
    assert again["entities"]["tp"] > b.summary["report"]["entities"]["tp"]
    assert again["entities"]["f1"] > b.summary["report"]["entities"]["f1"]


def test_a_bad_judge_is_refused_before_the_run() -> None:
    result = runner.invoke(
        app, ["run", "--limit", "1", "--name", "never", "--judge", "nosuch:model"]
    )
    assert result.exit_code == 2
    assert "unknown model provider" in result.stderr
    assert LocalStore().get_run("never", "extraction-eval") is None


def test_compare_shows_each_runs_judged_figures() -> None:
    items = LocalStore().get_items("extraction-eval")[:3]
    last_word = last_word_answers(items)
    register_fake("a", {"items": last_word})
    register_fake("b", {"items": {i.id: i.expected.model_dump(mode="json") for i in items}})
    try:
        for model in ("a", "b"):
            done = runner.invoke(
                app, ["run", "--model", f"fake:{model}", "--limit", "3", "--name", model]
            )
            assert done.exit_code == 0, done.output
    finally:
        unregister_fake()
    plain = runner.invoke(app, ["compare", "a", "b", "--format", "json", "--resamples", "100"])
    judged = runner.invoke(
        app,
        [
            *("compare", "a", "b", "--format", "json", "--resamples", "100"),
            *("--judge", "offline:rules"),
        ],
    )
    assert plain.exit_code == 0 and judged.exit_code == 0, judged.output
    with_judge = json.loads(judged.stdout)
    blocks = with_judge.pop("judged")
    with_judge.pop("judged_paired")
    assert with_judge == json.loads(plain.stdout)  # the paired figures are unchanged
    assert blocks["a"]["matches"]["entities"] > 0  # surnames credited to their full names
    assert blocks["b"]["matches"]["entities"] == 0  # nothing left to judge
    assert blocks["a"]["entities"]["f1"] <= blocks["b"]["entities"]["f1"]
    text = runner.invoke(
        app, ["compare", "a", "b", "--resamples", "100", "--judge", "offline:rules"]
    )
    assert text.exit_code == 0, text.output
    assert "judged run 'a' by offline:rules" in text.stdout


def test_matrix_prints_string_and_judged_f1_per_cell() -> None:
    items = LocalStore().get_items("extraction-eval")[:3]
    last_word = last_word_answers(items)
    register_fake("m1", {"items": last_word})
    register_fake("m2", {"items": {i.id: i.expected.model_dump(mode="json") for i in items}})
    try:
        done = runner.invoke(
            app,
            [
                *("matrix", "--model", "fake:m1", "--model", "fake:m2", "--limit", "3"),
                *("--name", "mx", "--judge", "offline:rules"),
            ],
        )
        refused = runner.invoke(
            app, ["matrix", "--model", "fake:m1", "--limit", "1", "--judge", "nosuch:x"]
        )
    finally:
        unregister_fake()
    assert done.exit_code == 0, done.output
    assert "judged by offline:rules" in done.stdout
    rows = [x for x in done.stdout.splitlines() if x.lstrip().startswith("mx")]
    assert len(rows) >= 2
    assert refused.exit_code == 2 and "unknown model provider" in refused.stderr


def test_report_shows_judged_metrics_beside_the_string_ones(tmp_path: Path) -> None:
    items = LocalStore().get_items("extraction-eval")[:3]
    last_word = last_word_answers(items)
    register_fake("rep", {"items": last_word})
    try:
        done = runner.invoke(app, ["run", "--model", "fake:rep", "--limit", "3", "--name", "r1"])
        assert done.exit_code == 0, done.output
    finally:
        unregister_fake()
    plain, judged = tmp_path / "plain.html", tmp_path / "judged.html"
    first = runner.invoke(app, ["report", "r1", "--out", str(plain)])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["report", "r1", "--out", str(judged), "--judge", "offline:rules"])
    assert second.exit_code == 0, second.output
    assert "Judged metrics" not in plain.read_text(encoding="utf-8")
    page = judged.read_text(encoding="utf-8")
    assert "Judged metrics" in page and "offline:rules@" in page
    assert "no calibration for this judge" in page
    # kept with the run: the next report shows it without --judge
    third = runner.invoke(app, ["report", "r1", "--out", str(plain)])
    assert third.exit_code == 0 and "Judged metrics" in plain.read_text(encoding="utf-8")
