"""Moved to :mod:`extraction_eval.evaluators.stats.intervals`; this re-export keeps
``evaluators/report.py``'s import working until that file (changed on another branch this
round) imports from the new home. Delete it then (``tests/unit/test_shelves.py`` lists it)."""

from extraction_eval.evaluators.stats.intervals import CI_METHODS, METHOD_TEXT, CiMethod

__all__ = ["CI_METHODS", "METHOD_TEXT", "CiMethod"]
