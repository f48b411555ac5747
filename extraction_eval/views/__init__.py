"""Presentation: Rich renderings for people, one module per thing shown.

``score_report`` (the scoring report), ``runs`` (run summary, runs list, one run's items, the
worst items), ``paired`` (compare's paired comparison), ``diff`` (compare's item diff),
``matrix`` (a config matrix's table), ``gold`` (ensemble-gold plans and builds), ``datasets``,
``prompts``, ``seeds``, ``progress`` (the run progress bar), and ``tables`` (80-column printing
every view uses). Views take library
objects or plain JSON and a console and compute nothing; commands parse, call the library, then
render with these. Nothing is re-exported here, so importing one view loads only what it needs.
"""
