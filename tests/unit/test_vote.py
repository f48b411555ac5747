"""Weighted-majority vote of several runs' extractions: hand-computed tables."""

from __future__ import annotations

import pytest

from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.config import ScoringConfig
from extraction_eval.evaluators.vote import ABSENT, Vote, vote_item
from extraction_eval.types import Entity, Extraction, Relationship

CFG = ScoringConfig()


def ent(name: str, type_: str, evidence: str | None = None, **attrs: str) -> Entity:
    return Entity(name=name, type=type_, evidence=evidence, attributes=attrs)


def rel(s: str, t: str, o: str, evidence: str | None = None) -> Relationship:
    return Relationship(source=s, type=t, target=o, evidence=evidence)


# A (weight 2), B (1), C (1): total weight 4.
A = Extraction(
    entities=[ent("Alice", "PERSON", role="ceo"), ent("Acme", "ORG")],
    relationships=[rel("Alice", "employed_by", "Acme", "Alice works at Acme")],
)
B = Extraction(
    entities=[ent("Alice", "PERSON", role="cto"), ent("Acme", "LOC"), ent("Bob", "PERSON")],
    relationships=[rel("Alice", "employed_by", "Acme", "Alice works at Acme")],
)
C = Extraction(
    entities=[ent("alice", "PERSON", role="cto"), ent("Acme", "ORG")],
    # the inverse statement of the same fact, naming Alice in lower case
    relationships=[rel("Acme", "employs", "alice", "Acme employs Alice")],
)
VOTES = [Vote("a", 2.0, A), Vote("b", 1.0, B), Vote("c", 1.0, C)]


def by_name(result, kind="entity"):  # type: ignore[no-untyped-def]
    out = {}
    for o in result.objects:
        if o.kind == kind:
            key = (
                o.entity.name if kind == "entity" else (o.relationship.source, o.relationship.type)
            )
            out[key] = o
    return out


def test_hand_computed_table() -> None:
    result = vote_item(VOTES, CFG)
    assert result.total_weight == 4.0
    ents = by_name(result)
    assert set(ents) == {"Alice", "Acme", "Bob"}
    alice, acme, bob = ents["Alice"], ents["Acme"], ents["Bob"]
    # every run named Alice: 4/4; the name "Alice" has weight 3 (a, b), "alice" 1 (c)
    assert (alice.kept, alice.confidence, alice.support) == (True, 1.0, ("a", "b", "c"))
    assert (alice.fields["name"].value, alice.fields["name"].confidence) == ("Alice", 0.75)
    # role: ceo (a: 2) vs cto (b + c: 2): a tie, resolved towards the heaviest run, reported
    role = alice.fields["attributes.role"]
    assert (role.value, role.confidence, role.tie) == ("ceo", 0.5, True)
    assert any("attribute role" in t and "tie" in t for t in result.ties)
    assert alice.entity is not None and alice.entity.attributes == {"role": "ceo"}
    # Acme: ORG (a 2 + c 1) vs LOC (b 1)
    assert (acme.confidence, acme.fields["type"].value, acme.fields["type"].confidence) == (
        1.0,
        "ORG",
        0.75,
    )
    # Bob: only b (1/4), not kept
    assert (bob.kept, bob.confidence) == (False, 0.25)
    rels = by_name(result, "relationship")
    assert list(rels) == [("Alice", "employed_by")]
    r = rels[("Alice", "employed_by")]
    # c stated it as the inverse; it still votes for the same fact
    assert (r.kept, r.confidence, r.support) == (True, 1.0, ("a", "b", "c"))
    ev = r.fields["evidence"]
    assert (ev.value, ev.confidence) == ("Alice works at Acme", 0.75)
    assert result.expected == Extraction(
        entities=[
            ent("Alice", "PERSON", role="ceo"),
            ent("Acme", "ORG"),
        ],
        relationships=[rel("Alice", "employed_by", "Acme", "Alice works at Acme")],
    )
    # min over kept objects and their fields: the role tie at 0.5
    assert result.min_confidence == 0.5
    assert result.mean_confidence == 1.0


def test_kept_only_above_min_agreement() -> None:
    half = [
        Vote("x", 1.0, Extraction(entities=[ent("Zed", "PERSON")])),
        Vote("y", 1.0, Extraction()),
    ]
    result = vote_item(half, CFG)
    assert [o.kept for o in result.objects] == [False]  # 1/2 is not > 0.5
    assert result.min_confidence == 0.5  # leaving it out was only half sure: for review
    assert vote_item(half, CFG, min_agreement=0.4).expected.entities == [ent("Zed", "PERSON")]


def test_errored_run_abstains() -> None:
    votes = [Vote("x", 1.0, Extraction(entities=[ent("Zed", "PERSON")])), Vote("y", 3.0, None)]
    result = vote_item(votes, CFG)
    assert result.total_weight == 1.0
    assert result.abstained == ("y",)
    assert result.expected.entities == [ent("Zed", "PERSON")]


def test_all_runs_errored_keeps_nothing() -> None:
    result = vote_item([Vote("x", 1.0, None)], CFG)
    assert result.expected == Extraction()
    assert result.min_confidence is None


def test_order_of_runs_does_not_change_the_aggregate() -> None:
    forward = vote_item(VOTES, CFG)
    backward = vote_item(list(reversed(VOTES)), CFG)
    assert forward.expected == backward.expected
    assert [o.to_json() for o in forward.objects] == [o.to_json() for o in backward.objects]


def test_symmetric_relationship_swapped_is_the_same_fact() -> None:
    x = Extraction(relationships=[rel("Ann", "married_to", "Ben")])
    y = Extraction(relationships=[rel("Ben", "married_to", "Ann")])
    result = vote_item([Vote("x", 1.0, x), Vote("y", 1.0, y)], CFG)
    (r,) = result.objects
    assert (r.confidence, r.relationship.source, r.relationship.target) == (1.0, "Ann", "Ben")


def test_missing_attribute_votes_absent() -> None:
    x = Extraction(entities=[ent("Zed", "PERSON", role="ceo")])
    y = Extraction(entities=[ent("Zed", "PERSON")])
    z = Extraction(entities=[ent("Zed", "PERSON")])
    result = vote_item([Vote("x", 1.0, x), Vote("y", 1.0, y), Vote("z", 1.0, z)], CFG)
    role = result.objects[0].fields["attributes.role"]
    assert role.value == ABSENT and role.confidence == pytest.approx(2 / 3)
    assert result.expected.entities == [ent("Zed", "PERSON")]


@pytest.mark.parametrize(
    ("votes", "kwargs", "field"),
    [
        ([], {}, "models"),
        ([Vote("x", 0.0, None)], {}, "models"),
        ([Vote("x", 1.0, None), Vote("x", 1.0, None)], {}, "models"),
        ([Vote("x", 1.0, None)], {"min_agreement": 1.0}, "min_agreement"),
    ],
)
def test_bad_input(votes: list[Vote], kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidValue) as err:
        vote_item(votes, CFG, **kwargs)
    assert err.value.field == field
