"""Many tests at once: adjusted p-values for a family of hypotheses.

A matrix of 16 cells × 3 metrics asks 48 questions; at α = 0.05 each, about 2 "significant"
answers are expected from noise alone. Two corrections:

- **Holm** (1979) controls the family-wise error rate (the chance of *any* false claim) under
  any dependence between the tests: sort the m p-values, p̃₍ᵢ₎ = max_{j ≤ i} min(1, (m − j + 1)
  p₍ⱼ₎). Uniformly more powerful than Bonferroni.
- **Benjamini–Hochberg** (1995) controls the false discovery rate (the expected share of false
  claims among the claims) for independent or positively dependent tests (PRDS: the metrics
  of one pair of runs are positively correlated); scipy's ``false_discovery_control``.

A claim is made when its adjusted p-value is below α. Pure; scipy.stats is imported only for
BH (it costs about a second of start-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

Correction = Literal["holm", "bh", "none"]
CORRECTIONS: tuple[str, ...] = get_args(Correction)

CORRECTION_TEXT = {
    "holm": "Holm (family-wise error)",
    "bh": "Benjamini–Hochberg (false discovery rate)",
    "none": "none",
}


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: (p_values[i], i))
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (scipy's), in the input order."""
    if not p_values:
        return []
    from scipy.stats import false_discovery_control

    return [float(v) for v in false_discovery_control(list(p_values), method="bh")]


def adjust(p_values: Sequence[float], method: Correction) -> list[float]:
    """The family's adjusted p-values (``none``: the raw ones), in the input order."""
    for p in p_values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"a p-value must be between 0 and 1, got {p}")
    if method == "holm":
        return holm(p_values)
    if method == "bh":
        return benjamini_hochberg(p_values)
    if method == "none":
        return [float(p) for p in p_values]
    raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, got {method!r}")


def adjust_named(p_values: dict[str, float | None], method: Correction) -> dict[str, float | None]:
    """:func:`adjust` over the named p-values that exist (None stays None: no test made)."""
    names = [k for k, v in p_values.items() if v is not None]
    adjusted = adjust([float(p_values[k]) for k in names], method)  # type: ignore[arg-type]
    out: dict[str, float | None] = dict.fromkeys(p_values)
    out.update(zip(names, adjusted, strict=True))
    return out
