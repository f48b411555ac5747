"""``PairedAccumulator.sort_rows`` puts the count rows in the bootstrap's canonical order in
place (the report does, so no sorted copy is made beside them): the comparison's figures, the
canonical matrices and the power analysis stay exactly what they were."""

from __future__ import annotations

import numpy as np

from extraction_eval.evaluators.counts import WIDTH
from extraction_eval.evaluators.stats.paired_delta import PairedAccumulator


def _accumulator(seed: int) -> PairedAccumulator:
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 3, size=(400, 2 * WIDTH))
    acc = PairedAccumulator()
    acc.rows.extend(int(v) for v in rows.ravel())
    acc.n = rows.shape[0]
    return acc


def test_sorting_the_rows_in_place_changes_no_figure() -> None:
    for seed in range(3):
        acc, before = _accumulator(seed), _accumulator(seed)
        expected = [m.copy() for m in before.matrices(canonical=True)]
        acc.sort_rows()
        got = acc.matrices(canonical=True)
        assert all(np.array_equal(g, e) for g, e in zip(got, expected, strict=True))
        assert [np.array_equal(g, e) for g, e in zip(acc.matrices(), expected, strict=True)] == [
            True,
            True,
        ]  # matrices() now gives them in that order
        assert acc.compare(resamples=300) == before.compare(resamples=300)
        del got  # views of the rows (as ``matrices()`` always gave): let go before adding
        acc.rows.extend([0] * 2 * WIDTH)  # rows can still be added (no buffer kept)
        acc.n += 1
