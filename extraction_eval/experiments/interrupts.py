"""Telling a real Ctrl-C from a pipeline that raises ``KeyboardInterrupt`` itself.

A user pipeline may raise any ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``, its
own): that is the item's error and the run goes on. A Ctrl-C at the terminal must still stop
the run. Both arrive as the same exception type, so while items run, ``watching_sigint``
chains a counter in front of the process's SIGINT handler (asyncio's, a notebook's, Python's
default): a ``KeyboardInterrupt`` counts as real only if a SIGINT arrived while the item ran.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_seen = 0  # SIGINTs received while a watch was installed (process-wide, only ever grows)


def sigints() -> int:
    """How many SIGINTs reached this process under a watch: a ``KeyboardInterrupt`` is real
    when this grew while the code that raised it ran."""
    return _seen


class SigintWatch:
    """Counts SIGINTs between ``install`` and ``remove``, passing each on to the handler it
    found (asyncio's, a notebook's, Python's default), which still stops the run.

    Installed only in the main thread and only over a Python handler (a process that ignores
    SIGINT, or lets it kill, has no ``KeyboardInterrupt`` that could be real). ``install`` is
    idempotent, so a scheduler may call it from its first task (inside the event loop, after
    ``asyncio.run`` put its own handler in place) and ``remove`` after its last one.
    """

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False

    def install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):
            return
        self._previous, self._installed = previous, True
        signal.signal(signal.SIGINT, self._count)

    def remove(self) -> None:
        if not self._installed:
            return
        self._installed = False
        if signal.getsignal(signal.SIGINT) == self._count:
            signal.signal(signal.SIGINT, _handed_back(self._previous))

    def _count(self, signum: int, frame: FrameType | None) -> Any:
        global _seen
        _seen += 1
        return self._previous(signum, frame)


@contextmanager
def watching_sigint() -> Iterator[None]:
    """``SigintWatch`` around a block (on the thread that runs the event loop)."""
    watch = SigintWatch()
    watch.install()
    try:
        yield
    finally:
        watch.remove()


def _handed_back(previous: Any) -> Any:
    """The handler to put back. ``asyncio.run`` puts Python's default back when its run ends,
    but only if its own handler is still installed; when a run was interrupted, ours may still
    be when it ends (tasks the SDK never started never reach ``remove``), so ``remove`` comes
    after: then it puts back what asyncio would have (its handler, for a finished main task,
    would keep the next ``asyncio.run`` from installing its own)."""
    if isinstance(previous, functools.partial):
        main_task = previous.keywords.get("main_task")
        done = getattr(main_task, "done", None)
        if callable(done) and done():
            return signal.default_int_handler
    return previous
