"""Statistics over many items' scores, apart from the per-item scoring in ``evaluators``.

Per-item scoring (matching, one item's counts, the diff of one item) answers "how did this item
fare"; the modules here answer "what do these n items say about the run, or about A against B":

- ``bootstrap`` — bootstrap confidence intervals of micro P/R/F1 and ratios over items;
- ``intervals`` — which bootstrap quantiles make an interval (percentile, BCa-like expansion)
  and the bootstrap p-value that goes with them;
- ``paired_delta`` — Δ = B − A of two runs on the same items: CI, McNemar, per type, verdict;
- ``mcnemar`` — McNemar's exact test on paired right/wrong;
- ``multiple_testing`` — adjusted p-values for a family of claims (Holm, BH);
- ``verdict_rules`` — when a paired comparison may say "improved" or "regressed" at all;
- ``power`` — minimum detectable effect and the N a comparison needs;
- ``ppi`` — prediction-powered inference against a person-checked sample of a voted gold;
- ``cluster_bootstrap`` — a cell run K times: pooled CI over items and repeats, variance split;
- ``repeat_spread`` — run-to-run spread of a matrix's repeats, per-item agreement, best cell;
- ``gold_agreement`` — Krippendorff's α between the models that voted a gold set;
- ``scipy_preload`` — the scoring stack's deferred scipy imports, made where a run has time.

Pure: no network, no disk, no clock. The package keeps the old ``evaluators.stats`` module's
two public functions importable from here (``evaluators/report.py`` uses them).
"""

from extraction_eval.evaluators.stats.bootstrap import bootstrap_prf, bootstrap_ratios

__all__ = ["bootstrap_prf", "bootstrap_ratios"]
