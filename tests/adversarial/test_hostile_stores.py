"""Shard stores edited by hand, files that are not stores, and a live lock holder: ``runs
merge`` and ``runs finalize`` answer each in one line (exit 2), merge nothing, never write
into a ``--from`` store, and never take a live process's run."""

from __future__ import annotations

import hashlib
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore, default_home
from extraction_eval.backends.local.locks import process_start
from extraction_eval.cli import app
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.partition import Shard
from extraction_eval.experiments.run import run_experiment
from tests.support.tally import Tally

DATASET = "extraction-eval"
runner = CliRunner()

FIRST = "(SELECT min(rowid) FROM results)"
ENTITIES_5 = '{"entities": 5}'
# A shard store's run and results as someone's editor (or another tool) may leave them.
HOSTILE_EDITS = {
    "config-not-json": "UPDATE runs SET config = '{not json'",
    "config-a-list": "UPDATE runs SET config = '[1,2]'",
    "shard-index-two": "UPDATE runs SET config = json_set(config, '$.shard.index', 'two')",
    "shard-index-0": "UPDATE runs SET config = json_set(config, '$.shard.index', 0)",
    "shard-5-of-2": "UPDATE runs SET config = json_set(config, '$.shard.index', 5)",
    "output-not-json": f"UPDATE results SET output = '{{not json' WHERE rowid = {FIRST}",
    "output-entities-5": f"UPDATE results SET output = '{ENTITIES_5}' WHERE rowid = {FIRST}",
    "cost-1e308": "UPDATE results SET cost_usd = 1e308",
    "latency-minus-1e308": "UPDATE results SET latency_ms = -1e308",
}


@pytest.fixture(scope="module")
def shard_stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Shards 1 and 2 of run 'r' (offline baseline, 6 items), each in its own store: made
    once, copied by each test."""
    root = tmp_path_factory.mktemp("shards")
    made: dict[int, Path] = {}
    with pytest.MonkeyPatch.context() as mp:
        for index in (1, 2):
            mp.setenv("EXTRACTION_EVAL_HOME", str(root / f"s{index}"))
            with LocalStore() as store:
                run_experiment(
                    RunConfig(dataset=DATASET, name="r", shard=Shard(index, 2), limit=6),
                    store=store,
                )
                made[index] = store.path
    return made


@pytest.fixture
def home_with_shard_1(shard_stores: dict[int, Path]) -> Iterator[LocalStore]:
    """This machine's store: shard 1 of run 'r'."""
    default_home().mkdir(parents=True, exist_ok=True)
    shutil.copy(shard_stores[1], default_home() / "store.db")
    with LocalStore() as store:
        yield store


def _state(path: Path) -> tuple[str, int, list[str]]:
    """A file as the tool must leave it: its bytes, its mode, and its folder's names."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest, path.stat().st_mode, sorted(p.name for p in path.parent.iterdir())


def _one_error_line(stderr: str) -> bool:
    return stderr.startswith("error: ") and stderr.count("\n") == 1 and "Traceback" not in stderr


def _edited_copy(source: Path, folder: Path, sql: str) -> Path:
    folder.mkdir()
    copy = folder / "shard.db"
    shutil.copy(source, copy)
    conn = sqlite3.connect(copy)
    conn.executescript(sql)
    conn.commit()
    conn.close()
    copy.chmod(0o644)  # as copied from another machine: the tool must not narrow it either
    return copy


@pytest.mark.parametrize("edit", list(HOSTILE_EDITS))
def test_a_hand_edited_shard_store_is_one_line_and_merges_nothing(
    edit: str,
    shard_stores: dict[int, Path],
    home_with_shard_1: LocalStore,
    tmp_path: Path,
    tally: Tally,
) -> None:
    """Before: tracebacks (JSONDecodeError, TypeError, ValueError, pydantic), "shards 1, 5 of
    2" merged, and a cost of 1e308 merged that finalize then summed into OverflowError."""
    store = home_with_shard_1
    shard = _edited_copy(shard_stores[2], tmp_path / "from", HOSTILE_EDITS[edit])
    before, run = _state(shard), store.get_run("r", DATASET)
    assert run is not None
    ids = store.result_ids(run.id)

    result = runner.invoke(app, ["runs", "merge", "r", "--from", str(shard)])

    held = (
        result.exit_code == 2
        and _one_error_line(result.stderr)
        and str(shard) in result.stderr
        and "nothing merged" in result.stderr
        and store.result_ids(run.id) == ids
        and store.get_run_by_id(run.id).status == run.status
        and _state(shard) == before
    )
    tally.input(held)
    assert result.exit_code == 2, (result.output, result.exception)
    assert _one_error_line(result.stderr), result.stderr
    assert str(shard) in result.stderr and "nothing merged" in result.stderr, result.stderr
    assert store.result_ids(run.id) == ids  # this store's run is as it was
    assert _state(shard) == before  # the --from store too


