"""``compare A B`` and ``compare A B --item ID`` end to end: two runs of the scripted fake
provider that differ in known ways (a dropped entity, a reversed relationship, an evidence
quote that is not in the text, a hallucination on a gold-empty item, an errored item on each
side, a wrong type fixed), diffed through the CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from extraction_eval.analysis.compare.run_diff import diff_runs
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app

runner = CliRunner()


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> Console:
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    monkeypatch.setattr("extraction_eval.commands.compare.console", console)
    return console


def _gold() -> dict[str, dict[str, Any]]:
    items = LocalStore().get_items("extraction-eval")[:8]
    return {i.id: i.expected.model_dump(mode="json") for i in items}


def _run(name: str, model: str, steps: dict[str, Any], tmp: Path, mp: pytest.MonkeyPatch) -> None:
    script = tmp / f"{name}.json"
    script.write_text(json.dumps({"items": steps}))
    mp.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(script))
    result = runner.invoke(_run_app, ["--name", name, "--model", model, "--limit", "8"])
    assert result.exit_code == 0, result.stderr


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gold = _gold()
    # A: the gold everywhere, except sample-003 fails and Tarnby has the wrong type
    a = {k: {"json": v} for k, v in gold.items()}
    a["sample-003"] = {"error": 401, "message": "bad key"}
    wrong = json.loads(json.dumps(gold["sample-005"]))
    for e in wrong["entities"]:
        if e["name"] == "Tarnby":
            e["type"] = "organization"
    a["sample-005"] = {"json": wrong}
    elsbeth = json.loads(json.dumps(gold["sample-004"]))
    for e in elsbeth["entities"]:
        if e["name"] == "Elsbeth Oduya":
            e["evidence"] = "Elsbeth Oduya"
    a["sample-004"] = {"json": elsbeth}
    # B: the gold, except the changes the diff must find
    b = {k: {"json": v} for k, v in gold.items()}
    dropped = json.loads(json.dumps(gold["sample-001"]))
    dropped["entities"] = [e for e in dropped["entities"] if e["name"] != "Port Ansel"]
    b["sample-001"] = {"json": dropped}  # Port Ansel broken
    flipped = json.loads(json.dumps(gold["sample-002"]))
    rel = flipped["relationships"][0]
    rel["source"], rel["target"] = rel["target"], rel["source"]
    b["sample-002"] = {"json": flipped}  # employs broken and flipped
    ungrounded = json.loads(json.dumps(elsbeth))
    for e in ungrounded["entities"]:
        if e["name"] == "Elsbeth Oduya":
            e["evidence"] = "Elsbeth Oduya-Threlkeld, the mayor"
    b["sample-004"] = {"json": ungrounded}  # evidence now ungrounded
    b["sample-006"] = {  # a hallucination on the gold-empty recipe
        "json": {"entities": [{"name": "eggs", "type": "organization"}], "relationships": []}
    }
    b["sample-007"] = {"text": "{not json"}  # B errors: its 4 gold objects broken
    _run("diff-a", "fake:diff-a", a, tmp_path, monkeypatch)
    _run("diff-b", "fake:diff-b", b, tmp_path, monkeypatch)


def test_compare_lists_the_items_with_most_broken_objects_first(
    two_runs: None, narrow: Console
) -> None:
    code, _, err = _invoke("compare", "diff-a", "diff-b")
    assert code == 0, err
    out = narrow.export_text()
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "entity_f1" in out  # the run-level table stays
    assert "items with the most broken objects" in out
    listed = [
        line.split()[0]
        for line in out.splitlines()
        if line.strip().startswith("sample-") and len(line.split()) > 3
    ]
    # 007: B errored (4 broken); then 001, 002, 006 with one regression each; then the fixes
    assert listed[:4] == ["sample-007", "sample-001", "sample-002", "sample-006"]
    assert set(listed[4:]) == {"sample-003", "sample-005", "sample-004"}
    assert "sample-008" not in listed  # unchanged
    flat = " ".join(out.split())
    assert "fixed 5, broken 6, retyped 1, flipped 1" in flat
    assert "grounded +0 / −1" in flat and "1 new, 0 gone hallucinations" in flat
    assert "errored items A 1, B 1" in flat


def test_diff_counts_per_type_through_the_python_api(two_runs: None) -> None:
    store = LocalStore()
    d = diff_runs(store, get_run(store, "diff-a"), get_run(store, "diff-b"), top=3)
    assert [i.item_id for i in d.items] == ["sample-007", "sample-001", "sample-002"]
    ents = d.counts.by_type("entity")
    rels = d.counts.by_type("relationship")
    # sample-003 (A errored) has 3 entities: person, location, date; sample-005's Tarnby
    assert ents["location"]["fixed"] == 2 and ents["location"]["retyped"] == 1
    assert ents["location"]["broken"] == 1  # Port Ansel
    assert ents["organization"]["new_false_positives"] == 1  # the hallucinated eggs
    assert rels["employs"]["broken"] == 1 and rels["employs"]["flipped"] == 1
    assert rels["born_in"]["fixed"] == 1 and rels["member_of"]["broken"] == 1
    assert sum(r["broken"] for r in (*ents.values(), *rels.values())) == 6
    assert d.only_in_a == d.only_in_b == [] and not d.scoring_differs
    js = json.loads(json.dumps(d.to_json()))
    assert js["counts"]["totals"]["fixed"] == 5


def test_compare_item_shows_text_once_with_gold_a_and_b_side_by_side(
    two_runs: None, narrow: Console
) -> None:
    code, _, err = _invoke("compare", "diff-a", "diff-b", "--item", "sample-002")
    assert code == 0, err
    out = narrow.export_text()
    assert max(len(line) for line in out.splitlines()) <= 80
    text = LocalStore().get_items("extraction-eval")[1].text
    assert " ".join(out.split()).count(" ".join(text.split())) == 1
    assert "− broken ⇄ flipped" in out and "⇄ (Dorian Achterberg," in out
    assert "gold" in out and "change" in out

    code, _, err = _invoke("compare", "diff-a", "diff-b", "--item", "sample-005")
    assert code == 0, err
    out = narrow.export_text()
    assert "+ fixed ~ retyped" in out and "≠ (organization)" in out

    code, _, err = _invoke("compare", "diff-a", "diff-b", "--item", "sample-007")
    assert code == 0, err
    out = " ".join(narrow.export_text().split())
    assert "B errored (schema)" in out and "broken 4" in out

    code, _, err = _invoke("compare", "diff-a", "diff-b", "--item", "sample-006")
    assert code == 0, err
    out = narrow.export_text()
    assert "new hallucination" in out and "FP eggs (organization)" in out


def test_compare_item_unknown_id_is_one_line_exit_2(two_runs: None) -> None:
    code, out, err = _invoke("compare", "diff-a", "diff-b", "--item", "no-such-item")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "no item 'no-such-item' in run A ('diff-a') or run B ('diff-b')" in err
