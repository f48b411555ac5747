"""``report --protocol`` (a table per protocol, the blocks in the page's data, B against A for
two runs) and ``report --aliases`` / ``--no-aliases`` (each run re-scored so, in a labelled
block; the headline and the items stay as the run was stored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.cli_data import ok, upload_head
from tests.support.pipelines import by_mention
from tests.support.report_page import read_embedded

runner = CliRunner()
PIPELINES = "tests.support.pipelines"
PROTOCOLS = ["--protocol", "semeval", "--protocol", "re", "--protocol", "docred"]


def _run(dataset: str, name: str, pipeline: str, *extra: str) -> None:
    args = ["--dataset", dataset, "--name", name, "--pipeline", f"{PIPELINES}:{pipeline}"]
    ok(runner.invoke(_run_app, [*args, *extra]))


def _page(tmp_path: Path, *args: str) -> tuple[str, dict[str, Any]]:
    out = tmp_path / "report.html"
    ok(runner.invoke(app, ["report", *args, "--out", str(out)]))
    html = out.read_text(encoding="utf-8")
    return html, read_embedded(html)


def test_report_protocols_equal_compare_and_pair_the_runs(
    shared_data: Path, tmp_path: Path
) -> None:
    upload_head(shared_data, tmp_path, "conll04_test.jsonl", 30, "c04")
    _run("c04", "first", "first_entity")
    _run("c04", "gold", "echo_gold")
    html, page = _page(tmp_path, "first", "gold", *PROTOCOLS)
    compared = json.loads(
        ok(runner.invoke(app, ["compare", "first", "gold", "--format", "json", *PROTOCOLS]))
    )["protocols"]
    protocols = page["protocols"]
    assert protocols["names"] == ["semeval", "re", "docred"]
    assert protocols["runs"] == [compared["a"], compared["b"]]
    paired = protocols["paired"]["semeval.strict.f1"]
    assert paired["b"] == 1.0 and paired["a"] == compared["paired"]["semeval.strict.f1"]["a"]
    assert paired["ci"]["low"] <= paired["delta"] <= paired["ci"]["high"]
    for title in ("SemEval-2013 NER modes", "End-to-end RE", "DocRED", "B against A"):
        assert f"<h3>{title}" in html
    plain_html, plain = _page(tmp_path, "first", "gold")
    assert "protocols" not in plain and 'id="protocols"' not in plain_html
    one_html, one = _page(tmp_path, "gold", "--protocol", "re")
    assert one["protocols"]["runs"][0]["re_strict"]["f1"] == 1.0
    assert "paired" not in one["protocols"] and "<h3>DocRED" not in one_html
    refused = runner.invoke(app, ["report", "gold", "--protocol", "muc"])
    assert refused.exit_code == 2 and "unknown protocol 'muc'" in refused.stderr
    train = runner.invoke(app, ["report", "gold", "--protocol", "re", "--train", "x.jsonl"])
    assert train.exit_code == 2 and "--train" in train.stderr


def _scored(tmp_path: Path, gold: Path, *extra: str) -> dict[str, Any]:
    """``score`` on the by-mention predictions of ``gold``: the figures a re-scoring must give."""
    items = LocalStore().get_items("rd")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(
        "".join(json.dumps({"id": i.id, **by_mention(item=i)}) + "\n" for i in items),
        encoding="utf-8",
    )
    args = ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"]
    report: dict[str, Any] = json.loads(ok(runner.invoke(app, [*args, *extra])))
    return report


def test_report_rescored_block_beside_the_stored_figures(shared_data: Path, tmp_path: Path) -> None:
    gold = upload_head(shared_data, tmp_path, "redocred_dev_first100.jsonl", 8, "rd")
    _run("rd", "mentions", "by_mention")  # mentions used: every answer right
    _run("rd", "names", "by_mention", "--no-aliases")  # stored with surface names only
    stored = LocalStore().get_run("mentions", "rd")
    assert stored is not None
    stored_f1 = stored.summary["report"]["entities"]["f1"]
    html, page = _page(tmp_path, "mentions", "--no-aliases")
    rescored = page["rescored"]
    assert rescored["with"] == "--no-aliases"
    names_only = _scored(tmp_path, gold, "--no-aliases")
    got = rescored["runs"][0]
    for block in ("entities", "relationships"):
        assert got[block]["f1"] == names_only[block]["f1"]
    assert got["entities"]["f1"] < stored_f1  # the re-scoring changed something
    # the headline and the items stay as the run was stored
    assert page["runs"][0]["summary"]["report"]["entities"]["f1"] == stored_f1
    assert "Re-scored with --no-aliases" in html and "Only this block is re-scored" in html
    table = tmp_path / "aliases.json"
    table.write_text(json.dumps([["Unrelated Co", "UC"]]), encoding="utf-8")
    _, back = _page(tmp_path, "names", "--aliases", str(table))
    with_mentions = _scored(tmp_path, gold, "--aliases", str(table))
    got = back["rescored"]["runs"][0]
    assert got["entities"]["f1"] == with_mentions["entities"]["f1"] == 1.0
    assert got["alias_matches"]["entities"] > 0
    names = LocalStore().get_run("names", "rd")
    assert names is not None
    assert back["runs"][0]["summary"]["report"]["entities"]["f1"] < 1.0  # as stored
    assert "rescored" not in _page(tmp_path, "names")[1]
    both = runner.invoke(app, ["report", "names", "--aliases", str(table), "--no-aliases"])
    assert both.exit_code == 2 and "exclude each other" in both.stderr
