"""Schema-declared attributes: the schema type, the output contract, violations and accuracy."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from extraction_eval.datasets.jsonl import item_to_json, parse_lines
from extraction_eval.errors import UsageError
from extraction_eval.evaluators import ScoringConfig, aggregate, item_scores, score_item
from extraction_eval.evaluators.stats.bootstrap import bootstrap_ratios
from extraction_eval.experiments.config import check_fail_under_attributes, parse_fail_under
from extraction_eval.experiments.summary import run_values
from extraction_eval.llm.gemini_provider import to_gemini_schema
from extraction_eval.prompts.contract import extraction_json_schema, parse_extraction
from extraction_eval.prompts.template import load_local_prompt
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult, Relationship, Schema
from tests.support.summaries import fold_summary

DECLARED = {
    "polarity": ["present", "absent", "uncertain"],
    "domain": ["symptom", "food"],
}
SCHEMA = Schema(
    entity_types=["observation", "person"],
    relationship_types=["causes"],
    attributes={"observation": DECLARED},
    relationship_attributes={"causes": {"certainty": ["stated", "suspected"]}},
)
CFG = ScoringConfig(match="span", resamples=500, seed=7)


def obs(evidence: str, **attributes: str) -> Entity:
    return Entity(name=evidence, type="observation", evidence=evidence, attributes=attributes)


# ---- the Schema type ----------------------------------------------------------------------


def test_schema_without_declarations_serialises_as_before() -> None:
    """Old datasets stay valid and byte-identical: no 'attributes' key appears."""
    old = {"entity_types": ["person"], "relationship_types": ["employed_by"]}
    schema = Schema.model_validate(old)
    assert schema.model_dump(mode="json") == old
    assert not schema.has_attributes
    item = DatasetItem.model_validate({"id": "a", "text": "t", "schema": old})
    assert item_to_json(item)["schema"] == old


def test_schema_declarations_round_trip_through_jsonl() -> None:
    line = json.dumps({"id": "j1", "text": "x", "schema": SCHEMA.model_dump(mode="json")})
    items, warnings = parse_lines([line])
    assert warnings == []
    assert items[0].schema_ == SCHEMA
    assert items[0].schema_ is not None
    assert items[0].schema_.declared_for("entity", "Observation") == DECLARED
    assert items[0].schema_.declared_for("entity", "person") is None
    assert items[0].schema_.attribute_keys() == {"polarity", "domain", "certainty"}


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"entity_types": ["x"], "attributes": {"observation": {"p": ["a"]}}}, "not in the schema"),
        ({"attributes": {"observation": {"bad key": ["a"]}}}, "attribute key 'bad key'"),
        ({"attributes": {"observation": {"p": []}}}, "non-empty"),
        ({"attributes": {"observation": {"p": ["a", "a"]}}}, "duplicate"),
        ({"attributes": {"observation": {}}}, "declares no attribute"),
    ],
)
def test_bad_declarations_are_refused_with_the_reason(schema: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Schema.model_validate(schema)
    items, warnings = parse_lines([json.dumps({"id": "bad", "text": "t", "schema": schema})])
    assert items == [] and len(warnings) == 1 and "(id bad)" in warnings[0]


# ---- the output contract ------------------------------------------------------------------


def _walk_objects(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            out.append(node)
        for value in node.values():
            out.extend(_walk_objects(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_walk_objects(value))
    return out


def test_json_schema_has_one_variant_per_declared_type_with_enum_pairs() -> None:
    js = extraction_json_schema(SCHEMA)
    entity_variants = js["properties"]["entities"]["items"]["anyOf"]
    assert len(entity_variants) == 2
    declared, rest = entity_variants
    assert declared["properties"]["type"] == {"type": "string", "enum": ["observation"]}
    pairs = declared["properties"]["attributes"]["items"]["anyOf"]
    assert [(p["properties"]["key"]["enum"], p["properties"]["value"]["enum"]) for p in pairs] == [
        (["polarity"], ["present", "absent", "uncertain"]),
        (["domain"], ["symptom", "food"]),
    ]
    # the undeclared type keeps free-form pairs
    assert rest["properties"]["type"] == {"type": "string", "enum": ["person"]}
    assert rest["properties"]["attributes"]["items"]["properties"]["key"] == {"type": "string"}
    # relationships: only 'causes' exists and it is declared -> a single closed variant
    rel = js["properties"]["relationships"]["items"]
    assert rel["properties"]["type"]["enum"] == ["causes"]
    pair = rel["properties"]["attributes"]["items"]
    assert pair["properties"]["key"]["enum"] == ["certainty"]
    assert pair["properties"]["value"]["enum"] == ["stated", "suspected"]
    # OpenAI strict mode: every object closed, every property required, root not anyOf
    assert js["type"] == "object" and "anyOf" not in js
    for node in _walk_objects(js):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])


def test_json_schema_without_declarations_is_unchanged() -> None:
    plain = Schema(entity_types=["observation", "person"], relationship_types=["causes"])
    js = extraction_json_schema(plain)
    entity = js["properties"]["entities"]["items"]
    assert "anyOf" not in entity
    assert entity["properties"]["attributes"]["items"]["properties"]["key"] == {"type": "string"}
    assert "attributes" not in js["properties"]["relationships"]["items"]["properties"]


def test_open_types_keep_a_free_variant_next_to_the_declared_one() -> None:
    js = extraction_json_schema(Schema(attributes={"observation": {"polarity": ["present"]}}))
    declared, rest = js["properties"]["entities"]["items"]["anyOf"]
    assert declared["properties"]["attributes"]["items"]["properties"]["key"]["enum"] == [
        "polarity"
    ]
    assert rest["properties"]["type"] == {"type": "string"}


def test_gemini_schema_keeps_the_variants_and_enums() -> None:
    converted = to_gemini_schema(extraction_json_schema(SCHEMA))
    declared = converted["properties"]["entities"]["items"]["anyOf"][0]
    assert "additionalProperties" not in declared
    assert declared["propertyOrdering"] == ["name", "type", "evidence", "attributes"]
    value = declared["properties"]["attributes"]["items"]["anyOf"][0]["properties"]["value"]
    assert value == {"type": "string", "enum": ["present", "absent", "uncertain"]}
    from google.genai import types

    types.Schema.model_validate(converted)  # the SDK accepts it as a response schema


def test_prompt_lists_the_declared_attributes_in_the_type_lines() -> None:
    system = load_local_prompt().compile("text", SCHEMA)[0].content
    assert "observation: polarity = present | absent | uncertain; domain = symptom | food" in system
    assert "causes: certainty = stated | suspected" in system
    plain = load_local_prompt().compile("t", Schema(entity_types=["observation"]))[0].content
    assert "Declared attributes" not in plain


def test_relationship_attribute_pairs_parse() -> None:
    raw = json.dumps(
        {
            "entities": [],
            "relationships": [
                {
                    "source": "a",
                    "type": "causes",
                    "target": "b",
                    "evidence": "a b",
                    "attributes": [{"key": "certainty", "value": "stated"}],
                }
            ],
        }
    )
    assert parse_extraction(raw).relationships[0].attributes == {"certainty": "stated"}


# ---- violations ---------------------------------------------------------------------------


TEXT = "I had a headache. I ate toast. I felt calm. Ana helped. Toast causes joy."


def test_violations_are_counted_per_object_and_the_item_is_still_scored() -> None:
    gold = Extraction(
        entities=[
            obs("I had a headache", polarity="present", domain="symptom"),
            obs("I ate toast", polarity="present", domain="food"),
        ]
    )
    pred = Extraction(
        entities=[
            # off-enum value: kept, so it disagrees with the gold 'present'
            obs("I had a headache", polarity="maybe", domain="symptom"),
            # two problems on one object: an undeclared key and an off-enum value
            obs("I ate toast", polarity="present", domain="drink", mood="happy"),
            # an undeclared type is not checked, whatever its attributes
            Entity(name="Ana", type="person", evidence="Ana helped", attributes={"x": "y"}),
        ],
        relationships=[
            Relationship(
                source="Toast",
                type="causes",
                target="joy",
                evidence="Toast causes joy",
                attributes={"certainty": "certain"},
            )
        ],
    )
    s = score_item(item_id="i", text=TEXT, gold=gold, pred=pred, config=CFG, schema=SCHEMA)
    assert not s.failed and s.entities.tp == 2  # scored as usual
    assert s.attribute_checked == 3  # two observations and one 'causes'
    assert s.attribute_violation_count == 3  # objects, not attributes
    assert [(v.kind, v.index, v.key, v.value, v.reason) for v in s.attribute_violations] == [
        ("entity", 0, "polarity", "maybe", "value not allowed"),
        ("entity", 1, "domain", "drink", "value not allowed"),
        ("entity", 1, "mood", "happy", "undeclared key"),
        ("relationship", 0, "certainty", "certain", "value not allowed"),
    ]
    scores = {x.name: x for x in item_scores(s)}
    assert scores["attribute_violations"].value == 3.0
    assert "polarity='maybe': value not allowed" in (scores["attribute_violations"].comment or "")
    assert scores["entity_f1"].value == 0.8  # tp=2, fp=1 (Ana), fn=0
    # the offending values count as disagreeing: polarity 1/2, domain 1/2
    assert scores["attr.polarity"].value == 0.5
    assert scores["attr.domain"].value == 0.5
    line = s.to_json()["attribute_violations"]
    assert line["checked"] == 3 and line["objects"] == 3 and len(line["violations"]) == 4
    assert line["violations"][2] == {
        "kind": "entity",
        "index": 1,
        "type": "observation",
        "key": "mood",
        "value": "happy",
        "reason": "undeclared key",
    }


def test_no_declarations_means_nothing_checked_and_no_violation_score() -> None:
    pred = Extraction(entities=[obs("I had a headache", polarity="whatever")])
    s = score_item(item_id="i", text=TEXT, gold=Extraction(), pred=pred, config=CFG)
    assert s.attribute_checked == 0 and s.attribute_violations == ()
    assert "attribute_violations" not in {x.name for x in item_scores(s)}


# ---- accuracy, per item and per run -------------------------------------------------------


def _two_items() -> list[Any]:
    """Item a: polarity agrees on 2 of 3 matched pairs, domain 3 of 3.
    Item b: polarity 0 of 1 (the prediction leaves it out), domain 1 of 1; one unmatched
    gold object whose attributes do not count (accuracy is over matched pairs only)."""
    text_a = "I had a headache. I ate toast. I felt calm."
    gold_a = Extraction(
        entities=[
            obs("I had a headache", polarity="present", domain="symptom"),
            obs("I ate toast", polarity="present", domain="food"),
            obs("I felt calm", polarity="absent", domain="symptom"),
        ]
    )
    pred_a = Extraction(
        entities=[
            obs("I had a headache", polarity="present", domain="symptom"),
            obs("I ate toast", polarity="uncertain", domain="food"),
            obs("I felt calm", polarity="absent", domain="symptom"),
        ]
    )
    text_b = "No fever today. Ate soup at noon."
    gold_b = Extraction(
        entities=[
            obs("No fever today", polarity="absent", domain="symptom"),
            obs("Ate soup at noon", polarity="present", domain="food"),
        ]
    )
    pred_b = Extraction(entities=[obs("No fever today", domain="symptom")])
    return [
        score_item(item_id="a", text=text_a, gold=gold_a, pred=pred_a, config=CFG, schema=SCHEMA),
        score_item(item_id="b", text=text_b, gold=gold_b, pred=pred_b, config=CFG, schema=SCHEMA),
    ]


def test_attribute_accuracy_by_hand_per_item_and_per_run() -> None:
    a, b = _two_items()
    sa = {x.name: x.value for x in item_scores(a)}
    sb = {x.name: x.value for x in item_scores(b)}
    assert sa["attr.polarity"] == pytest.approx(2 / 3) and sa["attr.domain"] == 1.0
    assert sb["attr.polarity"] == 0.0 and sb["attr.domain"] == 1.0
    report = aggregate([a, b], CFG)
    keys = report["attributes"]["keys"]
    # pooled over pairs (micro), not the mean of item values: 2/4, not (2/3 + 0) / 2
    assert (keys["polarity"]["agree"], keys["polarity"]["total"]) == (2, 4)
    assert keys["polarity"]["accuracy"] == 0.5
    assert (keys["domain"]["agree"], keys["domain"]["total"]) == (4, 4)
    assert report["attributes"]["entities"]["polarity"] == {"agree": 2, "total": 4, "accuracy": 0.5}
    assert report["attributes"]["violations"]["attribute_violation_rate"] == 0.0
    assert report["attributes"]["violations"]["checked"] == 4
    values = run_values(report)
    assert values["attr.polarity"] == 0.5 and values["attr.domain"] == 1.0
    assert values["attribute_violation_rate"] == 0.0
    assert values["attr.polarity_ci_low"] == keys["polarity"]["ci"]["low"]


def _direct_bootstrap(
    rows: list[tuple[int, int]],
    resamples: int,
    seed: int,
    levels: tuple[float, float] | None = None,
) -> list[float]:
    """The interval computed directly: rows in sorted order, n draws per resample with
    replacement, pooled ratio per resample (undefined resamples left out), percentiles."""
    ordered = np.array(sorted(rows), dtype=np.int64)
    n = len(ordered)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    num = ordered[idx, 0].sum(axis=1).astype(float)
    den = ordered[idx, 1].sum(axis=1).astype(float)
    ratios = num[den > 0] / den[den > 0]
    return [float(v) for v in np.quantile(ratios, levels or [0.025, 0.975])]


def test_attribute_ci_matches_a_direct_numpy_bootstrap() -> None:
    rows = [(2, 3), (0, 1), (0, 0), (5, 5), (1, 4), (3, 3), (0, 0), (2, 2)]
    from extraction_eval.evaluators.stats.intervals import quantile_levels

    ci = bootstrap_ratios(
        {"polarity": np.array(rows, dtype=np.int64)},
        resamples=2000,
        seed=11,
        confidence=0.95,
        method="percentile",
    )
    assert ci is not None
    assert ci["polarity"] == pytest.approx(_direct_bootstrap(rows, 2000, 11), abs=1e-12)
    # the expanded interval (the default) cuts the same resamples at its own levels
    expanded = bootstrap_ratios(
        {"polarity": np.array(rows, dtype=np.int64)}, resamples=2000, seed=11
    )
    levels = quantile_levels(8, 0.95, "expanded")
    assert expanded is not None
    assert expanded["polarity"] == pytest.approx(
        _direct_bootstrap(rows, 2000, 11, levels), abs=1e-12
    )
    # order-independent: the same items in another order give the same interval
    shuffled = bootstrap_ratios(
        {"polarity": np.array(rows[::-1], dtype=np.int64)},
        resamples=2000,
        seed=11,
        method="percentile",
    )
    assert shuffled == ci


def test_report_ci_is_the_bootstrap_of_the_items_counts() -> None:
    items = _two_items()
    report = aggregate(items, CFG)
    rows = [s.attribute_key_counts().get("polarity", (0, 0)) for s in items]
    low, high = _direct_bootstrap(rows, CFG.resamples, CFG.seed)
    assert report["attributes"]["keys"]["polarity"]["ci"] == {"low": low, "high": high}
    assert 0.0 <= low <= 0.5 <= high <= 1.0


def test_run_level_violation_rate_counts_objects() -> None:
    gold = Extraction(entities=[obs("I had a headache", polarity="present")])
    bad = Extraction(entities=[obs("I had a headache", polarity="maybe", domain="x")])
    good = Extraction(entities=[obs("I had a headache", polarity="present")])
    s1 = score_item(item_id="1", text=TEXT, gold=gold, pred=bad, config=CFG, schema=SCHEMA)
    s2 = score_item(item_id="2", text=TEXT, gold=gold, pred=good, config=CFG, schema=SCHEMA)
    results = [
        ItemResult(item_id="1", output=bad, scores=item_scores(s1)),
        ItemResult(item_id="2", output=good, scores=item_scores(s2)),
    ]
    summary = fold_summary(results, [s1, s2], CFG)
    v = summary.report["attributes"]["violations"]
    assert (v["checked"], v["objects"], v["count"], v["items"]) == (2, 1, 2, ["1"])
    assert summary.values["attribute_violation_rate"] == 0.5
    assert summary.values["attr.polarity"] == 0.5
    assert {s.name for s in summary.run_scores} >= {"attr.polarity", "attribute_violation_rate"}


# ---- --fail-under attr.<key> --------------------------------------------------------------


def test_parse_fail_under_accepts_attribute_names() -> None:
    assert parse_fail_under(["attr.polarity=0.9", "entity_f1=0.5"]) == {
        "attr.polarity": 0.9,
        "entity_f1": 0.5,
    }
    with pytest.raises(UsageError, match="names no attribute"):
        parse_fail_under(["attr.=0.9"])
    with pytest.raises(UsageError, match="unknown score 'polarity'"):
        parse_fail_under(["polarity=0.9"])


def test_attribute_names_are_checked_against_the_dataset() -> None:
    declared = DatasetItem(id="d", text="t", schema=SCHEMA)
    gold_only = DatasetItem(
        id="g",
        text="t",
        expected=Extraction(entities=[Entity(name="x", type="y", attributes={"tone": "dry"})]),
    )
    items = [declared, gold_only]
    for ok in ("attr.polarity", "attr.certainty", "attr.tone", "attr.domain_ci_low"):
        check_fail_under_attributes({ok: 0.5}, items, "ds")
    with pytest.raises(UsageError, match=r"dataset 'ds' has no attribute 'mood'.*polarity"):
        check_fail_under_attributes({"attr.mood": 0.5}, items, "ds")
    check_fail_under_attributes({"entity_f1": 0.5}, [], "ds")  # other names: not its business
