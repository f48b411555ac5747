"""What the parent side of every worker process does the same way (the report's and the
run's items'): start a fresh interpreter with pipes, keep its stderr aside, and say in one
line why it failed. One copy, so a process that cannot start leaks no file and a failure
line never carries a secret, whichever worker it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any


def start_python(code: str) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """``code`` in an isolated interpreter (``-I``: no current directory, user site or
    ``PYTHON*`` variables on its path; the code sets ``sys.path`` from its first pickle),
    stdin and stdout piped, stderr kept in a temporary file for :func:`last_error_line`."""
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - the caller closes it after reading
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    except BaseException:
        errors.close()
        raise
    return proc, errors


def last_error_line(errors: IO[bytes]) -> str | None:
    """The last line the process wrote to stderr (its exception), cut to 300 characters and
    redacted (it becomes a warning or a log line: a traceback may quote a key); None when
    it wrote nothing."""
    from extraction_eval.redact import redact

    try:
        errors.seek(0)
        tail = errors.read()[-4096:].decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return redact(lines[-1])[:300] if lines else None


def exit_reason(proc: subprocess.Popen[bytes], errors: IO[bytes]) -> str:
    """Why a worker stopped answering, in one line: the last line it wrote to stderr, else
    its exit status (or that its output ended while it still runs)."""
    line = last_error_line(errors)
    status = proc.poll()
    said = f"exit status {status}" if status is not None else "its output ended"
    return f"{said}: {line}" if line else said


def reap(proc: subprocess.Popen[bytes], wait_s: float) -> None:
    """Wait up to ``wait_s`` for a worker told to stop, then kill it: no orphan stays."""
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def settle(
    future: asyncio.Future[Any] | None, result: Any = None, *, error: BaseException | None = None
) -> None:
    """Resolve ``future`` unless it is gone or already resolved (a worker's answer can race
    its death: the first word counts)."""
    if future is None or future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def relay(
    proc: subprocess.Popen[bytes],
    loop: asyncio.AbstractEventLoop,
    deliver: Callable[[list[Any]], None],
    died: Callable[[], None],
    wait_s: float,
) -> None:
    """Start a reader thread: each batch of pickled messages from the worker's stdout onto
    ``loop`` (``deliver``), then, when its output ends (it exited or was stopped; waited for
    up to ``wait_s`` so its status is known), ``died`` once. A closed loop: nobody to tell."""

    def read() -> None:
        stdout = proc.stdout
        assert stdout is not None
        while True:
            try:
                batch = pickle.load(stdout)
            except Exception:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait_s)
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(died)
                return
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(deliver, batch)

    threading.Thread(target=read, daemon=True, name="pool-reader").start()


async def await_setup(workers: Sequence[Any], limit: float) -> None:
    """Wait until every worker (``.ready`` future, ``.dead``, ``.proc``) is set up or failed,
    at most ``limit`` seconds; one still not ready is killed and marked dead with why (a
    setup that hangs would otherwise hang the run before any item)."""
    waiting = [w.ready for w in workers if w.ready is not None]
    if waiting:
        await asyncio.wait(waiting, timeout=limit)
    for worker in workers:
        if worker.ready is not None and not worker.ready.done():
            worker.dead = f"it was not set up after {limit:g} s, so it was stopped"
            settle(worker.ready, False)
            with contextlib.suppress(OSError):
                worker.proc.kill()
