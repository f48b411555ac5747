"""Alignment rules, each with a hand-computed expectation."""

from __future__ import annotations

import numpy as np
import pytest

from extraction_eval.evaluators import ScoringConfig, align_entities, align_relationships, assign
from extraction_eval.evaluators.config import MatchMode
from extraction_eval.evaluators.matching import identity_matching
from extraction_eval.evaluators.similarity import (
    jaccard_matrix,
    name_key,
    name_similarity,
    word_set,
)
from extraction_eval.types import Entity, Relationship

FUZZY = ScoringConfig()


def E(name: str, type_: str = "PER", **kw: object) -> Entity:
    return Entity(name=name, type=type_, **kw)


def R(source: str, type_: str, target: str, **kw: object) -> Relationship:
    return Relationship(source=source, type=type_, target=target, **kw)


# ---- name comparison -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "name", "key"),
    [
        ("exact", "  New York ", "New York"),
        ("exact", "New  York", "New  York"),
        ("casefold", "  New   YORK ", "new york"),
        ("casefold", "STRASSE", "strasse"),
        ("casefold", "Straße", "strasse"),  # Unicode casefold, not lower()
        ("fuzzy", "Jane\tDOE", "jane doe"),
    ],
)
def test_name_key(mode: MatchMode, name: str, key: str) -> None:
    assert name_key(name, mode) == key


def test_exact_mode_is_case_sensitive_casefold_is_not() -> None:
    pred, gold = [E("paris")], [E("Paris")]
    assert align_entities(pred, gold, ScoringConfig(match="exact")).pairs == ()
    pairs = align_entities(pred, gold, ScoringConfig(match="casefold")).pairs
    assert [(p.pred, p.gold, p.similarity) for p in pairs] == [(0, 0, 1.0)]


def test_casefold_does_not_forgive_typos() -> None:
    assert (
        align_entities([E("Springfeld")], [E("Springfield")], ScoringConfig(match="casefold")).pairs
        == ()
    )


def test_fuzzy_similarity_is_normalized_levenshtein_and_threshold_inclusive() -> None:
    gold = "abcdefghijklmnopqrst"  # 20 characters
    pred = "abcdefghijklmnopqXYZ"  # 3 substitutions -> 1 - 3/20 = 0.85 (casefolded: xyz)
    sim, adm = name_similarity([name_key(pred, "fuzzy")], [gold], "fuzzy", 0.85)
    assert sim[0, 0] == pytest.approx(0.85, abs=1e-15)
    assert bool(adm[0, 0]) is True
    _, adm = name_similarity([name_key(pred, "fuzzy")], [gold], "fuzzy", 0.86)
    assert bool(adm[0, 0]) is False


def test_fuzzy_pair_reports_similarity_and_match_type() -> None:
    # "springfeld" vs "springfield": one insertion, max length 11 -> 10/11.
    (pair,) = align_entities([E("Springfeld", "LOC")], [E("Springfield", "LOC")], FUZZY).pairs
    assert pair.similarity == pytest.approx(10 / 11)
    assert pair.match_type == "fuzzy"
    (pair,) = align_entities([E("SPRINGFIELD", "LOC")], [E("Springfield", "LOC")], FUZZY).pairs
    assert pair.similarity == 1.0
    assert pair.match_type == "exact"


# ---- the lexicographic objective -----------------------------------------------------------


def test_more_pairs_beats_higher_similarity() -> None:
    # pred0's closest gold is gold1 (0.99), but pred1 fits only gold1: two pairs win.
    adm = np.array([[True, True], [False, True]])
    sim = np.array([[0.86, 0.99], [0.0, 0.87]])
    rows, cols = assign(adm, sim)
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == [(0, 0), (1, 1)]


def test_type_equality_beats_similarity() -> None:
    # "John Smith"/ORG is an exact name match but the wrong type; "Jon Smith"/PER is 0.9.
    gold = [E("John Smith", "ORG"), E("Jon Smith", "PER")]
    al = align_entities([E("John Smith", "PER")], gold, FUZZY)
    assert [(p.gold, p.type_equal) for p in al.pairs] == [(1, True)]
    assert al.pairs[0].similarity == pytest.approx(0.9)


def test_similarity_breaks_the_remaining_ties() -> None:
    gold = [E("Jon Smyth"), E("Jon Smith")]
    (pair,) = align_entities([E("Jon Smith")], gold, FUZZY).pairs
    assert (pair.gold, pair.similarity) == (1, 1.0)


def test_count_comes_before_type_equality() -> None:
    # pred0 could take gold0 with equal type, but then pred1 (only admissible with gold0)
    # is lost: two pairs, one with a wrong type, beat one type-equal pair.
    adm = np.array([[True, True], [True, False]])
    sim = np.ones((2, 2))
    rank = np.array([[1, 0], [0, 0]])
    rows, cols = assign(adm, sim, rank, max_rank=1)
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == [(0, 1), (1, 0)]


