"""The scoring stack's deferred imports, made where a run has time to spare.

The CLI defers scipy (a third of a second to import) so that ``--help`` loads none of it. A
run then imported it for the first item whose alignment needed the solver (two candidates for
one name), inside the event loop, with every call in flight waiting behind it, or else for
the run's confidence intervals at the end. A run whose setup probes its server for a response
format now makes these imports in the setup's own thread while the probe waits for the server
(``llm/formats.py``, ``meanwhile``).

In the calling thread on purpose, never on a thread of its own: importing scipy parses text
signatures with ``ast``, and Python 3.11 before 3.11.8 kept the AST constructor's recursion
depth in state shared by all threads, so an ``ast.parse`` on another thread at the same time
(a dataclass or pydantic model defined by any import) could fail with a spurious
``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905).
"""

from __future__ import annotations


def preload_scoring() -> None:
    """Import what matching, the intervals and the bootstrap import where they are used."""
    import scipy.optimize
    import scipy.sparse
    import scipy.special  # noqa: F401


def preload_intervals() -> None:
    """Import what the run's confidence intervals import (``scipy.special``): every run
    needs them at its end, also one whose workers score (and import the solver themselves
    if an item needs it), where a late import would hold up the finished run."""
    import scipy.special  # noqa: F401
