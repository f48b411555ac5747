"""``docred`` resolves predicted endpoint names through alias tables (``--aliases FILE``, a
schema's ``aliases``) as well as through the gold's names, mentions and aliases; a name that
an alias group ties to two clusters stays ambiguous, never guessed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from extraction_eval.cli import app
from extraction_eval.datasets.jsonl import parse_extraction
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.clusters import alias_lookup
from extraction_eval.evaluators.protocols import ProtocolDocument, score_protocols
from extraction_eval.types import Entity, Extraction, Relationship, Schema

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


@st.composite
def _aliased(draw: st.DrawFn) -> tuple[Extraction, list[list[str]]]:
    """Entities with distinct names, each with an alias-table group of its own name and
    ``alias<i>``; facts between them, each stated once."""
    n = draw(st.integers(min_value=2, max_value=6))
    entities = [Entity(name=f"entity {i}", type="T") for i in range(n)]
    facts = draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.sampled_from(["a", "b"])),
            min_size=1,
            max_size=6,
            unique=True,
        )
    )
    rels = [
        Relationship(source=f"entity {h}", target=f"entity {t}", type=k, head=h, tail=t)
        for h, t, k in facts
    ]
    groups = [[f"entity {i}", f"alias{i}"] for i in range(n)]
    return Extraction(entities=entities, relationships=rels), groups


@settings(max_examples=60, deadline=None)
@given(_aliased(), st.data())
def test_renaming_by_own_alias_never_lowers_by_anothers_always_does(
    case: tuple[Extraction, list[list[str]]], data: st.DataObject
) -> None:
    gold, groups = case
    lookup = alias_lookup(ScoringConfig(alias_groups=tuple(tuple(g) for g in groups)))

    def f1(rels: list[Relationship]) -> float:
        doc = ProtocolDocument("d", "", gold, Extraction(relationships=rels), {}, lookup)
        return float(score_protocols(["docred"], [doc]).blocks["docred"]["f1"])

    def named(r: Relationship, head: str | None = None) -> Relationship:
        return Relationship(source=head or r.source, target=r.target, type=r.type)

    base = [named(r) for r in gold.relationships]
    assert f1(base) == 1.0
    own = [
        Relationship(source=f"alias{r.head}", target=f"alias{r.tail}", type=r.type)
        for r in gold.relationships
    ]
    assert f1(own) >= f1(base)  # its own alias: never lower
    first = gold.relationships[0]
    facts = {(r.head, r.tail, r.type) for r in gold.relationships}
    others = [k for k in range(len(gold.entities)) if (k, first.tail, first.type) not in facts]
    if not others:
        return
    k = data.draw(st.sampled_from(others))
    assert f1([named(first, f"alias{k}"), *base[1:]]) < f1(base)  # another's: always lower
