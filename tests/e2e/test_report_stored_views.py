"""The report reads each result's stored alignment (``results.counts``) instead of scoring the
run again; a row without one is scored. Both ways must give the same report, item for item,
and the details are decoded only from the page's compressed chunks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import extraction_eval.analysis.report_items as report_items
from extraction_eval.analysis.report_data import CHUNK, build_report_data
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.reports.html import read_embedded, render_report
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
    assert len(scored) == 2 * (3 + FILLERS)  # every row of both runs (errored ones too)
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