def test_finalize_refuses_an_impossible_cost_already_in_this_store(
    shard_stores: dict[int, Path], home_with_shard_1: LocalStore, tally: Tally
) -> None:
    """A store merged by an earlier version may already hold what merge now refuses; finalize
    then raised OverflowError (math.fsum: "intermediate overflow") with a traceback."""
    store = home_with_shard_1
    merged = runner.invoke(app, ["runs", "merge", "r", "--from", str(shard_stores[2])])
    assert merged.exit_code == 0, merged.output
    with store._tx(write=True) as conn:  # as the earlier version merged it
        conn.execute("UPDATE results SET cost_usd = 1e308, latency_ms = -1e308")
    run = store.get_run("r", DATASET)
    assert run is not None and len(store.result_ids(run.id)) > 1  # a sum that overflows

    result = runner.invoke(app, ["runs", "finalize", "r"])

    after = store.get_run_by_id(run.id)
    held = result.exit_code == 2 and _one_error_line(result.stderr) and after == run
    tally.input(held)
    assert result.exit_code == 2, (result.output, result.exception)
    assert _one_error_line(result.stderr), result.stderr
    assert "results.cost_usd" in result.stderr and str(store.path) in result.stderr
    assert after == run  # not finalized, summary untouched
    assert store.run_lock(run.id) is None  # the lock was given back


# What each file is, and what the one line says it is.
NOT_STORES = {
    "empty-file": "not an extraction-eval store (an empty file)",
    "text-file": "cannot be read as an extraction-eval store (file is not a database)",
    "other-sqlite": "not an extraction-eval store (a database without its tables)",
    "newer-version": "written by a newer version of extraction-eval",
}


def _not_a_store(kind: str, path: Path, shard: Path) -> None:
    if kind == "empty-file":
        path.write_bytes(b"")
    elif kind == "text-file":
        path.write_text("id,name\n1,not a database\n", encoding="utf-8")
    elif kind == "other-sqlite":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
        conn.close()
    else:  # a store with a migration this version does not know
        shutil.copy(shard, path)
        conn = sqlite3.connect(path)
        conn.execute("INSERT INTO _migrations VALUES ('m099_future', 'later')")
        conn.commit()
        conn.close()
    path.chmod(0o644)


