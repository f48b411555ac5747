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

    One counter serves every watch of the process: runs side by side on one loop (a notebook's
    ``gather``) each hold a watch, and the handler found by the first is put back when the last
    is removed, whichever ends first. (Each watch chaining its own counter in front of the
    last one's put a dead watch back when the runs ended out of order: asyncio then did not
    restore Python's default, and the next run's Ctrl-C raised wherever it landed.)
    """

    def __init__(self) -> None:
        self._installed = False

    def install(self) -> None:
        if self._installed or threading.current_thread() is not threading.main_thread():
            return
        global _depth, _previous
        if _depth == 0:
            previous = signal.getsignal(signal.SIGINT)
            if not callable(previous):
                return
            _previous = previous
            signal.signal(signal.SIGINT, _count)
        _depth += 1
        self._installed = True

    def remove(self) -> None:
        if not self._installed:
            return
        global _depth, _previous
        self._installed = False
        _depth -= 1
        if _depth == 0:
            previous, _previous = _previous, None
            if signal.getsignal(signal.SIGINT) == _count:
                signal.signal(signal.SIGINT, _handed_back(previous))


_depth = 0  # watches installed (main thread only)
_previous: Any = None  # the handler the first of them found


def _count(signum: int, frame: FrameType | None) -> Any:
    global _seen
    _seen += 1
    return (
        _previous(signum, frame)
        if callable(_previous)
        else signal.default_int_handler(signum, frame)
    )


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
    but only if its own handler is still installed at that moment. Ours may still be when the
    run ends, so ``remove`` often comes after it: tasks the SDK never started never reach
    ``remove``, and a ``KeyboardInterrupt`` raised by code (not a signal) leaves
    ``run_until_complete`` first and cancels the main task only while ``asyncio.run`` closes.
    So when the main task asyncio's handler was made for is done or being cancelled, this
    puts back what asyncio would have: Python's default. Handing back asyncio's handler
    instead left a dead runner's handler installed, and the next ``asyncio.run`` of the
    process (a notebook's next run) then installed none of its own: a Ctrl-C raised
    ``KeyboardInterrupt`` wherever that run was, e.g. in the middle of storing a result."""
    if isinstance(previous, functools.partial):
        main_task = previous.keywords.get("main_task")
        for state in ("done", "cancelling"):
            check = getattr(main_task, state, None)
            if callable(check) and check():
                return signal.default_int_handler
    return previous
