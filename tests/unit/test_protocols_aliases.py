"""``docred`` resolves predicted endpoint names through alias tables (``--aliases FILE``, a
schema's ``aliases``) as well as through the gold's names, mentions and aliases; a name that
an alias group ties to two clusters stays ambiguous, never guessed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from extraction_eval.cli import app
from extraction_eval.datasets.jsonl import parse_extraction
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.clusters import alias_lookup
from extraction_eval.evaluators.protocols import ProtocolDocument, score_protocols
from extraction_eval.types import Schema

GOLD: dict[str, Any] = {
    "id": "d",
    "text": "Ann Lee moved to New York City. New York State is large.",
    "entities": [
        {"name": "Ann Lee", "type": "PER", "start": 0, "end": 7},
        {"name": "New York City", "type": "LOC", "start": 17, "end": 30},
        {"name": "New York State", "type": "LOC", "start": 32, "end": 46},
    ],
    "relationships": [
        {"source": "Ann Lee", "target": "New York City", "type": "lives_in", "head": 0, "tail": 1}
    ],
}
# names no gold form spells: only an alias table ties them to a cluster
PRED: dict[str, Any] = {
    "relationships": [{"source": "Ann", "target": "NYC", "type": "lives_in"}],
}


def _docred(groups: list[list[str]] | None = None, schema: Schema | None = None) -> dict[str, Any]:
    config = ScoringConfig(alias_groups=tuple(tuple(g) for g in groups or ()))
    doc = ProtocolDocument(
        "d",
        GOLD["text"],
        parse_extraction(GOLD),
        parse_extraction(PRED),
        {},
        alias_lookup(config, schema),
    )
    return score_protocols(["docred"], [doc]).blocks["docred"]


def test_an_alias_table_resolves_predicted_endpoint_names() -> None:
    plain = _docred()
    assert (plain["correct"], plain["unresolved"]) == (0, 2)
    table = _docred([["Ann", "Ann Lee"], ["NYC", "New York City"]])
    assert (table["correct"], table["unresolved"], table["ambiguous"]) == (1, 0, 0)
    assert table["f1"] == 1.0


def test_a_schema_alias_group_resolves_too() -> None:
    schema = Schema(aliases=[["Ann", "Ann Lee"], ["NYC", "New York City"]])
    assert _docred(schema=schema)["correct"] == 1


def test_a_group_fitting_two_clusters_is_ambiguous_not_guessed() -> None:
    block = _docred([["Ann", "Ann Lee"], ["NYC", "New York City", "New York State"]])
    assert block["ambiguous"] == 1 and block["correct"] == 0 and block["submitted"] == 1


def test_no_aliases_turns_the_table_off() -> None:
    config = ScoringConfig(aliases=False, alias_groups=(("NYC", "New York City"),))
    assert alias_lookup(config) is None
    assert alias_lookup(ScoringConfig()) is None  # no table: nothing to look up


def test_score_aliases_reach_the_docred_protocol(tmp_path: Path) -> None:
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps(GOLD) + "\n", encoding="utf-8")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"id": "d", "entities": [], **PRED}) + "\n", encoding="utf-8")
    table = tmp_path / "aliases.csv"
    table.write_text("Ann,Ann Lee\nNYC,New York City\n", encoding="utf-8")
    base = ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"]
    runner = CliRunner()

    def docred(*extra: str) -> dict[str, Any]:
        result = runner.invoke(app, [*base, "--protocol", "docred", *extra])
        assert result.exit_code == 0, result.stderr
        block: dict[str, Any] = json.loads(result.stdout)["protocols"]["docred"]
        return block

    assert docred("--aliases", str(table))["correct"] == 1
    assert docred()["correct"] == 0
    assert docred("--no-aliases")["correct"] == 0
