"""Moved to :mod:`extraction_eval.evaluators.stats.verdict_rules`; this re-export keeps
``evaluators/report.py``'s import working until that file (changed on another branch this
round) imports from the new home. Delete it then (``tests/unit/test_shelves.py`` lists it)."""

from extraction_eval.evaluators.stats.verdict_rules import MIN_ITEMS, approximate_warning

__all__ = ["MIN_ITEMS", "approximate_warning"]
