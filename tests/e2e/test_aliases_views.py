"""A run whose answers name entities by their mentions: the run summary, ``runs show`` and the
HTML report say how many matches came through a mention or alias."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.cli import app

runner = CliRunner()

ITEMS = [
    {
        "id": "d1",
        "text": "Ada Lovelace wrote notes. The Countess of Lovelace lived in London.",
        "entities": [
            {
                "name": "Ada Lovelace",
                "type": "PER",
                "mentions": [{"name": "Ada Lovelace"}, {"name": "Countess of Lovelace"}],
            },
            {"name": "London", "type": "LOC"},
        ],
        "relationships": [
            {"source": "Ada Lovelace", "type": "lives_in", "target": "London", "head": 0, "tail": 1}
        ],
    },
    {
        "id": "d2",
        "text": "IBM is in Armonk.",
        "entities": [
            {"name": "International Business Machines", "type": "ORG", "aliases": ["IBM"]},
            {"name": "Armonk", "type": "LOC"},
        ],
        "relationships": [],
    },
]


def test_summary_show_and_report_count_alias_matches(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(i) + "\n" for i in ITEMS), encoding="utf-8")
    up = runner.invoke(app, ["datasets", "upload", "al-views", str(data)])
    assert up.exit_code == 0, up.stderr
    run = runner.invoke(
        app,
        ["run", "--dataset", "al-views", "--name", "m1", "--pipeline",
         "tests.support.pipelines:by_mention"],
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert "through aliases" in run.stdout and "entities 2" in run.stdout
    show = runner.invoke(app, ["runs", "show", "m1", "--dataset", "al-views"])
    assert show.exit_code == 0, show.stderr
    assert "through aliases" in show.stdout
    out = tmp_path / "r.html"
    report = runner.invoke(app, ["report", "m1", "--dataset", "al-views", "--out", str(out)])
    assert report.exit_code == 0, report.stderr
    page = out.read_text(encoding="utf-8")
    assert "matched through aliases" in page and "entities 2 · relationships 1" in page
    off = runner.invoke(
        app,
        ["run", "--dataset", "al-views", "--name", "m2", "--no-aliases", "--pipeline",
         "tests.support.pipelines:by_mention"],
    )  # fmt: skip
    assert off.exit_code == 0, off.stderr
    assert "off (--no-aliases)" in off.stdout


def test_compare_shows_alias_matches_and_rescores_with_a_table(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(i) + "\n" for i in ITEMS), encoding="utf-8")
    assert runner.invoke(app, ["datasets", "upload", "al-cmp", str(data)]).exit_code == 0
    for name, extra in (("a", ["--no-aliases"]), ("b", [])):
        r = runner.invoke(
            app,
            ["run", "--dataset", "al-cmp", "--name", name, *extra, "--pipeline",
             "tests.support.pipelines:by_mention"],
        )  # fmt: skip
        assert r.exit_code == 0, r.stderr
    # A scored surface names only, so compare re-scores both with A's settings: B loses the
    # credit it had; the stored summary's alias count of B is still shown as B was scored
    cmp = runner.invoke(app, ["compare", "a", "b", "--dataset", "al-cmp", "--format", "json"])
    assert cmp.exit_code == 0, cmp.stderr
    f1 = json.loads(cmp.stdout)["metrics"]["entity_f1"]
    assert f1["a"] == f1["b"] < 1.0
    text = runner.invoke(app, ["compare", "a", "b", "--dataset", "al-cmp"])
    assert "B through aliases: entities 2" in text.stdout
    # with the mentions back on (an empty alias table), both runs are right
    table = tmp_path / "t.json"
    table.write_text(json.dumps([["x", "y"]]), encoding="utf-8")
    again = runner.invoke(
        app,
        ["compare", "a", "b", "--dataset", "al-cmp", "--format", "json", "--aliases", str(table)],
    )
    assert again.exit_code == 0, again.stderr
    assert "re-scored with --aliases" in again.stderr
    f1 = json.loads(again.stdout)["metrics"]["entity_f1"]
    assert f1["a"] == f1["b"] == 1.0
