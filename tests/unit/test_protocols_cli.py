"""``score --protocol`` end to end: the JSON report's ``protocols`` blocks and tables, Re-DocRED
gold against itself, and bad input (offsets outside the text, reversed, not integers;
head/tail out of range; 100,000 mentions) as one line each naming the item, the rest
scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from extraction_eval.commands.score import score

app = typer.Typer()
app.command("score")(score)


@app.callback()
def _group() -> None:
    """A group, like the real CLI, so the command is invoked as `score`."""


runner = CliRunner()
ALL = ("--protocol", "semeval", "--protocol", "re", "--protocol", "docred")


def _score(gold: Path, pred: Path, *args: str) -> Any:
    return runner.invoke(
        app,
        ["score", "--gold", str(gold), "--predictions", str(pred), "--resamples", "0", *args],
    )


def _json(gold: Path, pred: Path, *args: str) -> dict[str, Any]:
    result = _score(gold, pred, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _write(path: Path, objs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def test_redocred_gold_against_itself_scores_one_in_every_protocol(shared_data: Path) -> None:
    gold = shared_data / "redocred_dev_first100.jsonl"
    report = _json(gold, gold, *ALL, "--train", str(shared_data / "conll04_train.jsonl"))
    blocks = report["protocols"]
    assert set(blocks) == {"semeval", "re_strict", "re_boundaries", "docred"}
    for mode in ("strict", "exact", "partial", "ent_type"):
        assert blocks["semeval"][mode]["f1"] == 1.0
        assert blocks["semeval"][mode]["possible"] > 1955  # every mention is a span
    for name in ("re_strict", "re_boundaries"):
        assert blocks[name]["f1"] == 1.0 and blocks[name]["fp"] == blocks[name]["fn"] == 0
    docred = blocks["docred"]
    assert docred["f1"] == docred["evidence_f1"] == docred["ign_f1"] == 1.0
    assert docred["evidence_documents"] == 100 and docred["unlocated_passages"] == 0
    assert report["entities"]["f1"] == report["relationships"]["f1"] == 1.0
    assert report["warnings"] == []


def test_tables_and_no_block_without_the_option(shared_data: Path) -> None:
    gold = shared_data / "conll04_test.jsonl"
    result = _score(gold, gold, *ALL)
    assert result.exit_code == 0, result.output
    for title in ("SemEval-2013", "re_strict", "re_boundaries", "DocRED", "Ign F1"):
        assert title in result.stdout
    assert "protocols" not in _json(gold, gold)


def test_unknown_protocol_and_train_without_docred_are_usage_errors(shared_data: Path) -> None:
    gold = shared_data / "conll04_test.jsonl"
    result = _score(gold, gold, "--protocol", "muc")
    assert result.exit_code == 2 and "unknown protocol 'muc'" in result.output
    result = _score(gold, gold, "--protocol", "re", "--train", str(gold))
    assert result.exit_code == 2 and "--train" in result.output


TEXT = "Ann works for Acme in Oslo."


def _entity(name: str, type_: str, start: Any, end: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "start": start, "end": end}


def test_bad_input_is_one_line_naming_the_item_and_the_rest_is_scored(tmp_path: Path) -> None:
    good = [
        _entity("Ann", "PER", 0, 3),
        _entity("Acme", "ORG", 14, 18),
        _entity("Oslo", "LOC", 22, 26),
    ]
    rel = {"source": "Ann", "target": "Acme", "type": "works_for", "head": 0, "tail": 1}
    gold = [
        {"id": f"g{i}", "text": TEXT, "entities": good, "relationships": [rel]} for i in range(5)
    ]
    gold.append(
        {
            "id": "many",
            "text": TEXT,
            "entities": [
                {**good[0], "mentions": [{"name": "Ann", "start": 0, "end": 3}] * 100_000}
            ],
        }
    )
    pred = [dict(g) for g in gold[:5]]
    pred[0] = {**pred[0], "entities": [_entity("Ann", "PER", 0, 300), *good[1:]]}  # outside
    pred[1] = {**pred[1], "entities": [_entity("Ann", "PER", 3, 0), *good[1:]]}  # reversed
    pred[2] = {**pred[2], "entities": [_entity("Ann", "PER", "zero", 3), *good[1:]]}  # not int
    pred[3] = {**pred[3], "relationships": [{**rel, "tail": 9}]}  # out of range
    g, p = _write(tmp_path / "gold.jsonl", gold), _write(tmp_path / "pred.jsonl", pred)
    report = _json(g, p, *ALL)
    warnings = report["warnings"]

    def one(*parts: str) -> None:
        hits = [w for w in warnings if all(x in w for x in parts)]
        assert len(hits) == 1, (parts, warnings)
        assert "\n" not in hits[0]

    one("item g0", "outside the text")
    one("item g1", "reversed")
    one("(id g2)", "start 'zero' is not an integer")
    one("item g3", "tail 9 out of range")
    one("(id many)", "100,000")
    semeval = report["protocols"]["semeval"]
    # the four good items' three entities and g0/g1's two good ones still count
    assert semeval["strict"]["correct"] == 5 * 3 - 3
    assert semeval["without_offsets"] == {"gold": 0, "predicted": 1}  # g2's Ann
    re_strict = report["protocols"]["re_strict"]
    assert (re_strict["tp"], re_strict["fn"]) == (1, 4)  # g0-g2 lose Ann's span, g3 its tail
    assert report["items"] == 5


def test_docred_alone_skips_an_out_of_range_index_with_one_line(tmp_path: Path) -> None:
    ents = [_entity("Ann", "PER", 0, 3), _entity("Acme", "ORG", 14, 18)]
    rel = {"source": "Ann", "target": "Acme", "type": "works_for", "head": 0, "tail": 1}
    gold = [{"id": "a", "text": TEXT, "entities": ents, "relationships": [rel]}]
    pred = [{"id": "a", "entities": ents, "relationships": [{**rel, "head": -1}]}]
    g, p = _write(tmp_path / "gold.jsonl", gold), _write(tmp_path / "pred.jsonl", pred)
    report = _json(g, p, "--protocol", "docred")
    assert [w for w in report["warnings"] if "out of range" in w] == [
        "protocols: item a: predicted relationship 0: head -1 out of range (2 entities); skipped"
    ]
    assert report["protocols"]["docred"]["submitted"] == 0
