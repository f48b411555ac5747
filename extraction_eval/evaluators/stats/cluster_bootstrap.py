"""A cell run K times (a matrix's ``--repeats K``): its pooled metric with a CI that accounts
for both sources of variation, and which source dominates.

The K runs score the same n items, so the items are clusters of K observations. The **cluster
bootstrap** resamples items with replacement and takes all K runs' counts of each drawn item,
pooling the counts (micro P/R/F1 over the K × n item results): its interval covers the
item sampling *and* the run-to-run variation (sampling temperature) of the pooled estimate.

**Variance split** (one-way random effects on the metric's influence values ψ_ik = (num_ik −
R · den_ik) / mean(den), R the pooled ratio; see evaluators/stats/power.py): the run-to-run
variance σ²_run = mean over items of the variance of ψ_ik over the K runs; the variance of
the item means is σ²_item + σ²_run / K, so σ²_item = var_i(ψ̄_i) − σ²_run / K (floored at 0).
One run of n items has variance (σ²_item + σ²_run) / n; the shares say which dominates.
More items shrink both; more repeats shrink only the run-to-run part.

Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from extraction_eval.evaluators.metrics import prf_arrays
from extraction_eval.evaluators.stats.bootstrap import resampled_sums
from extraction_eval.evaluators.stats.intervals import CiMethod, quantile_levels
from extraction_eval.evaluators.stats.power import influence
from extraction_eval.evaluators.stats.ppi import parts

_INDEX = {"precision": 0, "recall": 1, "f1": 2}


@dataclass(frozen=True)
class RepeatVariance:
    metric: str
    repeats: int
    items: int
    value: float  # pooled over the K runs
    ci: tuple[float, float] | None  # cluster bootstrap over items
    item_var: float  # σ²_item (per item, influence scale)
    run_var: float  # σ²_run

    @property
    def run_share(self) -> float | None:
        total = self.item_var + self.run_var
        return self.run_var / total if total > 0 else None

    @property
    def dominant(self) -> str | None:
        share = self.run_share
        if share is None:
            return None
        return "run-to-run" if share > 0.5 else "item sampling"

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "repeats": self.repeats,
            "items": self.items,
            "value": self.value,
            "ci": None if self.ci is None else list(self.ci),
            "item_variance": self.item_var,
            "run_variance": self.run_var,
            "run_share": self.run_share,
            "dominant": self.dominant,
        }


def split_variance(
    nums: NDArray[np.float64], dens: NDArray[np.float64]
) -> tuple[float, float, float]:
    """(pooled ratio, σ²_item, σ²_run) from (K × n) per-run, per-item numerators and
    denominators."""
    k, n = nums.shape
    total = float(dens.sum())
    pooled = float(nums.sum()) / total if total else 0.0
    psi = influence(nums.reshape(-1), dens.reshape(-1)).reshape(k, n)
    run_var = float(np.mean(np.var(psi, axis=0, ddof=1))) if k > 1 else 0.0
    means = psi.mean(axis=0)
    between = float(np.var(means, ddof=1)) if n > 1 else 0.0
    return pooled, max(0.0, between - run_var / k), run_var


def repeat_variance(
    runs: Sequence[NDArray[np.int64]],
    metric: str = "f1",
    *,
    resamples: int = 10_000,
    seed: int = 42,
    confidence: float = 0.95,
    method: CiMethod = "expanded",
) -> RepeatVariance:
    """``runs``: K (n × 3: tp, fp, fn) count matrices, row i of each the same item."""
    if len(runs) < 1 or len({r.shape for r in runs}) != 1:
        raise ValueError("runs must be one or more count matrices of one shape (n × 3)")
    stacked = np.stack([np.asarray(r, dtype=np.int64) for r in runs])  # K × n × 3
    k, n, _ = stacked.shape
    num, den = parts(metric, stacked[..., 0], stacked[..., 1], stacked[..., 2])
    pooled, item_var, run_var = split_variance(num, den)
    ci = None
    if n and resamples:
        wide = np.concatenate(list(stacked), axis=1)  # n × 3K: an item's K runs side by side
        sums = resampled_sums(wide, resamples=resamples, seed=seed).reshape(resamples, k, 3)
        tp, fp, fn = (sums[:, :, c].sum(axis=1) for c in range(3))
        values = prf_arrays(tp, fp, fn)[_INDEX[metric]]
        lo, hi = np.quantile(values, quantile_levels(n, confidence, method))
        ci = (float(lo), float(hi))
    return RepeatVariance(metric, k, n, pooled, ci, item_var, run_var)
