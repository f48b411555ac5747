"""``compare`` reads the count rows the runner stored with each result (m008_result_counts)
instead of re-scoring, re-scores the rows that have none (stored before the migration) or that
were scored with other settings, and prints the same bytes either way."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.analysis.compare.run_diff import diff_runs
from extraction_eval.analysis.compare.runs import (
    CompareOptions,
    compare_and_diff,
    compare_runs,
    run_gold,
)
from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local.migrations import migrate
from extraction_eval.cli import _run_app, app
from extraction_eval.evaluators import diff as evaluators_diff
from extraction_eval.evaluators import gold_view as evaluators_gold_view

runner = CliRunner()
FIRST = "tests.support.pipelines:first_entity"  # the first gold entity only: recall < 1


def _run(*args: str, env: dict[str, str] | None = None) -> None:
    result = runner.invoke(_run_app, list(args), env=env)
    assert result.exit_code == 0, result.stderr


def _compare(*args: str) -> str:
    result = runner.invoke(app, ["compare", *args, "--format", "json", "--resamples", "500"])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _no_scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any re-scoring in compare's pass now fails the test."""

    def refuse(**kwargs: Any) -> Any:
        raise AssertionError(f"item {kwargs.get('item_id')!r} was re-scored")

    # what score_dataset_item calls
    monkeypatch.setattr(evaluators_gold_view, "score_item", refuse)
    monkeypatch.setattr(evaluators_diff, "score_item", refuse)


@pytest.fixture
def two_runs() -> None:
    """'first' (first gold entity per item, sample-003 fails) and 'base' (offline baseline),
    and 'base2' (the baseline again: the same outputs as 'base')."""
    _run("--name", "first", "--pipeline", FIRST, env={"E2E_FAIL": "sample-003"})
    _run("--name", "base")
    _run("--name", "base2")


def _store_path(home: Path) -> Path:
    store = LocalStore()
    path = store.path
    store.close()
    return path


def _drop_counts(path: Path, where: str = "1") -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(f"UPDATE results SET counts = NULL WHERE {where}")
    conn.close()


def test_runs_store_counts_and_compare_reads_them_without_rescoring(
    two_runs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore()
    for name in ("first", "base"):
        run = store.get_run(name)
        assert run is not None
        rows = list(store.iter_compare_rows(run.id))
        assert len(rows) == 48 and all(r[4] for r in rows)  # every row has its counts
    a, b = store.get_run("first"), store.get_run("base")
    assert a is not None and b is not None
    expected = compare_runs(a, b, store=store, options=CompareOptions(resamples=300)).to_json()
    _no_scoring(monkeypatch)
    # the paired statistics of two different runs: nothing re-scored
    assert (
        compare_runs(a, b, store=store, options=CompareOptions(resamples=300)).to_json() == expected
    )
    store.close()
    # the whole command: the items whose outputs differ are diffed from the stored views
    data = json.loads(_compare("first", "base"))
    assert data["diff"]["counts"]["changed_items"] > 0 and data["items"] == 48
    assert '"changed_items": 0' in _compare("base", "base2")


def test_the_stored_count_path_prints_the_bytes_of_the_rescoring_path(
    two_runs: None, isolated_home: Path
) -> None:
    stored = _compare("first", "base")
    _drop_counts(_store_path(isolated_home))
    rescored = _compare("first", "base")
    assert stored == rescored
    # and the same as the paired statistics and the diff computed apart, the old way
    store = LocalStore()
    a, b = store.get_run("first"), store.get_run("base")
    assert a is not None and b is not None
    result, diff = compare_and_diff(a, b, store=store, options=CompareOptions(resamples=300, top=5))
    apart = compare_runs(
        a, b, store=store, gold=lambda r: run_gold(store, r), options=CompareOptions(resamples=300)
    )
    assert result.to_json() == apart.to_json()
    assert diff.to_json() == diff_runs(store, a, b, top=5).to_json()
    store.close()


def test_rows_stored_before_the_migration_are_rescored(
    two_runs: None, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _compare("first", "base")
    # the same store as one at m007 would hold it: every table copied, results without counts
    new = _store_path(isolated_home)
    old = tmp_path / "m007" / "store.db"
    old.parent.mkdir()
    conn = sqlite3.connect(old, isolation_level=None)
    assert migrate(conn, upto="m007_batches")[-1] == "m007_batches"
    conn.execute("ATTACH DATABASE ? AS new", (str(new),))
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name != '_migrations'"
        )
    ]
    for table in tables:
        columns = ", ".join(r[1] for r in conn.execute(f"PRAGMA main.table_info({table})"))
        conn.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM new.{table}")
    conn.execute("DETACH DATABASE new")
    assert "counts" not in {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    conn.close()
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(old.parent))
    assert _compare("first", "base") == expected  # migrated to m008: counts NULL, re-scored
    store = LocalStore()
    run = store.get_run("first")
    assert run is not None and not any(r[4] for r in store.iter_compare_rows(run.id))
    store.close()
    _no_scoring(monkeypatch)  # it really re-scored: without scoring it cannot
    result = runner.invoke(app, ["compare", "first", "base", "--format", "json"])
    assert result.exit_code != 0 and "re-scored" in repr(result.exception)


def test_counts_made_with_other_settings_are_not_used(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # B scored with exact matching, A with fuzzy (the default): B's stored counts do not
    # count for a comparison that scores with A's settings, and the gold confidence floor
    # is part of what counts were made with too
    _run("--name", "a", "--pipeline", FIRST)
    _run("--name", "b", "--match", "exact")
    _run("--name", "c", "--min-gold-confidence", "0.5")
    path = _store_path(isolated_home)
    for b in ("b", "c"):
        stored = _compare("a", b)
        conn = sqlite3.connect(path)
        saved = conn.execute("SELECT rowid, counts FROM results").fetchall()
        conn.close()
        _drop_counts(path)
        assert _compare("a", b) == stored
        conn = sqlite3.connect(path)
        with conn:
            conn.executemany(
                "UPDATE results SET counts = ? WHERE rowid = ?", [(c, r) for r, c in saved]
            )
        conn.close()
    store = LocalStore()
    a, b, c = store.get_run("a"), store.get_run("b"), store.get_run("c")
    assert a is not None and b is not None and c is not None
    calls: list[str] = []
    real = evaluators_gold_view.score_item

    def counting(**kwargs: Any) -> Any:
        calls.append(kwargs["item_id"])
        return real(**kwargs)

    monkeypatch.setattr(evaluators_gold_view, "score_item", counting)
    compare_runs(a, a, store=store, options=CompareOptions(resamples=10))
    assert calls == []  # A's own counts fit A's settings
    outputs_a = {r[0]: r[1] for r in store.iter_compare_rows(a.id)}
    for other in (b, c):
        compare_runs(a, other, store=store, options=CompareOptions(resamples=10, force=True))
        # the other run's counts are not used: an item whose output differs from A's is
        # re-scored; one with A's very output has A's counts (same output, gold and settings)
        differ = {r[0] for r in store.iter_compare_rows(other.id) if r[1] != outputs_a[r[0]]}
        assert differ and len(differ) < 48
        assert set(calls) == differ
        calls.clear()
    store.close()
