"""``python -m extraction_eval`` is the ``extraction-eval`` command."""

from extraction_eval.cli import main

main()
