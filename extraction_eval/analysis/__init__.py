"""Read-only analyses of stored runs: they read the store (and a LangFuse-mode run's gold from
LangFuse), never a model, and change nothing.

``stored`` (a run by name, the scoring config and gold it was scored with, pairing two runs'
items by id: what every analysis below reads through), ``paired`` (compare: Δ with CIs, the
regression gate; ``paired_pass``: its counting pass over two runs' stored rows), ``diff`` (what
got fixed and what broke, per item), ``worst`` (failing items first), ``reporting`` (exports),
``report_data`` (the HTML report's data, streamed; ``report_items``: one item's objects and
spans, ``report_compare``: its two-run parts), ``matrix_table`` (a config matrix's table),
``checks`` (a finished run's verdict: budget, thresholds, baseline gate), ``score_files``
(scoring a predictions file against a gold file: the same read-only scoring, on files instead
of stored runs).
"""
