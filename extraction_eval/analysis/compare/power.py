"""``extraction-eval power``: how many items a comparison needs, from stored runs' per-item
counts (the statistics are :mod:`extraction_eval.evaluators.stats.power`'s).

With one run (the baseline), the second run is taken to vary as the baseline does, with an
assumed correlation between the two runs' per-item influence values; with ``against``, the
two runs are paired by item and the spread of their difference is measured.
"""

from __future__ import annotations

from extraction_eval.analysis.compare.counting import rescore_pairs
from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.evaluators.counts import COLUMNS
from extraction_eval.evaluators.stats.power import POWER_METRICS, PowerAnalysis, analyse
from extraction_eval.validation import check_choice, check_number


def run_power(
    store: LocalStore,
    baseline: RunRecord,
    against: RunRecord | None = None,
    *,
    metric: str = "entity_f1",
    delta: float | None = None,
    correlation: float = 0.5,
    power: float = 0.8,
) -> PowerAnalysis:
    """The MDE at ``power`` for the baseline's N and, with ``delta``, the N needed to detect
    it (two-sided, α = 1 − the baseline's confidence level). Both runs are scored with the
    baseline's settings against its dataset version's gold."""
    check_choice("metric", metric, POWER_METRICS)
    check_number("correlation", correlation, minimum=-1.0, maximum=1.0)
    check_number("power", power, above=0.0)
    check_number("power", power, maximum=0.999)
    if delta is not None:
        check_number("delta", delta, above=0.0)
        check_number("delta", delta, maximum=1.0)
    scoring = run_scoring(baseline)
    items = run_gold(store, baseline)
    other = against or baseline
    paired = rescore_pairs(store, baseline, other, items, scoring)
    a, b = paired.accumulator.matrices()
    return analyse(
        a,
        None if against is None else b,
        COLUMNS,
        metric,
        correlation=correlation,
        delta=delta,
        alpha=1.0 - scoring.confidence,
        power=power,
    )
