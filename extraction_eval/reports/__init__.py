"""HTML presentation of runs (``extraction-eval report``): one self-contained file.

Same layer as ``views`` (Rich presentation): renders what ``experiments.report_data`` returns.
jinja2 and vl-convert are imported here only, so the CLI does not load them at import time.
"""
