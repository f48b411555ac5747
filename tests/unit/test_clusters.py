"""Gold entities as clusters of surface forms (mentions, aliases, alias tables).

The Re-DocRED case is the issue's: a prediction file that is the gold itself, except that
every entity with another mention of its own is named by that mention (relationships name
their endpoints the same way). Every answer is right, so every figure must be 1.0; with
aliases off, the figures are those of the same gold with its mention lists removed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extraction_eval.analysis.score_files import score_files
from extraction_eval.evaluators import ScoringConfig, score_item
from extraction_eval.evaluators.clusters import entity_forms, gold_clusters
from extraction_eval.evaluators.config import merge_alias_groups
from extraction_eval.types import Entity, Extraction, Mention, Relationship, Schema
from tests.support.redocred import renamed_predictions

FAST = ScoringConfig(resamples=0)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _counts(report: dict[str, Any], block: str) -> tuple[int, int, int]:
    return report[block]["tp"], report[block]["fp"], report[block]["fn"]


def test_redocred_named_by_other_mentions_is_all_right(shared_data: Path, tmp_path: Path) -> None:
    gold_path = shared_data / "redocred_dev_first100.jsonl"
    gold = _lines(gold_path)
    preds, renamed = renamed_predictions(gold_path)
    assert renamed > 100  # the case exists in the data
    pred_path = _write(tmp_path / "pred.jsonl", preds)
    n_ent = sum(len(d["entities"]) for d in gold)
    n_rel = sum(len(d["relationships"]) for d in gold)

    report = score_files(gold_path, pred_path, FAST).report
    for block, n in (("entities", n_ent), ("entities_typed", n_ent), ("relationships", n_rel)):
        assert _counts(report, block) == (n, 0, 0), block
        assert report[block]["f1"] == 1.0
    # every renamed entity matched through a mention, and the report says so
    assert report["alias_matches"]["entities"] == renamed
    assert report["alias_matches"]["relationships"] > 0

    # --no-aliases: exactly the figures of the same gold without its mention lists
    stripped = [
        {**d, "entities": [{k: v for k, v in e.items() if k != "mentions"} for e in d["entities"]]}
        for d in gold
    ]
    stripped_path = _write(tmp_path / "stripped.jsonl", stripped)
    off = score_files(gold_path, pred_path, ScoringConfig(resamples=0, aliases=False)).report
    names_only = score_files(stripped_path, pred_path, FAST).report
    for block in ("entities", "entities_typed", "relationships"):
        assert _counts(off, block) == _counts(names_only, block)
    assert off["entities"]["fp"] > 0 and off["relationships"]["fp"] > off["entities"]["fp"]
    assert off["alias_matches"] == {"entities": 0, "entities_typed": 0, "relationships": 0}
    assert off["config"]["aliases"] is False


def _doc() -> tuple[list[Entity], list[Relationship]]:
    ents = [
        Entity(
            name='Wilfried "Willi" Schneider',
            type="PER",
            mentions=[Mention(name='Wilfried "Willi" Schneider'), Mention(name="Schneider")],
        ),
        Entity(name="Germany", type="LOC", mentions=[Mention(name="Deutschland")]),
        Entity(name="Paris", type="LOC", aliases=["City of Light"]),
        Entity(name="Lyon", type="LOC"),
    ]
    rels = [
        Relationship(
            source='Wilfried "Willi" Schneider', type="country", target="Germany", head=0, tail=1
        )
    ]
    return ents, rels


def _score(pred: Extraction, config: ScoringConfig = FAST, **kw: Any) -> Any:
    ents, rels = _doc()
    gold = Extraction(entities=ents, relationships=rels)
    return score_item(item_id="d", text="", gold=gold, pred=pred, config=config, **kw)


def test_a_relationship_matches_on_the_cluster() -> None:
    pred = Extraction(
        entities=[Entity(name="Schneider", type="PER"), Entity(name="Deutschland", type="LOC")],
        relationships=[Relationship(source="Schneider", type="country", target="Deutschland")],
    )
    s = _score(pred)
    assert s.relationships.tp == 1 and s.relationships.fp == 0
    assert s.relationship_pairs[0].via_alias
    assert [p.surface for p in s.entity_pairs] == [1, 1]  # the second form of each entity
    off = _score(pred, ScoringConfig(resamples=0, aliases=False))
    assert off.relationships.tp == 0 and off.entities.tp == 0


def test_a_mention_of_another_entity_matches_that_entity_never_both() -> None:
    # "City of Light" is Paris's alias: predicted as a LOC it is Paris, never Lyon too
    pred = Extraction(entities=[Entity(name="City of Light", type="LOC")])
    s = _score(pred)
    assert [(p.pred, p.gold, p.surface) for p in s.entity_pairs] == [(0, 2, 1)]
    # Lyon named as Lyon and Paris by its alias: two matches, each to its own entity
    pred2 = Extraction(
        entities=[Entity(name="Lyon", type="LOC"), Entity(name="City of Light", type="LOC")]
    )
    s2 = _score(pred2)
    assert sorted((p.pred, p.gold) for p in s2.entity_pairs) == [(0, 3), (1, 2)]


def test_alias_table_and_schema_aliases_credit_a_paraphrase() -> None:
    gold = Extraction(entities=[Entity(name="International Business Machines", type="ORG")])
    pred = Extraction(entities=[Entity(name="IBM", type="ORG")])

    def tp(config: ScoringConfig, schema: Schema | None = None) -> int:
        s = score_item(item_id="x", text="", gold=gold, pred=pred, config=config, schema=schema)
        return s.entities.tp

    assert tp(FAST) == 0  # Levenshtein cannot see it
    table = ScoringConfig(resamples=0, alias_groups=(("IBM", "International Business Machines"),))
    assert tp(table) == 1
    assert tp(ScoringConfig(resamples=0, aliases=False, alias_groups=table.alias_groups)) == 0
    assert tp(FAST, Schema(aliases=[["ibm", "international business machines"]])) == 1


def test_alias_groups_merge_chains_and_cycles() -> None:
    merged = merge_alias_groups([["A", "B"], ["b", "C"], ["C", "a"], ["X"], ["Y", "y"], ["", " "]])
    assert merged == (("A", "B", "C"),)  # one group; a lone name or one key twice is no group
    c = ScoringConfig(alias_groups=(("B", "C"), ("A", "B")))
    assert c.alias_groups == (("A", "B", "C"),) and c.aliases_of("c") == ("A", "B", "C")
    assert c.to_json()["alias_groups"] == [["A", "B", "C"]]
    assert "alias_groups" not in ScoringConfig().to_json()  # recorded configs read as before


def test_no_clusters_takes_the_name_only_path() -> None:
    gold = [Entity(name="Ann", type="PER"), Entity(name="Acme", type="ORG")]
    assert gold_clusters(gold, FAST) is None
    assert gold_clusters([Entity(name="Ann", type="PER", aliases=["ann"])], FAST) is None
    assert entity_forms(Entity(name="Ann", type="PER", aliases=["ANN", "Annie"]), FAST) == (
        "Ann",
        "Annie",
    )


def test_a_mention_list_over_the_cap_is_one_line_and_the_rest_is_scored(tmp_path: Path) -> None:
    big = {
        "id": "big",
        "text": "x",
        "entities": [
            {"name": "x", "type": "T", "mentions": [{"name": f"m{i}"} for i in range(100_000)]}
        ],
    }
    ok = {"id": "ok", "text": "Ann", "entities": [{"name": "Ann", "type": "PER"}]}
    gold = _write(tmp_path / "gold.jsonl", [big, ok])
    pred = _write(
        tmp_path / "pred.jsonl", [{"id": "ok", "entities": [{"name": "Ann", "type": "PER"}]}]
    )
    report = score_files(gold, pred, FAST).report
    assert report["items"] == 1 and report["entities"]["tp"] == 1
    problems = [w for w in report["warnings"] if "big" in w]
    assert len(problems) == 1 and "surface forms" in problems[0] and "\n" not in problems[0]


# ---- properties ---------------------------------------------------------------------------

_names = st.text(alphabet="abcdefghij", min_size=3, max_size=8)


@st.composite
def _gold_docs(draw: st.DrawFn) -> list[Entity]:
    names = draw(st.lists(_names, min_size=2, max_size=6, unique=True))
    out = []
    for i, name in enumerate(names):
        extra = draw(st.lists(_names, max_size=2))
        out.append(
            Entity(
                name=f"{name}{i}",
                type="T",
                mentions=[Mention(name=f"{m}_{i}x") for m in extra],
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(_gold_docs(), st.randoms(use_true_random=False))
def test_renaming_by_own_mention_never_lowers_by_anothers_always_does(
    gold: list[Entity], rnd: random.Random
) -> None:
    g = Extraction(entities=gold)
    exact = ScoringConfig(resamples=0, match="exact")

    def f1(pred: list[Entity]) -> float:
        s = score_item(item_id="p", text="", gold=g, pred=Extraction(entities=pred), config=exact)
        return s.values()["entity_f1"] or 0.0

    base = [Entity(name=e.name, type=e.type) for e in gold]
    assert f1(base) == 1.0
    with_mentions = [j for j, e in enumerate(gold) if e.mentions]
    if with_mentions:
        j = rnd.choice(with_mentions)
        own = list(base)
        own[j] = Entity(name=rnd.choice(gold[j].mentions).name, type="T")
        assert f1(own) >= f1(base)
    others = [(j, k) for j in range(len(gold)) for k in with_mentions if k != j]
    if others:
        j, k = rnd.choice(others)
        wrong = list(base)
        wrong[j] = Entity(name=rnd.choice(gold[k].mentions).name, type="T")
        assert f1(wrong) < f1(base)


@pytest.mark.parametrize("match", ["exact", "casefold", "fuzzy"])
def test_gold_with_clusters_against_itself_is_perfect(match: Any, shared_data: Path) -> None:
    path = shared_data / "redocred_dev_first100.jsonl"
    report = score_files(path, path, ScoringConfig(resamples=0, match=match)).report
    for block in ("entities", "entities_typed", "relationships"):
        assert report[block]["f1"] == 1.0 and report[block]["fp"] == 0


def test_schema_aliases_survive_a_label_map() -> None:
    schema = Schema(
        entity_types=["Org"],
        labels={"Org": "Organisation"},
        aliases=[["IBM", "International Business Machines"]],
    )
    assert schema.asked().aliases == [["IBM", "International Business Machines"]]
