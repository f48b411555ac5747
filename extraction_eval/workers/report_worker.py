"""The HTML report's worker process: a fresh interpreter that builds the items after a position
of a large two-run report while the calling process builds those before it
(``analysis/html_report/data.py`` decides the split and joins the parts, byte for byte the
report one process makes).

Kept out of ``analysis`` (read-only over stored runs, no processes of its own): everything
about the process lives here, the parent side (:class:`Worker`: start it, send the job and
``sys.path`` as pickles over its stdin, read its two answers, a watchdog, ``os.wait4`` for
its CPU time and peak RSS, no orphan left) and the child side (:func:`work`).
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from extraction_eval.analysis.html_report.build import (
    PartCounts,
    PartRows,
    ReportPart,
    collector_paused,
    range_stream,
)
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.workers.child import last_error_line, start_python


class Worker:
    """A fresh interpreter building the items after position ``after`` (to the end) of the
    store at ``path``: its own connection, its own zlib thread. It sends its counts first
    (:meth:`counts`), then its rows (:meth:`rows`), so this process can finish the comparison
    before it holds both halves of the table. Either is None when the worker failed (its
    error went to stderr): the caller then builds that range itself."""

    # isolated (-I: no current directory, user site or PYTHON* variables on its path), then
    # this process's sys.path before anything of the package is imported: the same modules
    code = (
        "import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer);"
        " from extraction_eval.workers.report_worker import work; work()"
    )

    def __init__(self, path: Path, runs: Sequence[RunRecord], after: int) -> None:
        # its stderr kept aside: a failure becomes one line of the caller's warning
        self.proc, self.errors = start_python(self.code)  # errors: closed by close()
        self.cpu = self.peak_mb = 0.0  # its user + system seconds and peak RSS, once done
        self.timed_out: float | None = None  # the wait after which it was stopped
        self._timer: threading.Timer | None = None
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            pickle.dump(list(sys.path), stdin)
            pickle.dump((str(path), list(runs), after), stdin)
            stdin.close()
        except OSError:
            pass  # it died at start: counts() says so

    def watch(self, seconds: float) -> None:
        """Stop the worker if it has not answered within ``seconds`` from now (a hung worker
        would otherwise hold the report forever): the caller then builds its range itself."""

        def expire() -> None:
            if self.proc.poll() is None:
                self.timed_out = seconds
                self.proc.kill()

        self._timer = threading.Timer(seconds, expire)
        self._timer.daemon = True
        self._timer.start()

    def why(self) -> str:
        """Why it failed, in one line: the wait it outlived, else the last line it wrote to
        stderr (its exception), cut to 300 characters."""
        if self.timed_out is not None:
            return f"it had not answered {self.timed_out:.0f} s after this process was done"
        return last_error_line(self.errors) or f"exit status {self.proc.returncode}"

    def _read(self, kind: type[Any]) -> Any:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            got = pickle.load(stdout)
        except Exception:  # nothing (or half) sent: it failed and said why on stderr
            return None
        return got if isinstance(got, kind) else None

    def counts(self) -> PartCounts | None:
        got: PartCounts | None = self._read(PartCounts)
        return got

    def rows(self) -> PartRows | None:
        got: PartRows | None = self._read(PartRows)
        status = self._done()
        return got if status == 0 else None

    def _done(self) -> int:
        """wait4 on the worker: reaped, its own CPU and peak RSS noted; its exit status."""
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if not hasattr(os, "wait4"):  # Windows: no resource figures
            return self.proc.wait()
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu = usage.ru_utime + usage.ru_stime
        # kilobytes on Linux, bytes on macOS
        self.peak_mb = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
        return self.proc.returncode

    def stop(self) -> None:
        """Ends the worker when it is not read to the end (no orphan left)."""
        if self._timer is not None:
            self._timer.cancel()
        if self.proc.returncode is None:
            self.proc.kill()  # it polls first: a worker that has exited is reaped there
            if self.proc.returncode is None:
                self._done()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()

    def close(self) -> None:
        """Let go of its kept stderr (after :meth:`why` was asked)."""
        self.errors.close()


def work(stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
    """The worker's entry: a job in, its :class:`PartCounts` then its :class:`PartRows` out
    (pickles)."""
    source = stdin or sys.stdin.buffer
    path, runs, after = pickle.load(source)
    out = stdout or sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not land in the pickles
    with (
        collector_paused(),
        ThreadPoolExecutor(1, thread_name_prefix="report-zlib") as pool,
        LocalStore(Path(path), sample=False) as store,
    ):
        part = ReportPart(store, runs, pool, streamed=True)
        part.fill(range_stream(store, runs, after))
        for message in (part.counted(), part.rows()):
            pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
            # no memo: a million small objects without a cycle among them; the memo (here
            # and in the reader) would cost more memory than the few shared objects it saves
            pickler.fast = True
            pickler.dump(message)
            out.flush()
