"""When a paired comparison may say "improved" or "regressed" at all.

- **Minimum evidence.** A bootstrap over very few items cannot see the population's spread:
  with one or two documents the CI of Δ collapses to a point and a "verdict" would decide on
  noise. Below ``MIN_ITEMS`` paired items the verdict is ``insufficient`` (never improved /
  regressed) and a gate on the metric fails. So it is when the CI of Δ has zero width around
  a Δ that is not 0 and fewer than ``MIN_ITEMS`` items changed the metric: a metric defined on
  one item of many (the hallucination rate with one gold-empty item) gives the same Δ on every
  resample that draws that item, a small-N comparison hidden in a large one. A zero-width CI
  with many changed items (all 48 items errored in B) is strong evidence, not a lack of it;
  a zero-width CI at Δ = 0 (a run compared with itself) is "no significant change".
- **Many metrics at once.** Every metric's paired bootstrap p and McNemar's p of one
  comparison are adjusted as one family (:mod:`.multiple`).

Pure, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from extraction_eval.evaluators.stats.multiple_testing import Correction, adjust_named

# Below this many paired items a verdict is "insufficient".
MIN_ITEMS = 10
# Below this many items the summary says the bootstrap interval is approximate.
APPROXIMATE_BELOW = 50

M = TypeVar("M")
T = TypeVar("T")


def insufficient(
    n: int,
    min_items: int,
    delta: float | None,
    lo: float | None,
    hi: float | None,
    changed: Callable[[], int],
) -> str | None:
    """Why this evidence cannot carry a verdict, or None when it can. ``changed``: how many
    items changed the metric (called only for a zero-width CI)."""
    if n < min_items:
        return f"{n} paired items, fewer than the minimum of {min_items}"
    if lo is not None and lo == hi and delta != 0 and (moved := changed()) < min_items:
        return (
            f"the CI of Δ has zero width and only {moved} items changed the metric"
            f" (fewer than {min_items})"
        )
    return None


def corrected(metrics: list[M], mcnemar: T, correction: Correction) -> tuple[list[M], T]:
    """Each metric's ``p_value`` and McNemar's adjusted as one family into ``p_adjusted``;
    with ``none`` nothing is adjusted (the verdicts are the CIs')."""
    if correction == "none":
        return metrics, mcnemar
    raw: dict[str, float | None] = {_get(m, "name"): _get(m, "p_value") for m in metrics}
    # McNemar tests something only when some item changed from right to wrong or back
    discordant = _get(mcnemar, "b01") + _get(mcnemar, "b10")
    raw["mcnemar"] = _get(mcnemar, "p_value") if discordant else None
    adjusted = adjust_named(raw, correction)
    return (
        [_replace(m, p_adjusted=adjusted[_get(m, "name")]) for m in metrics],
        _replace(mcnemar, p_adjusted=adjusted["mcnemar"]),
    )


def approximate_warning(n: int) -> str | None:
    """The summary's warning that a bootstrap interval over ``n`` items is approximate."""
    if 0 < n < APPROXIMATE_BELOW:
        return (
            f"only {n} items: the bootstrap confidence intervals are approximate below"
            f" {APPROXIMATE_BELOW} (they tend to be too narrow)"
        )
    return None


def _get(obj: Any, name: str) -> Any:
    return getattr(obj, name)


def _replace(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, **changes)