@pytest.mark.parametrize("kind", list(NOT_STORES))
def test_a_file_that_is_not_a_store_is_refused_and_left_as_it_was(
    kind: str,
    shard_stores: dict[int, Path],
    home_with_shard_1: LocalStore,
    tmp_path: Path,
    tally: Tally,
) -> None:
    """Before: a 0-byte --from file was migrated into a 176 KB store (and every --from file
    narrowed to mode 0600) before the merge looked for its run."""
    folder = tmp_path / "from"
    folder.mkdir()
    path = folder / "empty.db"
    _not_a_store(kind, path, shard_stores[2])
    before = _state(path)

    result = runner.invoke(app, ["runs", "merge", "m", "--from", str(path)])

    held = result.exit_code == 2 and _one_error_line(result.stderr) and _state(path) == before
    tally.input(held)
    assert result.exit_code == 2, (result.output, result.exception)
    assert _one_error_line(result.stderr), result.stderr
    assert result.stderr.startswith(f"error: --from {path}: {NOT_STORES[kind]}"), result.stderr
    assert _state(path) == before  # same bytes, same mode, no side files
    assert LocalStore().get_run("m", DATASET) is None


# The last migration undone: a shard store as the version before it left it.
OLDER_VERSION = "DROP TABLE run_locks; DELETE FROM _migrations WHERE name = 'm012_run_locks'"


@pytest.mark.parametrize("version", ["this-version", "older-version"])
def test_a_merged_shard_store_is_only_read(
    version: str,
    shard_stores: dict[int, Path],
    home_with_shard_1: LocalStore,
    tmp_path: Path,
    tally: Tally,
) -> None:
    """The merge works as before, and the --from store keeps its bytes, its mode and its
    folder (no -wal / -shm left beside it); an older version's store is migrated in a
    private copy. Before, opening it narrowed its mode to 0600, and migrated it in place."""
    edit = OLDER_VERSION if version == "older-version" else "SELECT 1"
    shard = _edited_copy(shard_stores[2], tmp_path / "from", edit)
    before = _state(shard)

    result = runner.invoke(app, ["runs", "merge", "r", "--from", str(shard)])

    held = result.exit_code == 0 and _state(shard) == before
    tally.input(held)
    assert result.exit_code == 0, result.output
    assert "shards 1, 2 of 2" in " ".join(result.stdout.split())
    assert _state(shard) == before


def _plant_live_lock(store: LocalStore, pid: int) -> int:
    run = store.get_run("r", DATASET)
    assert run is not None
    with store._tx(write=True) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO run_locks VALUES (?, 'live', ?, ?, ?, 'earlier')",
            (run.id, pid, socket.gethostname(), process_start(pid)),
        )
    return run.id


def test_take_over_lock_never_takes_a_run_from_a_live_process(
    shard_stores: dict[int, Path], home_with_shard_1: LocalStore, tally: Tally
) -> None:
    """Before: ``--take-over-lock`` took the lock of a process that was still running on this
    host (same pid, same start time), which then went on writing beside the finalize."""
    store = home_with_shard_1
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        if process_start(live.pid) is None:
            pytest.skip("process start times cannot be read here (no /proc)")
        run_id = _plant_live_lock(store, live.pid)
        before = store.get_run_by_id(run_id)
        attempts = {
            "finalize": ["runs", "finalize", "r", "--allow-missing", "--take-over-lock"],
            "merge": ["runs", "merge", "r", "--from", str(shard_stores[2]), "--take-over-lock"],
        }
        for what, args in attempts.items():
            result = runner.invoke(app, args)
            holder = store.run_lock(run_id)
            held = (
                result.exit_code == 2
                and _one_error_line(result.stderr)
                and holder is not None
                and holder.pid == live.pid
                and store.get_run_by_id(run_id) == before
            )
            tally.input(held)
            assert result.exit_code == 2, (what, result.output, result.exception)
            assert _one_error_line(result.stderr), result.stderr
            assert f"pid {live.pid}" in result.stderr and "still running" in result.stderr
            assert holder is not None and holder.pid == live.pid, what  # still theirs
            assert store.get_run_by_id(run_id) == before, what
    finally:
        live.kill()
        live.wait()
    # once it is gone, its lock is taken over without being asked
    result = runner.invoke(app, ["runs", "finalize", "r", "--allow-missing"])
    assert result.exit_code == 0, result.output
    assert f"took over the lock of run 'r' left by pid {live.pid}" in result.stderr
