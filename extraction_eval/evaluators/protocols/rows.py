"""Per-document count rows of the protocol metrics, for bootstrap CIs over documents (items).

Each metric is a micro P/R/F1 of summed integer counts, so one (tp, fp, fn) row per
document is all the bootstrap needs: SemEval's strict / exact / ent_type are tp = correct,
fp = actual − correct, fn = possible − correct; ``partial`` (half credit) is the same
doubled, tp = 2·correct + partial; DocRED's relation figures are tp = correct, fp =
submitted − correct, fn = gold − correct. Pure, no I/O.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from extraction_eval.evaluators.stats import bootstrap_prf
from extraction_eval.evaluators.stats.intervals import CiMethod

__all__ = ["CountRows"]


class CountRows:
    """(tp, fp, fn) per document and metric (every metric gets a row for every document),
    and which documents failed."""

    def __init__(self) -> None:
        self.rows: dict[str, array[int]] = {}
        self.failed: array[int] = array("b")

    def document(self, failed: bool) -> None:
        self.failed.append(1 if failed else 0)

    def add(self, metric: str, tp: int, fp: int, fn: int) -> None:
        self.rows.setdefault(metric, array("q")).extend((tp, fp, fn))

    def intervals(
        self, *, resamples: int, seed: int, confidence: float, method: CiMethod
    ) -> dict[str, dict[str, Any]] | None:
        """Per metric, ``{"precision"|"recall"|"f1": {"low", "high"}}``; None without
        resamples or documents."""
        if not resamples or not self.failed:
            return None
        counts = {k: np.frombuffer(v, dtype=np.int64).reshape(-1, 3) for k, v in self.rows.items()}
        found = bootstrap_prf(
            counts,
            resamples=resamples,
            seed=seed,
            confidence=confidence,
            method=method,
            failed=np.frombuffer(self.failed, dtype=np.int8).astype(np.bool_),
        )
        if found is None:
            return None
        return {
            metric: {name: {"low": b[0], "high": b[1]} for name, b in bounds.items()}
            for metric, bounds in found.items()
        }
