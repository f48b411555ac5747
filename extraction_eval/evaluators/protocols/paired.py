"""B against A on the protocol metrics (``compare --protocol``): per metric, both runs' micro
P/R/F1 on the items both have and the CI of Δ = B − A from one paired bootstrap over items
(the same draws for both runs, as ``evaluators.paired`` does for the other metrics), and the
regression gate on them (``--fail-on-regression semeval.strict.f1=0.01``). Pure, no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from extraction_eval.evaluators.metrics import prf_arrays
from extraction_eval.evaluators.stats.bootstrap import resampled_sums
from extraction_eval.evaluators.stats.intervals import CiMethod, quantile_levels

__all__ = [
    "PROTOCOL_METRIC_PREFIXES",
    "align_rows",
    "gate_names",
    "is_protocol_metric",
    "paired_protocols",
    "protocol_gate",
]

# gate names: "<block>.<precision|recall|f1>" ("semeval.strict.f1", "re_strict.f1", "docred.f1")
PROTOCOL_METRIC_PREFIXES = ("semeval.", "re_strict.", "re_boundaries.", "docred.")
_RATIOS = ("precision", "recall", "f1")


# each protocol's count-row metrics (what a paired comparison, and so a gate, has)
_ROW_METRICS = {
    "semeval": ("semeval.strict", "semeval.exact", "semeval.partial", "semeval.ent_type"),
    "re": ("re_strict", "re_boundaries"),
    "docred": ("docred",),
}


def is_protocol_metric(name: str) -> bool:
    return name.startswith(PROTOCOL_METRIC_PREFIXES)


def gate_names(protocols: Iterable[str]) -> tuple[str, ...]:
    """The protocol metrics a gate can name with these protocols chosen
    (``semeval.strict.f1``, ``re_strict.precision``, ``docred.f1``...)."""
    return tuple(
        f"{metric}.{ratio}"
        for name in protocols
        for metric in _ROW_METRICS.get(name, ())
        for ratio in _RATIOS
    )


def paired_protocols(
    a: Mapping[str, NDArray[np.int64]],
    b: Mapping[str, NDArray[np.int64]],
    *,
    resamples: int,
    seed: int,
    confidence: float = 0.95,
    method: CiMethod = "expanded",
) -> dict[str, dict[str, Any]]:
    """``a`` / ``b``: per count-row metric (``semeval.strict``, ``re_strict``, ``docred``...)
    the (n × 3: tp, fp, fn) rows of the same n items in the same order. Returns, per
    ``<metric>.<precision|recall|f1>``, ``a``, ``b``, ``delta`` and ``ci`` (``low``,
    ``high``; None without resamples or items)."""
    out: dict[str, dict[str, Any]] = {}
    for metric in sorted(set(a) & set(b)):
        ra, rb = np.asarray(a[metric], np.int64), np.asarray(b[metric], np.int64)
        if ra.shape != rb.shape:
            raise ValueError(f"{metric}: rows of {ra.shape} and {rb.shape} are not paired")
        n = ra.shape[0]
        point_a = prf_arrays(*(ra.sum(axis=0)[None, :].astype(np.float64).T))
        point_b = prf_arrays(*(rb.sum(axis=0)[None, :].astype(np.float64).T))
        boot: list[NDArray[np.float64]] | None = None
        if n and resamples:
            sums = resampled_sums(np.concatenate([ra, rb], axis=1), resamples=resamples, seed=seed)
            pa = prf_arrays(sums[:, 0], sums[:, 1], sums[:, 2])
            pb = prf_arrays(sums[:, 3], sums[:, 4], sums[:, 5])
            boot = [pb[k] - pa[k] for k in range(3)]
        levels = list(quantile_levels(max(n, 1), confidence, method))
        for k, ratio in enumerate(_RATIOS):
            va, vb = float(point_a[k][0]), float(point_b[k][0])
            ci = None
            if boot is not None:
                lo, hi = (float(v) for v in np.quantile(boot[k], levels))
                ci = {"low": lo, "high": hi}
            out[f"{metric}.{ratio}"] = {"a": va, "b": vb, "delta": vb - va, "ci": ci, "items": n}
    return out


def protocol_gate(
    paired: Mapping[str, Mapping[str, Any]], tolerances: Mapping[str, float]
) -> list[str]:
    """One line per gated protocol metric whose CI of Δ reaches a drop beyond its tolerance
    (or that has no CI, or that no block of this comparison has): a regression is not ruled
    out. Empty when every one passes."""
    failures = []
    for name in sorted(tolerances):
        tol = float(tolerances[name])
        found = paired.get(name)
        if found is None:
            failures.append(f"{name}: not in this comparison's protocols")
        elif found["ci"] is None:
            failures.append(f"{name}: Δ has no CI, a regression is not ruled out")
        elif found["ci"]["low"] < -tol:
            failures.append(f"{name}: CI low bound of Δ {found['ci']['low']:+.4f} < −{tol:g}")
    return failures


def align_rows(
    ids_a: tuple[str, ...],
    rows_a: Mapping[str, NDArray[np.int64]],
    ids_b: tuple[str, ...],
    rows_b: Mapping[str, NDArray[np.int64]],
) -> tuple[dict[str, NDArray[np.int64]], dict[str, NDArray[np.int64]]]:
    """Both runs' rows on the items both have, row i of each the same item."""
    where_b = {item: k for k, item in enumerate(ids_b)}
    pairs = [(k, where_b[item]) for k, item in enumerate(ids_a) if item in where_b]
    ka = np.array([k for k, _ in pairs], dtype=np.intp)
    kb = np.array([k for _, k in pairs], dtype=np.intp)
    return {m: r[ka] for m, r in rows_a.items()}, {m: r[kb] for m, r in rows_b.items()}
