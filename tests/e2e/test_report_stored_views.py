"""The report reads each result's stored alignment (``results.counts``) instead of scoring the
run again; a row without one is scored. Both ways must give the same report, item for item,
and the details are decoded only from the page's compressed chunks."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import pytest

import extraction_eval.analysis.compare.along as compare_along
import extraction_eval.analysis.html_report.build as report_build
import extraction_eval.analysis.html_report.items as report_items
from extraction_eval.analysis.compare.runs import CompareOptions, compare_runs
from extraction_eval.analysis.html_report.data import CHUNK, build_report_data
from extraction_eval.analysis.html_report.pairing import comparison_view
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.reports.html import render_report
from tests.support.report_page import read_embedded
from tests.support.report_runs import FILLERS, make_runs


@pytest.fixture
def stores(tmp_path: Path) -> tuple[LocalStore, LocalStore]:
    """The same two runs twice: as the runner stored them, and with the stored counts
    dropped (rows as stored before m008)."""
    db = tmp_path / "views.db"
    store = LocalStore(db)
    make_runs(store, tmp_path)
    store.close()
    old = tmp_path / "old.db"
    with sqlite3.connect(db) as src, sqlite3.connect(old) as dst:
        src.backup(dst)
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE results SET counts = NULL")
    return LocalStore(db), LocalStore(old)


def test_stored_views_and_re_scoring_give_the_same_report(
    stores: tuple[LocalStore, LocalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    views, old = stores
    scored: list[str] = []
    real = report_items.score_dataset_item

    def counting(item, *args, **kwargs):  # type: ignore[no-untyped-def]
        scored.append(item.id)
        return real(item, *args, **kwargs)

    monkeypatch.setattr(report_items, "score_dataset_item", counting)
    fast = build_report_data(views, [get_run(views, "rep-a"), get_run(views, "rep-b")])
    assert scored == []  # every row had its stored view: nothing scored again
    slow = build_report_data(old, [get_run(old, "rep-a"), get_run(old, "rep-b")])
    # every row of A (errored ones too) and the rows where B answered otherwise; B's fillers
    # answered as A did and are laid out from A's side (test_alike_answers_laid_out_once)
    assert sorted(scored) == sorted([r["id"] for r in slow.items] + ["r-001", "r-002", "r-003"])
    assert fast.items == slow.items
    assert fast.table == slow.table
    assert fast.comparison == slow.comparison


def test_the_page_embeds_what_the_data_holds(stores: tuple[LocalStore, LocalStore]) -> None:
    store = stores[0]
    data = build_report_data(store, [get_run(store, "rep-a"), get_run(store, "rep-b")])
    assert len(data.chunks) == -(-(3 + FILLERS) // CHUNK)
    embedded = read_embedded(render_report(data))
    assert embedded["items"] == data.items
    assert embedded["table"]["id"] == [r["id"] for r in data.items]
    assert embedded["types"] == data.types


def test_alike_answers_laid_out_once(
    stores: tuple[LocalStore, LocalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where B answered as A did (same output, error, stored counts, tags), B's side reuses A's
    objects: the report is the same as when every side is made on its own."""
    made: list[str] = []
    real = report_items.run_side

    def counting(item, *args, **kwargs):  # type: ignore[no-untyped-def]
        made.append(item.id)
        return real(item, *args, **kwargs)

    for store in stores:
        runs = [get_run(store, "rep-a"), get_run(store, "rep-b")]
        made.clear()
        monkeypatch.setattr(report_build, "run_side", counting)
        shared = build_report_data(store, runs)
        assert len(made) == (3 + FILLERS) + 3  # B's fillers are A's answers
        monkeypatch.setattr(report_build, "same_answer", lambda *_: False)
        made.clear()
        alone = build_report_data(store, runs)
        assert len(made) == 2 * (3 + FILLERS)
        assert shared.items == alone.items
        assert shared.table == alone.table
        assert render_report(shared) == render_report(alone)
        monkeypatch.undo()


def test_no_cycle_collection_while_building(
    stores: tuple[LocalStore, LocalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector is off while the report is built (its full passes cost a fifth of a large
    build) and back on afterwards, also when the build fails."""
    store = stores[0]
    runs = [get_run(store, "rep-a"), get_run(store, "rep-b")]
    seen: list[bool] = []
    real = report_items.run_side

    def watching(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(report_build, "run_side", watching)
    assert gc.isenabled()
    build_report_data(store, runs)
    assert seen and not any(seen)
    assert gc.isenabled()

    def failing(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(report_build, "run_side", failing)
    with pytest.raises(RuntimeError):
        build_report_data(store, runs)
    assert gc.isenabled()


def _compare_view(store: LocalStore) -> dict[str, object]:
    paired = compare_runs(
        get_run(store, "rep-a"),
        get_run(store, "rep-b"),
        store=store,
        options=CompareOptions(force=True),
    )
    return comparison_view(paired)


def test_the_comparison_is_counted_as_the_report_reads_the_runs(
    stores: tuple[LocalStore, LocalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streamed local runs: compare's counting pass is fed the rows the report reads, not run
    again over both runs; the figures are compare's own (stored counts, and re-scored rows)."""
    for store in stores:
        expected = _compare_view(store)
        monkeypatch.setattr(compare_along, "compare_runs", _not_called)
        data = build_report_data(store, [get_run(store, "rep-a"), get_run(store, "rep-b")])
        monkeypatch.undo()
        assert data.comparison is not None
        del data.comparison["diff"]
        assert data.comparison == expected


def test_a_result_the_report_did_not_stream_sends_compare_to_read_the_runs(
    stores: tuple[LocalStore, LocalStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result for an item outside the dataset version (here a ghost row in B): the report
    never sees it, so compare reads both runs itself and names the item as only in B."""
    store = stores[0]
    run_b = get_run(store, "rep-b")
    with sqlite3.connect(store.path) as conn:
        conn.execute(
            "INSERT INTO results (run_id, item_id, output, finished_at)"
            " VALUES (?, 'r-zzz-ghost', '{\"entities\": [], \"relationships\": []}', 'now')",
            (run_b.id,),
        )
    expected = _compare_view(store)
    assert "1 only in 'rep-b'" in str(expected)
    calls: list[str] = []

    def reading(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("read")
        return compare_runs(*args, **kwargs)

    monkeypatch.setattr(compare_along, "compare_runs", reading)
    data = build_report_data(store, [get_run(store, "rep-a"), run_b])
    assert calls == ["read"]
    assert data.comparison is not None
    del data.comparison["diff"]
    assert data.comparison == expected


def _not_called(*args: object, **kwargs: object) -> None:
    raise AssertionError("compare read the runs again")
