"""One process at a time runs a run: the ``run_locks`` table.

Two processes resuming the same run would both run every unfinished item (paying twice, and
``max_cost`` counts each process's spend only). So a process takes the run's lock, in the
same transaction that creates or reopens the run, and gives it back when the run closes. A
second one is refused, in one line naming the holder (pid, host, since when).

A lock left behind by a process that died (kill -9, a crash, a reboot) is taken over on its
own when the holder was on this host and its pid is gone, or is now another process (its
start time differs); otherwise ``take_over=True`` takes it (the caller's "I know it is gone"),
unless the holder is certainly alive: same host, same pid, same start time.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from extraction_eval.backends.local.connection import StoreConnection, _now
from extraction_eval.errors import InvalidValue


@dataclass(frozen=True)
class LockHolder:
    run_id: int
    token: str
    pid: int
    host: str
    proc_start: str | None
    started_at: str

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host}, started {self.started_at}"


def this_process(run_id: int) -> LockHolder:
    pid = os.getpid()
    return LockHolder(
        run_id, uuid.uuid4().hex, pid, socket.gethostname(), process_start(pid), _now()
    )


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a pid reused by
    another process from the one that took the lock; None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def holder_is_gone(holder: LockHolder) -> bool:
    """True only when it is certain: same host, and the pid is dead or another process."""
    if holder.host != socket.gethostname():
        return False
    if holder.pid == os.getpid():
        return False  # this process: another run of ours holds it (a notebook, a thread)
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, someone else's
    except OSError:
        return False
    now = process_start(holder.pid)
    return holder.proc_start is not None and now is not None and now != holder.proc_start


def holder_is_alive(holder: LockHolder) -> bool:
    """True only when it is certain: same host, and the pid is still the process that took the
    lock (its start time is known and the same). ``take_over`` never takes such a lock: the
    live process would go on writing beside the one taking over."""
    if holder.host != socket.gethostname() or holder.proc_start is None:
        return False
    return process_start(holder.pid) == holder.proc_start


class LockTables(StoreConnection):
    """Take and give back run locks (``take_run_lock`` inside a write transaction)."""

    def run_lock(self, run_id: int) -> LockHolder | None:
        with self._tx(write=False) as conn:
            return _holder(conn, run_id)

    def lock_run(
        self, run_id: int, run_name: str, *, take_over: bool = False
    ) -> tuple[LockHolder, str | None]:
        """Lock a stored run for this process and set it ``running`` again (a resume), in one
        transaction; see ``take_run_lock``."""
        with self._tx(write=True) as conn:
            holder, note = take_run_lock(conn, run_id, run_name, take_over=take_over)
            conn.execute(
                "UPDATE runs SET status = 'running', ended_at = NULL WHERE id = ?", (run_id,)
            )
        return holder, note

    @contextmanager
    def holding_run_lock(
        self, run_id: int, run_name: str, *, doing: str, take_over: bool = False
    ) -> Iterator[str | None]:
        """Hold the run's lock while ``doing`` something to it that a run in progress would
        undo or contradict (``runs merge`` folding results in, ``runs finalize`` closing it):
        refused like a second run; yields the take-over note, if any."""
        with self._tx(write=True) as conn:
            holder, note = take_run_lock(conn, run_id, run_name, take_over=take_over, doing=doing)
        try:
            yield note
        finally:
            self.release_run_lock(holder)

    def release_run_lock(self, holder: LockHolder) -> None:
        """Give the lock back (only if it is still ours: a take-over may have moved it)."""
        with self._tx(write=True) as conn:
            conn.execute(
                "DELETE FROM run_locks WHERE run_id = ? AND token = ?",
                (holder.run_id, holder.token),
            )


def take_run_lock(
    conn: sqlite3.Connection,
    run_id: int,
    run_name: str,
    *,
    take_over: bool = False,
    doing: str = "run",
) -> tuple[LockHolder, str | None]:
    """Lock ``run_id`` for this process inside the caller's write transaction; returns the
    lock and a note when a dead holder's lock was taken over. Raises ``InvalidValue`` (field
    ``take_over_lock``) when another live (or unknowable) process holds it; with
    ``take_over``, still when it is certainly alive (``holder_is_alive``)."""
    held = _holder(conn, run_id)
    note = None
    if held is not None:
        if not (take_over or holder_is_gone(held)):
            raise InvalidValue(
                "take_over_lock",
                f"is needed to {doing} {run_name!r} now: it is being run by {held.describe()};"
                " wait for it to end, or, if that process is gone, take the run over",
                mentions=("take_over_lock",),
            )
        if holder_is_alive(held):  # asked to take over, but the holder is not gone
            raise InvalidValue(
                "take_over_lock",
                f"cannot take {run_name!r} from a live process: it is being run by"
                f" {held.describe()}, which is still running; wait for it to end, or stop it",
                mentions=("take_over_lock",),
            )
        note = f"took over the lock of run {run_name!r} left by {held.describe()}"
    mine = this_process(run_id)
    conn.execute(
        "INSERT OR REPLACE INTO run_locks (run_id, token, pid, host, proc_start, started_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, mine.token, mine.pid, mine.host, mine.proc_start, mine.started_at),
    )
    return mine, note


def _holder(conn: sqlite3.Connection, run_id: int) -> LockHolder | None:
    row = conn.execute(
        "SELECT run_id, token, pid, host, proc_start, started_at FROM run_locks WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    return None if row is None else LockHolder(*tuple(row))
