"""Two stored runs compared: the paired figures and the item diff.

Two entry points: :func:`compare_runs` (Δ per metric with CIs, McNemar, the gate, the MDE) and
:func:`compare_and_diff` (the same figures and ``runs diff``'s item diff, from one pass over
both runs). Under them: ``runs`` (the options, the result, the refusals), ``counting`` (the
counting pass over two runs' stored rows: stored counts where they fit, else re-scored),
``item_diff`` (the one step that diffs a changed item), ``run_diff`` (``runs diff``: the item
diff alone), ``along`` (the counting pass fed by the HTML report as it reads), ``power`` and
``ppi`` (``extraction-eval power``, ``--ppi``: the same stored runs read for the pure
statistics of ``evaluators.stats``).
"""

from extraction_eval.analysis.compare.runs import (
    CompareOptions,
    RunComparison,
    compare_and_diff,
    compare_runs,
)

__all__ = ["CompareOptions", "RunComparison", "compare_and_diff", "compare_runs"]
