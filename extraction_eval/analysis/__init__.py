"""Read-only analyses of stored runs: they read the store (and a LangFuse-mode run's gold from
LangFuse), never a model, and change nothing.

``stored`` (a run by name, the scoring config and gold it was scored with, pairing two runs'
items by id: what every analysis below reads through), ``compare/`` (two runs: Δ with CIs, the
regression gate, the item diff, power, PPI), ``html_report/`` (the HTML report's data,
streamed), ``worst`` (failing items first), ``reporting`` (exports), ``matrix_table`` (a config
matrix's table), ``checks`` (a finished run's verdict: budget, thresholds, baseline gate),
``score_files`` (scoring a predictions file against a gold file: the same read-only scoring, on
files instead of stored runs). An analysis starts no process: a large report's second half is
built by ``workers/report_worker``.
"""
