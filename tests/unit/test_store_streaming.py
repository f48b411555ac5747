"""Streaming reads of a run: ``iter_results`` batches and orders, and the read-back built on it
(``runs export`` line by line, ``compare`` as a merge of two streams, ``runs show`` in tables)."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from extraction_eval.analysis.reporting import export_run, write_run_export
from extraction_eval.analysis.stored import in_both_runs
from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import NotFoundError, UsageError
from extraction_eval.types import Extraction, ItemResult, Score, TaxonomyTag
from extraction_eval.views import runs as views


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    s = LocalStore(tmp_path / "s.db", seed=False)
    yield s
    s.close()


def _result(item_id: str, f1: float | None, *, error: str | None = None) -> ItemResult:
    scores = [Score(name="extraction_error", value=error is not None, data_type="BOOLEAN")]
    if f1 is not None:
        scores.insert(0, Score(name="entity_f1", value=f1))
    scores.append(Score(name="failure_category", value="missed", data_type="CATEGORICAL"))
    return ItemResult(
        item_id=item_id,
        output=None if error else Extraction(),
        error=error,
        error_kind="provider" if error else None,
        latency_ms=1.0,
        scores=scores,
        trace_id=f"t-{item_id}",
        taxonomy=[
            TaxonomyTag(category="missed", kind="entity", side="gold", index=0, label=item_id)
        ],
    )


# recorded in this order; ids not sorted, so each order is visible
RESULTS = [
    _result("e", 0.5),
    _result("b", 1.0),
    _result("d", None, error="HTTP 500"),
    _result("a", 0.25),
    _result("c", 0.5),
]


def _recorded(store: LocalStore, name: str = "r", results: list[ItemResult] = RESULTS) -> int:
    run = store.create_run(name=name, dataset="d", dataset_version=1, config={})
    for r in results:
        store.record_result(run.id, r)
    return run.id


def test_iter_results_gives_each_order_in_batches(store: LocalStore) -> None:
    run_id = _recorded(store)
    assert list(store.iter_results(run_id, batch_size=2)) == RESULTS  # every field, recorded
    by_id = [r.item_id for r in store.iter_results(run_id, order_by="item_id", batch_size=2)]
    assert by_id == ["a", "b", "c", "d", "e"]
    # runs show's order: errors first, then entity F1 ascending (none counts as 0), then id
    shown = [r.item_id for r in store.iter_results(run_id, order_by="failing_first", batch_size=3)]
    assert shown == ["d", "a", "c", "e", "b"]
    assert shown == [
        r.item_id
        for r in sorted(
            RESULTS, key=lambda r: (r.ok, views.score_value(r, "entity_f1") or 0.0, r.item_id)
        )
    ]
    assert store.results(run_id) == RESULTS


def test_iter_results_holds_no_transaction_between_batches(store: LocalStore) -> None:
    """Between two batches the store is free: another method (here a write) can run, which a
    read transaction left open by the iterator would refuse."""
    run_id = _recorded(store)
    stream = store.iter_results(run_id, batch_size=2)
    seen = [next(stream).item_id, next(stream).item_id]
    store.record_result(run_id, _result("z", 0.0))  # recorded after the ids were fixed
    assert store.count_results(run_id) == 6
    seen += [r.item_id for r in stream]
    assert seen == ["e", "b", "d", "a", "c"]


def test_iter_results_checks_the_run_and_batch_size_when_called(store: LocalStore) -> None:
    with pytest.raises(NotFoundError, match="run id 99"):
        store.iter_results(99)  # at the call, not at the first item
    with pytest.raises(UsageError, match="batch_size"):
        store.iter_results(_recorded(store), batch_size=0)


def test_counts_and_score_names_come_from_sql(store: LocalStore) -> None:
    run_id = _recorded(store)
    assert store.count_results(run_id) == 5
    assert store.count_results(run_id, category="missed") == 5
    assert store.count_results(run_id, category="spurious") == 0
    assert store.item_score_names(run_id) == ["entity_f1", "extraction_error", "failure_category"]
    assert store.count_untagged(run_id) == 0
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE results SET taxonomy_recorded = 0 WHERE item_id IN ('a', 'b')")
    assert store.count_untagged(run_id) == 2


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("deterministic", [False, True])
def test_streamed_export_is_byte_identical_to_the_in_memory_one(
    store: LocalStore, fmt: str, deterministic: bool
) -> None:
    run_id = _recorded(store)
    run = store.get_run_by_id(run_id)
    out = io.StringIO()
    write_run_export(store, run, fmt, out, deterministic=deterministic)  # type: ignore[arg-type]
    expected = export_run(store.results(run_id), fmt, deterministic=deterministic)  # type: ignore[arg-type]
    assert out.getvalue() == expected
    assert len(out.getvalue().splitlines()) == 5 + (fmt == "csv")
    if fmt == "csv":  # the failure_category scores are the categories column, not a score one
        assert out.getvalue().splitlines()[0].endswith(",score.entity_f1,score.extraction_error")


def test_streamed_export_of_an_empty_run_has_the_same_header(store: LocalStore) -> None:
    run = store.get_run_by_id(_recorded(store, results=[]))
    out = io.StringIO()
    write_run_export(store, run, "csv", out)
    assert out.getvalue() == export_run([], "csv") == "item_id\n"


def test_compare_merges_two_streams_by_item_id(store: LocalStore) -> None:
    a = store.get_run_by_id(_recorded(store, "a"))
    b_results = [
        _result("a", 0.75),  # +0.5
        _result("b", 1.0),  # unchanged
        _result("c", 0.25),  # -0.25
        _result("e", 0.0),  # -0.5 (ties with a on |delta|: id order)
        _result("f", 1.0),  # only in B
    ]
    b = store.get_run_by_id(_recorded(store, "b", b_results))  # no "d": only in A
    only_in_a: list[str] = []
    only_in_b: list[str] = []
    pairs = in_both_runs(
        ((r.item_id, r) for r in store.iter_results(a.id, order_by="item_id")),
        ((r.item_id, r) for r in store.iter_results(b.id, order_by="item_id")),
        only_in_a,
        only_in_b,
    )
    assert [(i, x.item_id, y.item_id) for i, x, y in pairs] == [(k, k, k) for k in "abce"]
    assert only_in_a == ["d"] and only_in_b == ["f"]


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=100, force_terminal=False, color_system=None), buf


def test_runs_show_prints_a_long_stream_as_tables_without_holding_it(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views, "ROWS_PER_TABLE", 2)
    run_id = _recorded(store)
    run = store.get_run_by_id(run_id)
    pulled = 0
    pulled_at_first_write: list[int] = []

    def stream() -> Iterator[ItemResult]:
        nonlocal pulled
        for r in store.iter_results(run_id, order_by="failing_first"):
            pulled += 1
            yield r

    console, buf = _console()
    original_write = buf.write

    def write(text: str) -> int:
        if not pulled_at_first_write and text.strip():
            pulled_at_first_write.append(pulled)
        return original_write(text)

    monkeypatch.setattr(buf, "write", write)
    views.render_run_items(run, stream(), console, total=5)
    text = buf.getvalue()
    assert pulled == 5 and pulled_at_first_write == [4]  # one table + one look-ahead, not all
    assert "run 'r' on 'd': 5 items" in text and text.count("entity F1") == 1
    rows = [line.split()[0] for line in text.splitlines() if line.strip()[:1] in "abcde"]
    assert rows[:5] == ["d", "a", "c", "e", "b"]
    assert text.index("traces") > text.index(" b ")  # traces after every table


def test_runs_show_output_of_a_short_run_is_unchanged_by_total(store: LocalStore) -> None:
    run = store.get_run_by_id(_recorded(store))
    with_total, buf_a = _console()
    views.render_run_items(run, store.iter_results(run.id), with_total, total=5)
    without, buf_b = _console()
    views.render_run_items(run, store.results(run.id), without)
    assert buf_a.getvalue() == buf_b.getvalue()
