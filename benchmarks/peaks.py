"""Peak memory of a command and of the processes it waits for (a large report's worker).

``wait4``'s ``ru_maxrss`` is the larger of the two, not their sum: a benchmark runs the
command through ``wrapper(tail)``, which writes both peaks (``RUSAGE_SELF``,
``RUSAGE_CHILDREN``) to ``$BENCH_PEAKS_FILE`` when the command's interpreter exits.
"""

from __future__ import annotations

_PRELUDE = """
import atexit, os, resource, runpy, sys
def _peaks(path=os.environ["BENCH_PEAKS_FILE"]):
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(path, "w") as fh:
        fh.write(f"{own} {kids}")
atexit.register(_peaks)
"""


def wrapper(tail: str) -> str:
    """The ``python -c`` code: the peaks written at exit, then ``tail`` (what runs the
    command: ``runpy.run_module`` / ``runpy.run_path``)."""
    return _PRELUDE + tail
