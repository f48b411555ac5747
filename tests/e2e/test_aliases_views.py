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