def test_non_admissible_pairs_are_never_returned() -> None:
    adm = np.array([[False, False], [False, True]])
    rows, cols = assign(adm, np.array([[0.99, 0.99], [0.99, 0.1]]))
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == [(1, 1)]
    rows, cols = assign(np.zeros((3, 2), dtype=bool), np.zeros((3, 2)))
    assert rows.size == 0 and cols.size == 0


def test_multiset_semantics() -> None:
    al = align_entities([E("Paris", "LOC")], [E("Paris", "LOC"), E("Paris", "LOC")], FUZZY)
    assert len(al.pairs) == 1
    al = align_entities([E("Paris", "LOC")] * 3, [E("Paris", "LOC")], FUZZY)
    assert len(al.pairs) == 1


def test_typed_alignment_only_pairs_equal_types() -> None:
    pred = [E("Pierre Curie", "ORG"), E("Marie Curie", "PER")]
    gold = [E("Pierre Curie", "PER"), E("Marie Curie", "per")]  # types compare casefolded
    al = align_entities(pred, gold, FUZZY)
    assert [(p.pred, p.gold, p.type_equal) for p in al.pairs] == [(0, 0, False), (1, 1, True)]
    assert [(p.pred, p.gold) for p in al.typed_pairs] == [(1, 1)]


def test_result_does_not_depend_on_input_order() -> None:
    # Two identical names with different evidence: which gold is matched must not depend
    # on listing order (content decides, via the canonical order).
    g1 = E("Paris", "LOC", evidence="one")
    g2 = E("Paris", "LOC", evidence="two")
    a = align_entities([E("Paris", "LOC")], [g1, g2], FUZZY).pairs[0]
    b = align_entities([E("Paris", "LOC")], [g2, g1], FUZZY).pairs[0]
    assert [g1, g2][a.gold] == [g2, g1][b.gold]


def test_identity_matching_shortcut() -> None:
    assert identity_matching(["a", "b"], ["b", "a", "c"]) == [(0, 1), (1, 0)]
    assert identity_matching(["a", "x"], ["a", "b"]) is None
    assert identity_matching(["a", "a"], ["a"]) == [(0, 0)]


def test_large_matrix_aligns_everything() -> None:
    names = [f"entity number {i:04d}" for i in range(300)]
    gold = [E(n) for n in names]
    pred = [E(n.upper()) for n in reversed(names)]
    al = align_entities(pred, gold, FUZZY)
    assert len(al.pairs) == 300
    assert all(gold[p.gold].name.upper() == pred[p.pred].name for p in al.pairs)


# ---- relationships -----------------------------------------------------------------------


def _rel_pairs(
    pred: list[Relationship], gold: list[Relationship], cfg: ScoringConfig = FUZZY
) -> list[tuple[int, int, str]]:
    return [(p.pred, p.gold, p.match_type) for p in align_relationships(pred, gold, cfg).pairs]


def test_relationship_match_types() -> None:
    gold = [
        R("Acme", "employs", "Jane Doe"),
        R("Marie", "married_to", "Pierre"),
        R("Jane Doe", "manages", "Springfield plant"),
        R("Plant", "located_in", "Springfield"),
        R("Anna", "parent_of", "Elsa"),
    ]
    pred = [
        R("Acme", "employs", "Jane Doe"),  # exact
        R("Pierre", "married_to", "Marie"),  # symmetric type, swapped: exact
        R("Springfield plnt", "managed_by", "Jane Doe"),  # inverse type, swapped, fuzzy
        R("plant", "located_in", "Springfeld"),  # fuzzy endpoint
        R("Elsa", "child_of", "Anna"),  # inverse
    ]
    assert _rel_pairs(pred, gold) == [
        (0, 0, "exact"),
        (1, 1, "exact"),
        (2, 2, "inverse-fuzzy"),
        (3, 3, "fuzzy"),
        (4, 4, "inverse"),
    ]


def test_relationship_similarity_is_mean_endpoint_similarity() -> None:
    (pair,) = align_relationships(
        [R("plant", "located_in", "Springfeld")], [R("Plant", "located_in", "Springfield")], FUZZY
    ).pairs
    assert pair.similarity == pytest.approx((1.0 + 10 / 11) / 2)


def test_relationship_needs_equal_types_and_orientation() -> None:
    gold = [R("Marie", "born_in", "Warsaw")]
    assert _rel_pairs([R("Warsaw", "born_in", "Marie")], gold) == []  # reversed, not symmetric
    assert _rel_pairs([R("Marie", "lived_in", "Warsaw")], gold) == []  # other type
    assert _rel_pairs([R("Warsaw", "birthplace_of", "Marie")], gold) == [(0, 0, "inverse")]
    assert _rel_pairs([R("Marie", "birthplace_of", "Warsaw")], gold) == []  # inverse, not swapped
    assert _rel_pairs([R("marie", "BORN_IN", "warsaw")], gold) == [(0, 0, "exact")]


