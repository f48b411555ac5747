"""``matrix --judge`` ranks cells on judged F1 as the matrix table ranks the string F1s: the
best cell per metric, the cells whose paired bootstrap CI of Δ against the best contains 0
(or that the matrix's correction does not keep apart) marked close; items only one cell was
judged on are left out of the pairing."""

from __future__ import annotations

from typing import Any

from extraction_eval.analysis.judged import KINDS, JudgedItem
from extraction_eval.analysis.judged_matrix import judged_ranking
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.metrics import Counts, f1

N = 30


ONE_RELATIONSHIP = Counts(1, 0, 0)


def _cell(ent: list[Counts], rel: Counts = ONE_RELATIONSHIP) -> list[JudgedItem]:
    return [
        JudgedItem(
            f"item-{i}", {"entities": c, "entities_typed": c, "relationships": rel}, candidates=1
        )
        for i, c in enumerate(ent)
    ]


def _report(items: list[JudgedItem]) -> dict[str, Any]:
    """The judged block's F1s (what ``judged_report`` sums), for the cell's value."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        total = Counts(
            *(sum(getattr(j.counts[kind], a) for j in items) for a in ("tp", "fp", "fn"))
        )
        out[kind] = {"f1": f1(total)}
    return out


def _cells(**cells: list[JudgedItem]) -> list[tuple[str, dict[str, Any], list[JudgedItem]]]:
    return [(name, _report(items), items) for name, items in cells.items()]


def test_the_best_judged_cell_is_starred_and_a_clearly_worse_one_is_not_close() -> None:
    good = _cell([Counts(2, 0, 0)] * N)
    near = _cell([Counts(2, 0, 0)] * (N - 1) + [Counts(1, 1, 1)])
    bad = _cell([Counts(0, 2, 2)] * N)
    ranking = judged_ranking(_cells(good=good, near=near, bad=bad), ScoringConfig(resamples=500))
    assert ranking.best["entity_f1"] == ("good",)
    assert "near" in ranking.similar["entity_f1"] and "bad" not in ranking.similar["entity_f1"]
    assert ranking.best["relationship_f1"] == ("bad", "good", "near")  # a tie: all best
    (vs_bad,) = [t for t in ranking.tests if t["metric"] == "entity_f1" and t["cell"] == "bad"]
    assert vs_bad["best"] == "good" and vs_bad["items"] == N
    assert vs_bad["delta"] == ranking.values["bad"]["entity_f1"] - 1.0  # the judged figures
    assert vs_bad["ci"][1] < 0 and vs_bad["verdict"] == "regressed"


def test_the_matrix_correction_is_applied_over_the_judged_comparisons() -> None:
    good = _cell([Counts(2, 0, 0)] * N)
    # worse on a few items only: significant before a correction, not after Holm over many
    worse = [_cell([Counts(2, 0, 0)] * (N - k) + [Counts(1, 1, 1)] * k) for k in (3, 4, 5, 6)]
    cells = _cells(good=good, **{f"w{k}": c for k, c in enumerate(worse)})
    plain = judged_ranking(cells, ScoringConfig(resamples=2000), correction="none")
    holm = judged_ranking(cells, ScoringConfig(resamples=2000), correction="holm")
    assert holm.correction == "holm" and plain.correction == "none"
    assert all(t["p_adjusted"] == t["p_value"] for t in plain.tests)
    pairs = zip(plain.tests, holm.tests, strict=True)
    assert all(h["p_adjusted"] is None or h["p_adjusted"] >= p["p_value"] for p, h in pairs)
    assert any(h["p_adjusted"] is not None and h["p_adjusted"] > h["p_value"] for h in holm.tests)
    assert set(plain.similar["entity_f1"]) <= set(holm.similar["entity_f1"])


def test_items_one_cell_lacks_are_not_paired() -> None:
    a = _cell([Counts(2, 0, 0)] * N)
    b = _cell([Counts(0, 2, 2)] * N)[: N - 5]  # b was judged on fewer items
    ranking = judged_ranking(_cells(a=a, b=b), ScoringConfig(resamples=200))
    (test,) = [t for t in ranking.tests if t["metric"] == "entity_f1"]
    assert test["items"] == N - 5


def test_no_resamples_no_comparisons() -> None:
    ranking = judged_ranking(
        _cells(a=_cell([Counts(1, 0, 0)] * 3), b=_cell([Counts(0, 1, 1)] * 3)),
        ScoringConfig(resamples=0),
    )
    assert ranking.best["entity_f1"] == ("a",) and ranking.tests == []
    assert ranking.to_json()["best"]["entity_f1"] == ["a"]
