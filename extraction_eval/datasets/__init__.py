"""Our JSONL files in and out: gold, predictions, dataset uploads/exports, the bundled datasets.

One line reader (``lines``) with one warning format, ``FILE:LINE (id X): problem; skipped``,
whichever command reads the file, and the same rules for every reader (the importers in
``importers`` use them too). Depends only on ``types``, ``errors``, ``limits`` and
``textsafe``, so the backends (which seed the bundled sample) and the scoring use case can
both build on it.

- ``jsonl``: ``read_gold`` (for ``score``), ``read_items`` / ``write_items`` (datasets),
  ``parse_extraction`` (the one normalisation of a line's entities and relationships)
- ``predictions``: ``read_predictions``
- ``bundled``: ``sample_items``, ``journal_items``, ``example_paths``
"""
