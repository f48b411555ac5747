"""The local store's own safety: a store written by a newer version is refused before anything
is written, its folder and files are private, and a run is locked while a process runs it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local.compat import UnknownStoreError
from extraction_eval.backends.local.locks import LockHolder, process_start
from extraction_eval.cli import app
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.prepare import prepare, release_lock
from extraction_eval.experiments.run import arun_local
from extraction_eval.pipeline.base import PipelineConfig

DATASET = "extraction-eval"
runner = CliRunner()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _store_with_run(home: Path) -> Path:
    config = RunConfig(dataset=DATASET, name="r", limit=2, backend="local")
    with LocalStore() as store:
        asyncio.run(arun_local(config, store=store))
    return home / "store.db"


# --- a newer version's store ------------------------------------------------------------------


def test_a_store_with_an_unknown_migration_is_refused_in_one_line_and_not_written(
    isolated_home: Path,
) -> None:
    from extraction_eval.backends.local.migrations import migrate

    older = isolated_home.parent / "older.db"  # a store of an older version still migrates
    conn = sqlite3.connect(older, isolation_level=None)
    migrate(conn, upto="m005_result_taxonomy")
    conn.close()
    LocalStore(older).close()
    path = _store_with_run(isolated_home)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO _migrations VALUES ('m999_from_the_future', 't')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = _digest(path)
    with pytest.raises(UnknownStoreError, match="m999_from_the_future is unknown here"):
        LocalStore()
    for args in (["runs", "show", "r"], ["runs", "list"], ["run", "--limit", "1"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "written by a newer version of extraction-eval" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert _digest(path) == before  # nothing written


def test_a_store_whose_schema_differs_from_its_migrations_is_refused(isolated_home: Path) -> None:
    path = _store_with_run(isolated_home)
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE results ADD COLUMN verdict TEXT")
    with pytest.raises(UnknownStoreError, match=r"unexpected column results\.verdict"):
        LocalStore()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE annotations (x)")
        conn.execute("ALTER TABLE results DROP COLUMN verdict")
    with pytest.raises(UnknownStoreError, match="unexpected table annotations"):
        LocalStore()


# --- permissions --------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_store_folder_is_created_0700_and_its_files_0600(isolated_home: Path) -> None:
    old = os.umask(0o022)
    try:
        _store_with_run(isolated_home)
        with LocalStore() as store:  # open: the -wal and -shm files exist now
            store.list_runs()
            files = sorted(isolated_home.iterdir())
            assert {f.name for f in files} >= {"store.db", "store.db-wal", "store.db-shm"}
            assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert _mode(isolated_home) == 0o700
    finally:
        os.umask(old)


def test_an_older_world_readable_store_is_narrowed_to_0600(isolated_home: Path) -> None:
    path = _store_with_run(isolated_home)
    os.chmod(path, 0o644)
    LocalStore().close()
    assert _mode(path) == 0o600


# --- run locks ----------------------------------------------------------------------------------


def _config(name: str, **extra: object) -> RunConfig:
    return RunConfig(
        dataset=DATASET, name=name, limit=3, backend="local", pipeline=PipelineConfig(), **extra
    )  # type: ignore[arg-type]


def _plant_lock(store: LocalStore, name: str, *, pid: int, host: str) -> None:
    run = store.get_run(name, DATASET)
    assert run is not None
    with store._tx(write=True) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO run_locks VALUES (?, 'other', ?, ?, NULL, 'earlier')",
            (run.id, pid, host),
        )


def _interrupted_run(store: LocalStore, name: str) -> None:
    asyncio.run(arun_local(_config(name), store=store))


def test_a_run_being_run_by_a_live_process_is_refused_naming_the_holder() -> None:
    store = LocalStore()
    _interrupted_run(store, "locked")
    parent = os.getppid()  # alive, and not this process
    _plant_lock(store, "locked", pid=parent, host=socket.gethostname())
    with pytest.raises(InvalidValue) as info:
        prepare(_config("locked", resume=True), store)
    assert info.value.field == "take_over_lock"
    assert f"it is being run by pid {parent} on host {socket.gethostname()}, started earlier" in (
        str(info.value)
    )
    result = runner.invoke(app, ["run", "--name", "locked", "--limit", "3", "--resume"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --take-over-lock is needed to run 'locked' now")
    prep = prepare(_config("locked", resume=True, take_over_lock=True), store)  # the way out
    assert any(f"left by pid {parent}" in w for w in prep.warnings)
    release_lock(store, prep)


def test_a_lock_on_another_host_is_never_taken_over_without_being_asked() -> None:
    store = LocalStore()
    _interrupted_run(store, "remote")
    _plant_lock(store, "remote", pid=1, host="some-other-host")
    with pytest.raises(InvalidValue, match="on host some-other-host"):
        prepare(_config("remote", resume=True), store)


def test_a_lock_left_by_a_dead_process_on_this_host_is_taken_over_with_a_warning() -> None:
    store = LocalStore()
    _interrupted_run(store, "orphan")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # a pid that is gone now
    _plant_lock(store, "orphan", pid=child.pid, host=socket.gethostname())
    outcome = asyncio.run(arun_local(_config("orphan", resume=True), store=store))
    assert any(
        f"took over the lock of run 'orphan' left by pid {child.pid}" in w for w in outcome.warnings
    )
    run = store.get_run("orphan", DATASET)
    assert run is not None and store.run_lock(run.id) is None  # given back at the end


def test_a_pid_reused_by_another_process_counts_as_gone() -> None:
    from extraction_eval.backends.local.locks import holder_is_gone

    if process_start(os.getppid()) is None:
        pytest.skip("process start times cannot be read here (no /proc)")
    reused = LockHolder(1, "t", os.getppid(), socket.gethostname(), "1", "earlier")
    assert holder_is_gone(reused)
    same = LockHolder(1, "t", os.getppid(), socket.gethostname(), process_start(os.getppid()), "e")
    assert not holder_is_gone(same)


def test_the_lock_is_held_while_items_run_and_given_back_after() -> None:
    store = LocalStore()
    seen: list[LockHolder | None] = []
    config = _config("held")

    async def main() -> None:
        prep_task = asyncio.create_task(arun_local(config, store=store))
        while not prep_task.done():
            run = store.get_run("held", DATASET)
            if run is not None:
                seen.append(store.run_lock(run.id))
            await asyncio.sleep(0)
        await prep_task

    asyncio.run(main())
    run = store.get_run("held", DATASET)
    assert run is not None and store.run_lock(run.id) is None
    held = [h for h in seen if h is not None]
    assert held and {h.pid for h in held} == {os.getpid()}


def test_a_run_refused_before_its_first_item_leaves_no_lock() -> None:
    store = LocalStore()
    _interrupted_run(store, "refused")
    run = store.get_run("refused", DATASET)
    assert run is not None
    with pytest.raises(InvalidValue):  # the name is taken without --resume
        prepare(_config("refused"), store)
    assert store.run_lock(run.id) is None
