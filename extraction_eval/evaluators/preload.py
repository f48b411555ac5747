"""The scoring stack's deferred imports, started early on a thread of their own.

The CLI defers scipy (about half a second to import) so that ``--help`` loads none of it. A run
then imported it when it scored its first item, inside the event loop, with every call in
flight waiting behind it (and again for the run's confidence intervals at the end). A run now
starts the import while it sets itself up (reading items, probing the server), where the time
is free; whoever needs scipy before it is done waits for the same import, not a second one.
"""

from __future__ import annotations

import threading

THREAD_NAME = "extraction-eval-preload"
_lock = threading.Lock()
_thread: threading.Thread | None = None


def preload_scoring() -> threading.Thread:
    """Start importing what scoring and the run summary defer (once per process)."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_load, name=THREAD_NAME, daemon=True)
            _thread.start()
        return _thread


def _load() -> None:
    try:  # what matching.py, intervals.py and the bootstrap import where they are used
        import scipy.optimize
        import scipy.sparse
        import scipy.special  # noqa: F401
    except Exception:  # pragma: no cover - the code that needs it imports it again, and says
        return
