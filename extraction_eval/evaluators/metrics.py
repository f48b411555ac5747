"""Counts in, ratios out. Ratios are computed once from summed integer counts and never stored.

Division rule (issue 2): when gold and predictions are both empty (tp = fp = fn = 0),
precision = recall = F1 = 1.0; any other 0/0 is 0.0. The 1.0 says "nothing expected, nothing
predicted": it is never awarded when an item in the counts failed (``failed=True``), because a
failed item predicted nothing only by crashing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray


class Counts(NamedTuple):
    """True positives, false positives, false negatives of one item or of a sum of items."""

    tp: int
    fp: int
    fn: int

    @property
    def predicted(self) -> int:
        return self.tp + self.fp

    @property
    def expected(self) -> int:
        return self.tp + self.fn

    @property
    def both_empty(self) -> bool:
        return self.tp == 0 and self.fp == 0 and self.fn == 0


def ratio(numerator: int, denominator: int, *, both_empty: bool) -> float:
    """numerator / denominator with the explicit zero-division rule above."""
    if denominator:
        return numerator / denominator
    return 1.0 if both_empty else 0.0


def vacuous(c: Counts, *, failed: bool = False) -> bool:
    """Whether a 0/0 on these counts earns the both-empty 1.0 (never when an item failed)."""
    return c.both_empty and not failed


def precision(c: Counts, *, failed: bool = False) -> float:
    return ratio(c.tp, c.tp + c.fp, both_empty=vacuous(c, failed=failed))


def recall(c: Counts, *, failed: bool = False) -> float:
    return ratio(c.tp, c.tp + c.fn, both_empty=vacuous(c, failed=failed))


def f1(c: Counts, *, failed: bool = False) -> float:
    """2tp / (2tp + fp + fn): one rounding, equal to the harmonic mean of P and R."""
    return ratio(2 * c.tp, 2 * c.tp + c.fp + c.fn, both_empty=vacuous(c, failed=failed))


def prf(c: Counts, *, failed: bool = False) -> tuple[float, float, float]:
    return precision(c, failed=failed), recall(c, failed=failed), f1(c, failed=failed)


def counts_json(c: Counts, *, failed: bool = False) -> dict[str, float | int]:
    p, r, f = prf(c, failed=failed)
    return {"tp": c.tp, "fp": c.fp, "fn": c.fn, "precision": p, "recall": r, "f1": f}


def accuracy(correct: int, total: int, *, both_empty: bool) -> float:
    """correct / total (type accuracy, relationship accuracy) under the same division rule."""
    return ratio(correct, total, both_empty=both_empty)


def mean(values: Iterable[float]) -> float | None:
    """Macro average: exactly rounded (fsum), so item order cannot change the last digit."""
    vals = list(values)
    if not vals:
        return None
    return math.fsum(vals) / len(vals)


def prf_arrays(
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    fn: NDArray[np.float64],
    failed: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Vectorised :func:`prf` for bootstrap resamples (same division rule); ``failed`` marks
    the resamples that drew a failed item."""
    empty = (tp == 0) & (fp == 0) & (fn == 0)
    if failed is not None:
        empty &= ~failed
    fill = np.where(empty, 1.0, 0.0)

    def div(num: NDArray[np.float64], den: NDArray[np.float64]) -> NDArray[np.float64]:
        safe = np.where(den > 0, den, 1.0)
        return np.asarray(np.where(den > 0, num / safe, fill), dtype=np.float64)

    return div(tp, tp + fp), div(tp, tp + fn), div(2 * tp, 2 * tp + fp + fn)


# Run-level rates where lower is better: a rise is a regression (compare's verdicts), and a
# threshold on one is a ceiling (``--fail-over``), never a floor.
LOWER_IS_BETTER: frozenset[str] = frozenset(
    {"error_rate", "schema_failure_rate", "hallucination_rate", "attribute_violation_rate"}
)