def test_match_type_breaks_ties_before_similarity() -> None:
    # One gold, two candidates: a straight fuzzy match and an exact inverse. exact > inverse
    # > fuzzy > inverse-fuzzy, so the inverse wins though both are admissible.
    gold = [R("Annabelle Smith", "parent_of", "Elsa Johnson")]
    fuzzy = R("Annabelle Smith", "parent_of", "Elsa Jonson")  # 11/12 on the target
    inverse = R("Elsa Johnson", "child_of", "Annabelle Smith")
    assert _rel_pairs([fuzzy], gold) == [(0, 0, "fuzzy")]
    assert _rel_pairs([fuzzy, inverse], gold) == [(1, 0, "inverse")]
    assert _rel_pairs([inverse, fuzzy], gold) == [(0, 0, "inverse")]


def test_configurable_inverse_pairs_and_symmetric_types() -> None:
    cfg = ScoringConfig(inverse_pairs=(("Teaches", "taught_by"),), symmetric=frozenset({"Knows"}))
    gold = [R("Ann", "teaches", "Bob"), R("Ann", "knows", "Cid")]
    pred = [R("Bob", "taught_by", "Ann"), R("Cid", "knows", "Ann")]
    assert _rel_pairs(pred, gold, cfg) == [(0, 0, "inverse"), (1, 1, "exact")]
    # The defaults no longer apply.
    assert _rel_pairs([R("Elsa", "child_of", "Anna")], [R("Anna", "parent_of", "Elsa")], cfg) == []


def test_exact_mode_relationships() -> None:
    cfg = ScoringConfig(match="exact")
    gold = [R("Acme", "employs", "Jane")]
    assert _rel_pairs([R("acme", "employs", "Jane")], gold, cfg) == []
    assert _rel_pairs([R(" Acme ", "Employs", "Jane")], gold, cfg) == [(0, 0, "exact")]


def test_relationships_align_one_to_one() -> None:
    gold = [R("A", "r", "B")]
    assert _rel_pairs([R("A", "r", "B"), R("A", "r", "B")], gold) == [(0, 0, "exact")]


# ---- span mode ---------------------------------------------------------------------------


def test_word_set_and_jaccard() -> None:
    assert word_set("The screen, scratches easily!") == {"the", "screen", "scratches", "easily"}
    jac = jaccard_matrix(
        [word_set("a b"), word_set(""), word_set("x")], [word_set("b c"), word_set("")]
    )
    assert jac[0, 0] == pytest.approx(1 / 3)
    assert jac[1, 1] == 1.0  # two empty quotes
    assert jac[2, 1] == 0.0


def test_span_mode_entities() -> None:
    cfg = ScoringConfig(match="span")
    gold = [
        E("battery life", "ASPECT", evidence="The battery life is excellent."),
        E("screen", "ASPECT", evidence="The screen scratches easily."),
        E("shipping", "ASPECT", evidence="Shipping was fast."),
    ]
    pred = [
        E("x", "ASPECT", evidence="battery life is excellent"),  # 4/5 = 0.8
        E("y", "ASPECT", evidence="the screen scratches easily"),  # 1.0
        E("z", "ASPECT", evidence="Shipping was slow"),  # 2/4 = 0.5, threshold inclusive
    ]
    pairs = align_entities(pred, gold, cfg).pairs
    assert [(p.pred, p.gold) for p in pairs] == [(0, 0), (1, 1), (2, 2)]
    assert [p.similarity for p in pairs] == pytest.approx([0.8, 1.0, 0.5])
    strict = ScoringConfig(match="span", span_threshold=0.6)
    assert [(p.pred, p.gold) for p in align_entities(pred, gold, strict).pairs] == [(0, 0), (1, 1)]
    # Types must be equal in span mode.
    other = [E("x", "FEATURE", evidence="battery life is excellent")]
    assert align_entities(other, gold, cfg).pairs == ()


def test_span_mode_falls_back_to_names_without_evidence() -> None:
    cfg = ScoringConfig(match="span")
    assert len(align_entities([E("Marie Curie")], [E("marie curie")], cfg).pairs) == 1


def test_span_mode_relationships() -> None:
    cfg = ScoringConfig(match="span")
    gold = [R("a", "likes", "b", evidence="Ann likes Bob a lot")]
    pred = [R("x", "likes", "y", evidence="Ann likes Bob")]  # 3/5 = 0.6
    (pair,) = align_relationships(pred, gold, cfg).pairs
    assert pair.match_type == "fuzzy"
    assert pair.similarity == pytest.approx(0.6)
    assert (
        align_relationships([R("x", "hates", "y", evidence="Ann likes Bob")], gold, cfg).pairs == ()
    )
