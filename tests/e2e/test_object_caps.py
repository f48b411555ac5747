"""An item with more gold or predicted objects than the per-item cap is that item's error (a
row with the error), never quadratic memory; ``score`` reports it as a warning."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app

runner = CliRunner()
CAP = 5


def _entities(n: int) -> list[dict[str, str]]:
    return [{"name": f"E{i}", "type": "thing"} for i in range(n)]


def _setup(tmp: Path) -> str:
    lines = [
        {"id": "big-gold", "text": "x", "entities": _entities(CAP + 1)},
        {"id": "big-answer", "text": "flood", "entities": _entities(1)},
        {"id": "fine", "text": "y", "entities": _entities(2)},
    ]
    data = tmp / "caps.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert runner.invoke(app, ["datasets", "upload", "caps", str(data)]).exit_code == 0
    module = tmp / "flood.py"
    module.write_text(
        "CALLS = []\n"
        "def run(*, text, item, **_):\n"
        "    CALLS.append(item.id)\n"
        f"    n = {CAP + 1} if text == 'flood' else 1\n"
        "    return {'entities': [{'name': f'E{i}', 'type': 'thing'} for i in range(n)]}\n"
    )
    return f"{module}:run"


def test_an_item_over_the_object_cap_is_a_row_with_its_error(tmp_path: Path) -> None:
    spec = _setup(tmp_path)
    result = runner.invoke(
        app,
        [
            "run",
            "--dataset",
            "caps",
            "--name",
            "caps",
            "--pipeline",
            spec,
            "--max-objects",
            str(CAP),
        ],
    )
    assert result.exit_code == 0, result.output
    store = LocalStore()
    run = store.get_run("caps")
    assert run is not None and run.summary is not None
    rows = {r.item_id: r for r in store.results(run.id)}
    assert set(rows) == {"big-gold", "big-answer", "fine"}  # every item is a row
    assert rows["fine"].error is None
    assert rows["big-gold"].error_kind == rows["big-answer"].error_kind == "limit"
    assert "gold has 6 entities, over the limit of 5" in (rows["big-gold"].error or "")
    assert "prediction has 6 entities" in (rows["big-answer"].error or "")
    assert run.summary["errors"] == 2  # counted in the aggregates
    assert run.config["scoring"]["max_objects"] == CAP


def test_score_warns_and_goes_on_for_items_over_the_cap(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    preds = tmp_path / "preds.jsonl"
    gold_lines = [
        {"id": "big", "text": "x", "entities": _entities(CAP + 1)},
        {"id": "a", "text": "y", "entities": _entities(1)},
    ]
    gold.write_text("".join(json.dumps(x) + "\n" for x in gold_lines), encoding="utf-8")
    preds.write_text(json.dumps({"id": "a", "entities": _entities(CAP + 1)}) + "\n")
    result = runner.invoke(
        app,
        [
            "score",
            "--gold",
            str(gold),
            "--predictions",
            str(preds),
            "--format",
            "json",
            "--max-objects",
            str(CAP),
            "--resamples",
            "0",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "item big: the gold has 6 entities, over 5; scored as a failed item" in result.output
    assert "item a: the prediction has 6 entities, over 5; scored as no prediction" in (
        result.output
    )
    # a row either way, as in a run (before: the gold-side item was left out of the counts)
    report = json.loads(result.stdout)
    assert report["items"] == 2 and report["failed_items"] == 2, report
