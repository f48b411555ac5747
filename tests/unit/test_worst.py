"""The worst-case view's ordering (``analysis.worst``) on hand-built results."""

from __future__ import annotations

import pytest

from extraction_eval.analysis.worst import (
    is_failing,
    severity,
    worst_by_category,
    worst_items,
)
from extraction_eval.errors import InvalidValue
from extraction_eval.types import ItemResult, Score, TaxonomyTag


def _tag(category: str, i: int = 0) -> TaxonomyTag:
    side = "gold" if category == "missed" else "pred"
    return TaxonomyTag(category=category, kind="entity", side=side, index=i, label=f"x{i}")


def _result(
    item_id: str,
    ent: float | None,
    rel: float | None,
    tags: list[str] | None = None,
    *,
    error: str | None = None,
    url: str | None = None,
) -> ItemResult:
    scores = [Score(name="extraction_error", value=error is not None, data_type="BOOLEAN")]
    if ent is not None:
        scores.append(Score(name="entity_f1", value=ent))
    if rel is not None:
        scores.append(Score(name="relationship_f1", value=rel))
    scores.append(Score(name="failure_category", value="missed", data_type="CATEGORICAL"))
    return ItemResult(
        item_id=item_id,
        error=error,
        scores=scores,
        taxonomy=None if tags is None else [_tag(c, i) for i, c in enumerate(tags)],
        trace_url=url,
    )


RESULTS = [
    _result("clean", 1.0, 1.0, []),  # never listed
    _result("half", 0.5, 1.0, ["missed"]),  # combined 0.75
    _result("zero-few", 0.0, 0.0, ["missed"]),  # combined 0, 1 wrong
    _result("err-b", 0.0, 0.0, ["missed", "missed"], error="boom"),
    _result("zero-many", 0.0, 0.0, ["missed", "spurious", "ungrounded"]),
    _result("err-a", 0.0, 0.0, [], error="timeout"),  # gold-empty item that errored
    _result("tie-b", 0.5, 0.5, ["wrong_type"]),  # combined 0.5, 1 wrong
    _result("tie-a", 0.0, 1.0, ["missed"], url="http://127.0.0.1/t/1"),  # combined 0.5, 1 wrong
    _result("only-ent", 0.2, None, ["spurious"]),  # relationship_f1 absent: mean of what it has
    _result("old-row", 0.9, 0.9),  # taxonomy not recorded, F1 below 1: still failing
]


def test_order_errored_then_combined_f1_then_wrong_objects_then_id() -> None:
    got = [w.item_id for w in worst_items(RESULTS, limit=100)]
    # err-b (2 wrong objects) before err-a (0): both errored, both F1 0
    assert got == [
        "err-b",
        "err-a",
        "zero-many",  # F1 0, 3 wrong
        "zero-few",  # F1 0, 1 wrong
        "only-ent",  # 0.2
        "tie-a",  # 0.5, 1 wrong, id a < b
        "tie-b",
        "half",  # 0.75
        "old-row",  # 0.9
    ]


def test_limit_keeps_the_most_severe_and_input_order_does_not_matter() -> None:
    top3 = [w.item_id for w in worst_items(RESULTS, limit=3)]
    assert top3 == ["err-b", "err-a", "zero-many"]
    assert [w.item_id for w in worst_items(reversed(RESULTS), limit=3)] == top3


def test_rows_carry_categories_wrong_objects_and_trace_url() -> None:
    rows = {w.item_id: w for w in worst_items(RESULTS, limit=100)}
    assert rows["zero-many"].categories == {"missed": 1, "spurious": 1, "ungrounded": 1}
    assert rows["zero-many"].wrong_objects == 3
    assert rows["tie-a"].trace_url == "http://127.0.0.1/t/1"
    assert rows["old-row"].categories is None
    assert rows["only-ent"].combined_f1 == pytest.approx(0.2)
    assert rows["half"].combined_f1 == pytest.approx(0.75)
    assert "clean" not in rows


def test_category_filter() -> None:
    got = [w.item_id for w in worst_items(RESULTS, limit=100, category="spurious")]
    assert got == ["zero-many", "only-ent"]


def test_failing_definition() -> None:
    assert not is_failing(_result("c", 1.0, 1.0, []))
    assert is_failing(_result("e", 1.0, 1.0, [], error="x"))  # errored, whatever its scores
    assert is_failing(_result("t", 1.0, 1.0, ["wrong_type"]))  # a tag on a full match
    assert severity(_result("n", None, None)) == (1, 0.0, 0, "n")


def test_by_category_takes_each_categorys_most_severe_item_in_taxonomy_order() -> None:
    got = {c: w.item_id for c, w in worst_by_category(RESULTS).items()}
    assert got == {
        "missed": "err-b",
        "wrong_type": "tie-b",
        "ungrounded": "zero-many",
        "spurious": "zero-many",
    }
    from extraction_eval.evaluators.taxonomy import CATEGORIES

    assert list(got) == [c for c in CATEGORIES if c in got]


def test_bad_limit_and_unknown_category_are_refused() -> None:
    with pytest.raises(InvalidValue, match="limit"):
        worst_items(RESULTS, limit=0)
    with pytest.raises(InvalidValue, match=r"known: .*missed"):
        worst_items(RESULTS, category="nosuch")
