"""``matrix --judge``: the cells ranked on judged F1 as the matrix table ranks them on the
string F1s (``analysis/matrix_table.py``): the best cell per metric, and the cells not
significantly different from it: the paired bootstrap CI of Δ (cell − best) over the items
both were judged on contains 0, or the difference does not survive the matrix's correction
(over every judged (metric, cell) comparison), or too few items are shared. The same
resampling, seed, confidence and CI method as the string table (the run's scoring
settings), on each item's judged tp/fp/fn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from extraction_eval.analysis.judged import KINDS, JudgedItem
from extraction_eval.analysis.matrix_table import HEADLINE, compare_with_best
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.counts import COLUMN_INDEX, WIDTH
from extraction_eval.evaluators.stats.multiple_testing import Correction
from extraction_eval.evaluators.stats.repeat_spread import best_cells

# the matrix's headline metric -> (its judged block, its count columns' prefix)
JUDGED_HEADLINE = dict(
    zip(HEADLINE, zip(KINDS, ("entity", "entity_typed", "relationship"), strict=True), strict=True)
)


@dataclass
class JudgedRanking:
    """Per headline metric (``entity_f1``, ...) on judged figures: each cell's judged value,
    the best cell(s), the cells not significantly different from the best, and each
    comparison with the best (Δ, CI, raw and adjusted p, verdict)."""

    values: dict[str, dict[str, float | None]]  # cell -> metric -> judged value
    best: dict[str, tuple[str, ...]]
    similar: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tests: list[dict[str, Any]] = field(default_factory=list)
    correction: Correction = "holm"

    def to_json(self) -> dict[str, Any]:
        return {
            "values": self.values,
            "best": {k: list(v) for k, v in self.best.items()},
            "not_significantly_different": {k: list(v) for k, v in self.similar.items()},
            "comparisons_with_best": {"correction": self.correction, "tests": self.tests},
        }


def judged_value(report: dict[str, Any], metric: str) -> float | None:
    """A judged block's value of a headline metric (``entity_f1`` -> ``entities.f1``)."""
    value = (report.get(JUDGED_HEADLINE[metric][0]) or {}).get("f1")
    return float(value) if isinstance(value, (int, float)) else None


def judged_ranking(
    cells: Sequence[tuple[str, dict[str, Any], Sequence[JudgedItem]]],
    scoring: ScoringConfig,
    correction: Correction = "holm",
) -> JudgedRanking:
    """``cells``: (name, judged block, judged items) per matrix cell."""
    values = {name: {m: judged_value(report, m) for m in HEADLINE} for name, report, _ in cells}
    best = best_cells(values, HEADLINE)
    ids = sorted({j.item_id for _, _, judged in cells for j in judged})
    where = {item_id: i for i, item_id in enumerate(ids)}
    rows = {name: _rows(judged, where) for name, _, judged in cells}
    similar, tests = compare_with_best(
        [name for name, _, _ in cells], rows.__getitem__, best, scoring, correction
    )
    return JudgedRanking(values, best, similar, tests, correction)


def _rows(
    judged: Sequence[JudgedItem], where: dict[str, int]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """A cell's judged counts as count rows (only the P/R/F1 columns and ``failed`` filled:
    what the judged F1s are computed from), and which items it has."""
    matrix = np.zeros((len(where), WIDTH), dtype=np.int64)
    present = np.zeros(len(where), dtype=np.bool_)
    for item in judged:
        i = where[item.item_id]
        for kind, prefix in JUDGED_HEADLINE.values():
            c = item.counts[kind]
            for column, value in (("tp", c.tp), ("fp", c.fp), ("fn", c.fn)):
                matrix[i, COLUMN_INDEX[f"{prefix}_{column}"]] = value
        matrix[i, COLUMN_INDEX["failed"]] = int(item.failed)
        present[i] = True
    return matrix, present
