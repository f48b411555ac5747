"""McNemar's exact test on paired per-item right/wrong, with scipy's binomial p-value computed
without importing ``scipy.stats`` (about a second of ``compare``'s start-up)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["McNemar", "binom_two_sided_p", "mcnemar_exact"]


@dataclass(frozen=True, slots=True)
class McNemar:
    """Exact McNemar test on per-item right/wrong (see :func:`is_right`). ``b01``: wrong in A,
    right in B; ``b10``: right in A, wrong in B; ``p_value``: exact two-sided binomial p of
    b01 among b01 + b10 at 1/2 (1.0 when no item changed)."""

    both_right: int
    b01: int
    b10: int
    both_wrong: int
    p_value: float
    p_adjusted: float | None = None  # over the comparison's family (None: not corrected)

    def to_json(self) -> dict[str, Any]:
        return {
            "both_right": self.both_right,
            "b01": self.b01,
            "b10": self.b10,
            "both_wrong": self.both_wrong,
            "p_value": self.p_value,
            "p_adjusted": self.p_adjusted,
        }


def mcnemar_exact(b01: int, b10: int, *, both_right: int = 0, both_wrong: int = 0) -> McNemar:
    """Exact two-sided McNemar test (scipy's binomial test on the discordant pairs)."""
    n = b01 + b10
    p = 1.0 if n == 0 else binom_two_sided_p(b01, n)
    return McNemar(both_right=both_right, b01=b01, b10=b10, both_wrong=both_wrong, p_value=p)


def binom_two_sided_p(k: int, n: int) -> float:
    """``scipy.stats.binomtest(k, n, 0.5).pvalue``, the same float: scipy's algorithm on the
    same ``scipy.special`` binomial functions, without importing ``scipy.stats`` (about a
    second of ``compare``'s start-up). tests/unit/test_paired.py checks it against scipy."""
    from scipy.special import _ufuncs as scu  # the functions scipy.stats.binom calls

    p = 0.5

    def pmf(x: float) -> float:
        return float(scu._binom_pmf(x, n, p))

    def cdf(x: float) -> float:  # rv_discrete.cdf on binom's support [0, n]
        if x < 0:
            return 0.0
        return 1.0 if x >= n else float(np.clip(scu._binom_cdf(np.floor(x), n, p), 0, 1))

    def sf(x: float) -> float:  # rv_discrete.sf
        if x < 0:
            return 1.0
        return 0.0 if x >= n else float(np.clip(scu._binom_sf(np.floor(x), n, p), 0, 1))

    def search(a: Any, d: float, lo: float, hi: float) -> float:  # _binary_search_for_binom_tst
        while lo < hi:
            mid = lo + (hi - lo) // 2
            midval = a(mid)
            if midval < d:
                lo = mid + 1
            elif midval > d:
                hi = mid - 1
            else:
                return mid
        return lo if a(lo) <= d else lo - 1

    d = pmf(k)
    rerr = 1 + 1e-7
    if k == p * n:
        return 1.0
    if k < p * n:
        ix = search(lambda x1: -pmf(x1), -d * rerr, float(np.ceil(p * n)), n)
        y = n - ix + int(d * rerr == pmf(ix))
        pval = cdf(k) + sf(n - y)
    else:
        ix = search(pmf, d * rerr, 0, float(np.floor(p * n)))
        y = ix + 1
        pval = cdf(y - 1) + sf(k - 1)
    return float(min(1.0, pval))
