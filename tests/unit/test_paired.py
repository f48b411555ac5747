"""Paired comparison: hand-computed paired bootstrap CIs, McNemar tables, per-type F1, the gate."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import ScoringConfig, score_item
from extraction_eval.evaluators.counts import COLUMNS, METRICS, item_row, metric_arrays
from extraction_eval.evaluators.item import ItemScore
from extraction_eval.evaluators.report import aggregate
from extraction_eval.evaluators.stats.paired_delta import (
    PairedAccumulator,
    PairedComparison,
    check_tolerances,
    mcnemar_exact,
    regression_gate,
)
from extraction_eval.experiments.summary import run_values
from extraction_eval.types import Entity, Extraction, Relationship


def paired_compare(
    pairs: Iterable[tuple[ItemScore, ItemScore]], **options: Any
) -> PairedComparison:
    """(A's score, B's score) per item folded into an accumulator, then compared."""
    acc = PairedAccumulator()
    for a, b in pairs:
        acc.add(a, b)
    return acc.compare(**options)


CFG = ScoringConfig(match="exact", resamples=200, seed=1)
TEXT = "Ann met Bob in Paris. Acme hired Cy."


def _ents(*names: str, kind: str = "Peop") -> list[Entity]:
    return [Entity(name=n, type=kind) for n in names]


def score(
    item_id: str,
    gold: list[Entity],
    pred: list[Entity] | None,
    *,
    gold_rels: list[Relationship] | None = None,
    pred_rels: list[Relationship] | None = None,
) -> ItemScore:
    g = Extraction(entities=gold, relationships=gold_rels or [])
    p = None if pred is None else Extraction(entities=pred, relationships=pred_rels or [])
    return score_item(item_id=item_id, text=TEXT, gold=g, pred=p, config=CFG)


# ---- hand-computed paired bootstrap ---------------------------------------------------------


def test_two_items_enumerated() -> None:
    # item 0: A finds Ann (F1 1), B finds Bob instead (tp 0, fp 1, fn 1)
    # item 1: A finds nothing (fn 1), B finds Cy (tp 1)
    # A resample holds item 0 twice (1/4), item 1 twice (1/4) or each once (1/2):
    #   {0,0}: A f1 = 1, B f1 = 0            -> Δ = -1
    #   {1,1}: A f1 = 0, B f1 = 1            -> Δ = +1
    #   {0,1}: A 2/(2+1) = 2/3, B 2/(2+2) = 1/2 -> Δ = -1/6 (the point estimate)
    # 1/4 of the mass sits at each end, so the 2.5% / 97.5% quantiles are -1 and +1.
    pairs = [
        (score("0", _ents("Ann"), _ents("Ann")), score("0", _ents("Ann"), _ents("Bob"))),
        (score("1", _ents("Cy"), []), score("1", _ents("Cy"), _ents("Cy"))),
    ]
    m = paired_compare(pairs, resamples=4000, seed=7, min_items=1).metric("entity_f1")
    assert m.a == pytest.approx(2 / 3) and m.b == pytest.approx(1 / 2)
    assert m.delta == pytest.approx(-1 / 6)
    assert (m.ci_low, m.ci_high) == (-1.0, 1.0)
    assert m.verdict == "no significant change"


def _exact_quantiles(
    rows_a: list[tuple[int, int, int]], rows_b: list[tuple[int, int, int]]
) -> dict[Fraction, Fraction]:
    """The exact bootstrap distribution of Δ entity F1 (B − A), by enumerating every ordered
    draw of n items from n (an independent loop: plain Python, exact fractions)."""
    n = len(rows_a)
    dist: Counter[Fraction] = Counter()
    for draw in itertools.product(range(n), repeat=n):

        def f1(rows: list[tuple[int, int, int]], draw: tuple[int, ...] = draw) -> Fraction:
            tp = sum(rows[i][0] for i in draw)
            fp = sum(rows[i][1] for i in draw)
            fn = sum(rows[i][2] for i in draw)
            den = 2 * tp + fp + fn
            return Fraction(2 * tp, den) if den else Fraction(1)

        dist[f1(rows_b) - f1(rows_a)] += 1
    return {v: Fraction(c, n**n) for v, c in dist.items()}


def _quantile(dist: dict[Fraction, Fraction], q: float) -> Fraction:
    """The value at probability q, asserting q is well inside one mass point (so a 10,000-draw
    sample's linear-interpolated quantile lands on it with overwhelming probability)."""
    cum = Fraction(0)
    for v in sorted(dist):
        lo, cum = cum, cum + dist[v]
        if lo < q < cum:
            assert q - float(lo) > 0.005 and float(cum) - q > 0.005, "q too close to a step"
            return v
    raise AssertionError("unreachable")


def test_four_items_match_an_exact_enumeration() -> None:
    # A and B differ item by item; the exact bootstrap distribution of Δ over all 4**4 ordered
    # draws gives the CI the sampled bootstrap must reproduce.
    gold = [_ents("Ann", "Bob"), _ents("Cy"), _ents("Paris", kind="Loc"), _ents("Acme")]
    pred_a: list[list[Entity]] = [_ents("Ann"), [], _ents("Paris", kind="Loc"), _ents("Acme")]
    pred_b: list[list[Entity]] = [_ents("Ann", "Bob"), _ents("Cy", "Zed"), [], _ents("Acme")]
    pairs = [
        (score(str(i), g, a), score(str(i), g, b))
        for i, (g, a, b) in enumerate(zip(gold, pred_a, pred_b, strict=True))
    ]
    rows_a = [tuple(s.entities) for s, _ in pairs]
    rows_b = [tuple(s.entities) for _, s in pairs]
    dist = _exact_quantiles(rows_a, rows_b)  # type: ignore[arg-type]
    m = paired_compare(pairs, resamples=10_000, seed=42, method="percentile").metric("entity_f1")
    assert m.ci_low == pytest.approx(float(_quantile(dist, 0.025)))
    assert m.ci_high == pytest.approx(float(_quantile(dist, 0.975)))
    # expanded (the default): at n = 4 the quantiles sit at Φ(−√(4/3)·t₀.₉₇₅,₃) ≈ 0.012 %,
    # below the exact distribution's lowest step: the interval is its whole range
    expanded = paired_compare(pairs, resamples=10_000, seed=42).metric("entity_f1")
    assert (expanded.ci_low, expanded.ci_high) == (float(min(dist)), float(max(dist)))


def test_identical_runs_have_a_zero_interval_everywhere() -> None:
    scores = [
        score("0", _ents("Ann"), _ents("Ann", "Bob")),
        score("1", _ents("Cy"), None),
        score("2", [], _ents("Bob")),
    ]
    result = paired_compare(zip(scores, scores, strict=True), resamples=500, seed=1, min_items=1)
    for m in result.metrics:
        if m.delta is not None:
            assert (m.delta, m.ci_low, m.ci_high) == (0.0, 0.0, 0.0), m.name
            assert m.verdict == "no significant change"


def test_a_gain_on_every_item_is_significant_when_paired() -> None:
    # B finds one more entity than A on every item: paired, every replicate improves
    # (Δ > 0, verdict improved), though item difficulty varies wildly.
    rng = random.Random(0)
    pairs = []
    names = ["Ann", "Bob", "Cy", "Paris", "Acme"]
    for i in range(40):
        k = rng.randint(1, 5)
        gold = _ents(*names[:k])
        a_found = rng.randint(0, k - 1)
        pairs.append(
            (score(str(i), gold, gold[:a_found]), score(str(i), gold, gold[: a_found + 1]))
        )
    m = paired_compare(pairs, resamples=2000, seed=3).metric("entity_recall")
    assert m.ci_low is not None and m.ci_low > 0
    assert m.verdict == "improved"


def test_lower_is_better_flips_the_verdict() -> None:
    # B errors on 10 of 12 items A got right: error_rate rises, which is a regression
    pairs = [
        (score(str(i), _ents("Ann"), _ents("Ann")), score(str(i), _ents("Ann"), None))
        for i in range(10)
    ] + [
        (score(str(i), _ents("Ann"), _ents("Ann")), score(str(i), _ents("Ann"), _ents("Ann")))
        for i in range(10, 12)
    ]
    result = paired_compare(pairs, resamples=2000, seed=2)
    err = result.metric("error_rate")
    assert (err.a, err.b, err.delta) == (0.0, pytest.approx(10 / 12), pytest.approx(10 / 12))
    assert err.ci_low is not None and err.ci_low > 0
    assert err.verdict == "regressed"
    assert result.metric("entity_f1").verdict == "regressed"
    assert err.worst_case() == -err.ci_high  # type: ignore[operator]


def test_every_item_moving_alike_is_evidence() -> None:
    # B errors on all 10 items: Δ = 1 on every resample, a CI of zero width, but 10 items
    # changed the metric: strong evidence (McNemar p = 2/1024), not a lack of it
    pairs = [
        (score(str(i), _ents("Ann"), _ents("Ann")), score(str(i), _ents("Ann"), None))
        for i in range(10)
    ]
    result = paired_compare(pairs, resamples=500, seed=2)
    err = result.metric("error_rate")
    assert (err.delta, err.ci_low, err.ci_high) == (1.0, 1.0, 1.0)
    assert err.verdict == "regressed" and err.insufficient is None
    assert result.mcnemar.p_value == pytest.approx(2 / 1024)


def test_a_metric_defined_on_one_item_of_many_is_insufficient() -> None:
    # 12 items, one gold-empty: B hallucinates on it. The hallucination rate is defined only on
    # resamples that draw that item and is the same on all of them: a zero-width CI resting on
    # ONE item, a small-N comparison hidden in a large one
    pairs = [
        (score(str(i), _ents("Ann"), _ents("Ann")), score(str(i), _ents("Ann"), _ents("Ann")))
        for i in range(11)
    ] + [(score("e", [], []), score("e", [], _ents("Bob")))]
    result = paired_compare(pairs, resamples=500, seed=2)
    h = result.metric("hallucination_rate")
    assert (h.a, h.b, h.ci_low, h.ci_high) == (0.0, 1.0, 1.0, 1.0)
    assert h.verdict == "insufficient"
    assert h.insufficient == (
        "the CI of Δ has zero width and only 1 items changed the metric (fewer than 10)"
    )
    (failure,) = regression_gate(result, {"hallucination_rate": 0.5})
    assert "insufficient evidence (the CI of Δ has zero width" in failure.describe()


def test_same_seed_same_bytes_in_any_item_order() -> None:
    rng = random.Random(5)
    names = ["Ann", "Bob", "Cy", "Paris", "Acme"]
    pairs = []
    for i in range(30):
        gold = _ents(*rng.sample(names, rng.randint(0, 3)))
        a = _ents(*rng.sample(names, rng.randint(0, 3)))
        b = None if i % 7 == 0 else _ents(*rng.sample(names, rng.randint(0, 3)))
        pairs.append((score(str(i), gold, a), score(str(i), gold, b)))
    first = json.dumps(paired_compare(pairs, resamples=300, seed=9).to_json())
    again = json.dumps(paired_compare(pairs, resamples=300, seed=9).to_json())
    shuffled = pairs[:]
    rng.shuffle(shuffled)
    other = json.dumps(paired_compare(shuffled, resamples=300, seed=9).to_json())
    assert first == again == other
    assert first != json.dumps(paired_compare(pairs, resamples=300, seed=10).to_json())


def test_point_values_equal_the_run_report() -> None:
    # A and B's own values are the run summary's (same division and failure rules)
    rels = [Relationship(source="Acme", type="Employs", target="Cy")]
    scores = [
        score("0", _ents("Ann"), _ents("Ann", "Bob"), gold_rels=rels, pred_rels=rels),
        score("1", _ents("Cy"), None, gold_rels=rels),
        score("2", [], _ents("Bob")),
        score("3", [], []),
        score("4", [], None),
    ]
    expected = run_values(aggregate(scores, CFG))
    acc = PairedAccumulator()
    for s in scores:
        acc.add(s, s)
    a, _ = acc.matrices()
    values = metric_arrays(a.sum(axis=0)[None, :].astype(np.float64), len(scores))
    for name in METRICS:
        if name in expected:
            assert values[name][0] == pytest.approx(expected[name]), name
        elif name not in ("error_rate", "schema_failure_rate"):
            assert math.isnan(values[name][0]), name
    assert values["error_rate"][0] == pytest.approx(2 / 5)


def test_item_row_has_every_column() -> None:
    assert len(item_row(score("0", [], []))) == len(COLUMNS)


# ---- McNemar --------------------------------------------------------------------------------


def test_mcnemar_tables() -> None:
    assert mcnemar_exact(0, 0).p_value == 1.0
    assert mcnemar_exact(3, 0).p_value == pytest.approx(0.25)  # 2 * (1/2)**3
    assert mcnemar_exact(5, 1).p_value == pytest.approx(14 / 64)  # 2 * (1 + 6) / 2**6
    assert mcnemar_exact(1, 5).p_value == pytest.approx(14 / 64)
    assert mcnemar_exact(1, 0).p_value == 1.0


def test_mcnemar_counts_items() -> None:
    pairs = [
        # right in both
        (score("0", _ents("Ann"), _ents("Ann")), score("0", _ents("Ann"), _ents("Ann"))),
        # wrong in A (missed), right in B
        (score("1", _ents("Cy"), []), score("1", _ents("Cy"), _ents("Cy"))),
        # gold-empty: right in A (no object), wrong in B (a hallucination)
        (score("2", [], []), score("2", [], _ents("Bob"))),
        # right in A, errored in B: an errored item is wrong
        (score("3", _ents("Ann"), _ents("Ann")), score("3", _ents("Ann"), None)),
        # gold-empty and errored in A: wrong; right in B
        (score("4", [], None), score("4", [], [])),
        # wrong in both
        (score("5", _ents("Ann"), _ents("Bob")), score("5", _ents("Ann"), [])),
    ]
    mc = paired_compare(pairs, resamples=10, seed=1).mcnemar
    assert (mc.both_right, mc.b01, mc.b10, mc.both_wrong) == (1, 2, 2, 1)
    assert mc.p_value == 1.0


def test_no_discordant_item_gives_p_one() -> None:
    pairs = [(score(str(i), _ents("Ann"), _ents("Ann")),) * 2 for i in range(5)]
    mc = paired_compare(pairs, resamples=10, seed=1).mcnemar  # type: ignore[arg-type]
    assert (mc.b01, mc.b10, mc.p_value, mc.both_right) == (0, 0, 1.0, 5)


def test_a_single_item() -> None:
    pairs = [(score("0", _ents("Ann"), []), score("0", _ents("Ann"), _ents("Ann")))]
    result = paired_compare(pairs, resamples=100, seed=1)
    assert (result.mcnemar.b01, result.mcnemar.b10, result.mcnemar.p_value) == (1, 0, 1.0)
    f = result.metric("entity_f1")
    # one item: every resample is that item, the interval is the point; never "improved"
    assert (f.a, f.b, f.delta, f.ci_low, f.ci_high) == (0.0, 1.0, 1.0, 1.0, 1.0)
    assert f.verdict == "insufficient"
    assert f.insufficient == "1 paired items, fewer than the minimum of 10"
    # a floor of 1 is the user's choice: then one item decides
    low = paired_compare(pairs, resamples=100, seed=1, min_items=1).metric("entity_f1")
    assert low.verdict == "improved"


def test_all_items_errored() -> None:
    pairs = [
        (score(str(i), _ents("Ann"), None), score(str(i), _ents("Ann"), None)) for i in range(4)
    ]
    result = paired_compare(pairs, resamples=100, seed=1)
    assert (result.mcnemar.both_wrong, result.mcnemar.b01, result.mcnemar.b10) == (4, 0, 0)
    assert result.mcnemar.p_value == 1.0
    for name in ("entity_f1", "relationship_f1", "relationship_precision"):
        m = result.metric(name)  # never the both-empty 1.0: the items failed
        assert (m.a, m.b, m.delta, m.ci_low, m.ci_high) == (0.0, 0.0, 0.0, 0.0, 0.0), name
    assert result.metric("error_rate").a == 1.0


# ---- per type -------------------------------------------------------------------------------


def test_per_type_f1_and_support() -> None:
    gold = [*_ents("Ann", "Bob"), Entity(name="Paris", type="Loc")]
    pairs = [
        (
            score("0", gold, _ents("Ann")),  # Peop tp 1 fn 1; Loc fn 1
            score("0", gold, [*_ents("Ann", "Bob"), Entity(name="Paris", type="loc")]),
        )
    ]
    result = paired_compare(pairs, resamples=10, seed=1)
    by_label = {t.label: t for t in result.entity_types}
    assert set(by_label) == {"Loc", "Peop"}  # "loc" and "Loc" are one type, first spelling
    peop, loc = by_label["Peop"], by_label["Loc"]
    assert (peop.support, peop.a_f1, peop.b_f1) == (2, pytest.approx(2 / 3), 1.0)
    assert (loc.support, loc.a_f1, loc.b_f1, loc.delta) == (1, 0.0, 1.0, 1.0)


# ---- the gate -------------------------------------------------------------------------------


def test_gate_uses_the_bad_side_bound() -> None:
    pairs = [
        (score("0", _ents("Ann"), _ents("Ann")), score("0", _ents("Ann"), _ents("Ann"))),
        (score("1", _ents("Cy"), _ents("Cy")), score("1", _ents("Cy"), [])),
    ]
    result = paired_compare(pairs, resamples=2000, seed=1, min_items=1)
    f = result.metric("entity_f1")
    assert f.ci_low == -1.0  # the resample {1, 1}
    assert [g.metric for g in regression_gate(result, {"entity_f1": 0.5})] == ["entity_f1"]
    assert regression_gate(result, {"entity_f1": 1.0}) == []
    err = regression_gate(result, {"error_rate": 0.1})
    assert err == []  # nobody errored: error_rate's CI is [0, 0]


def test_gate_refuses_unknown_metrics_and_bad_tolerances() -> None:
    with pytest.raises(InvalidValue, match="unknown metric 'entity_f2'"):
        check_tolerances({"entity_f2": 0.1})
    with pytest.raises(InvalidValue, match="tolerance must be between 0 and 1"):
        check_tolerances({"entity_f1": -0.1})
    with pytest.raises(InvalidValue, match="tolerance must be between 0 and 1"):
        check_tolerances({"entity_f1": float("nan")})


def test_no_paired_items_has_no_interval_and_fails_a_gate() -> None:
    result = PairedAccumulator().compare(resamples=10, seed=1)
    f = result.metric("entity_f1")
    assert (result.items, f.ci_low, f.ci_high, f.verdict) == (0, None, None, "undefined")
    assert result.mcnemar.p_value == 1.0
    (failure,) = regression_gate(result, {"entity_f1": 0.5})
    assert failure.bound is None and "no CI" in failure.describe()


def test_parse_tolerances() -> None:
    from extraction_eval.analysis.compare.runs import parse_tolerances

    assert parse_tolerances(["entity_f1=0.01", " error_rate = 0 "]) == {
        "entity_f1": 0.01,
        "error_rate": 0.0,
    }
    for bad, message in (
        ("entity_f1", "expects METRIC=TOLERANCE"),
        ("=0.1", "expects METRIC=TOLERANCE"),
        ("entity_f1=high", "must be a number"),
        ("entity_f1=2", "between 0 and 1"),
    ):
        with pytest.raises(InvalidValue, match=message):
            parse_tolerances([bad])
    with pytest.raises(InvalidValue, match="given twice"):
        parse_tolerances(["entity_f1=0.1", "entity_f1=0.2"])


def test_gate_mirrors_lower_is_better_metrics() -> None:
    # B errors on one of two items: error_rate Δ is 0, 1/2 or 1 per resample -> CI [0, 1]
    pairs = [
        (score("0", _ents("Ann"), _ents("Ann")), score("0", _ents("Ann"), _ents("Ann"))),
        (score("1", _ents("Cy"), _ents("Cy")), score("1", _ents("Cy"), None)),
    ]
    result = paired_compare(pairs, resamples=2000, seed=1, min_items=1)
    err = result.metric("error_rate")
    assert (err.ci_low, err.ci_high, err.worst_case()) == (0.0, 1.0, -1.0)
    (failure,) = regression_gate(result, {"error_rate": 0.5})
    assert failure.bound == 1.0 and failure.lower_is_better
    assert "lower is better" in failure.describe() and "+1.0000 > +0.5" in failure.describe()
    assert regression_gate(result, {"error_rate": 1.0}) == []


def test_mcnemar_p_value_is_scipys_binomtest_to_the_last_bit() -> None:
    import random

    from scipy.stats import binomtest

    from extraction_eval.evaluators.stats.mcnemar import binom_two_sided_p

    cases = [(k, n) for n in range(1, 121) for k in range(n + 1)]
    rng = random.Random(8)
    for _ in range(300):
        n = rng.randint(121, 40_000)
        cases.append((max(0, min(n, round(n / 2 + rng.gauss(0, 2 * n**0.5)))), n))
        cases.append((rng.randint(0, n), n))
    for k, n in cases:
        assert binom_two_sided_p(k, n) == float(binomtest(k, n, 0.5).pvalue), (k, n)


def test_distinct_columns_are_what_np_unique_gives() -> None:
    # paired_sums resamples each distinct non-zero column once; finding them by their bytes
    # (np.unique sorted 100,000-field records: ~0.6 s at 100,000 items) must give np.unique's
    # columns in its order, or the bootstrap's canonical row order and draws would change
    from extraction_eval.evaluators.stats.paired_delta import _unique_columns

    rng = np.random.default_rng(3)
    for n in (1, 4, 50, 400):
        for width in (1, 4, 10):
            m = rng.integers(-2, 3, size=(n, width)).astype(np.int64)
            if width >= 4:
                m[:, 1], m[:, 2], m[:, 3] = m[:, 0], 0, -m[:, 0]  # a repeat, a zero column
            nonzero = np.flatnonzero(m.any(axis=0))
            want_index = np.full(width, -1)
            if nonzero.size:
                want, inverse = np.unique(m[:, nonzero], axis=1, return_inverse=True)
                want_index[nonzero] = np.asarray(inverse).reshape(-1)
            else:
                want = m[:, :0]
            got, index = _unique_columns(m)
            assert np.array_equal(got, want) and np.array_equal(index, want_index)
