"""A large report is built in two processes (``html_report.build``): this process builds
the first items up to a chunk boundary while a worker process builds the rest, and the parts
are joined in dataset order. The report must be the one a single process builds, byte for
byte: the table, the compressed chunks, the comparison (its bootstrap included), the latency
histogram and the page."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

import extraction_eval.analysis.html_report.build as report_build
import extraction_eval.analysis.html_report.data as report_data
import extraction_eval.analysis.html_report.items as report_items
import extraction_eval.workers.report_worker as report_worker
from extraction_eval.analysis.html_report.data import CHUNK, ReportData, build_report_data
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.reports.html import render_report
from tests.support.split_runs import N_ITEMS, make_split_runs


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> LocalStore:
    tmp = tmp_path_factory.mktemp("split")
    made = LocalStore(tmp / "split.db")
    make_split_runs(made, tmp)
    return made


def _same(one: ReportData, two: ReportData) -> None:
    assert one.chunks == two.chunks  # compressed bytes: the same JSON, item for item
    assert one.table == two.table
    assert one.types == two.types
    assert one.categories == two.categories
    assert one.comparison == two.comparison
    assert one.latency == two.latency
    assert one.runs == two.runs
    assert render_report(one) == render_report(two)


@pytest.mark.parametrize("names", [("split-a", "split-b"), ("split-a", "split-c"), ("split-b",)])
@pytest.mark.parametrize("split", [CHUNK, 2 * CHUNK])
def test_a_split_build_is_the_single_process_build(
    store: LocalStore, names: tuple[str, ...], split: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [get_run(store, n) for n in names]
    alone = build_report_data(store, runs, split=0)
    started: list[int] = []
    real = report_data.Worker

    def watched(path: Path, runs_: object, after: int) -> report_worker.Worker:
        started.append(after)
        return real(path, runs_, after)  # type: ignore[arg-type]

    monkeypatch.setattr(report_data, "Worker", watched)
    both = build_report_data(store, runs, split=split)
    assert len(started) == 1  # the worker did build the items after ``split``
    assert both.n_items == N_ITEMS
    # the worker's items bring types the first part had not seen (remapped when joined)
    first_types = {t for ts in both.table["types"][:split] for t in ts}
    assert {t for ts in both.table["types"][split:] for t in ts} - first_types
    if names == ("split-a", "split-b"):
        assert both.comparison is not None
        assert both.comparison["diff"]["changed_items"] > 0
    _same(alone, both)


@pytest.mark.parametrize(
    "code",
    [
        "raise SystemExit('worker down')",  # before it sent anything
        # after its counts and rows, with a failing exit: its rows are not trusted
        "import pickle, sys; sys.path[:] = pickle.load(sys.stdin.buffer);"
        " from extraction_eval.workers.report_worker import work; work();"
        " raise SystemExit('worker down')",
    ],
)
def test_a_failed_worker_leaves_its_items_to_this_process(
    store: LocalStore,
    code: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker that dies costs time, never items: its range is built here, and why it
    failed is one line of the warning (its stderr is not the user's terminal)."""
    runs = [get_run(store, "split-a"), get_run(store, "split-b")]
    alone = build_report_data(store, runs, split=0)
    monkeypatch.setattr(report_worker.Worker, "code", code)
    with caplog.at_level(logging.WARNING):
        both = build_report_data(store, runs, split=CHUNK)
    warned = [r.getMessage() for r in caplog.records if "worker process failed" in r.getMessage()]
    assert len(warned) == 1 and "worker down" in warned[0] and "\n" not in warned[0]
    assert "worker down" not in capfd.readouterr().err
    _same(alone, both)


def test_a_hung_worker_is_stopped_and_its_items_built_here(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker that never answers is stopped once it outlives its wait (three times this
    process's own half, at least a minute; shortened here), and its range is built here."""
    runs = [get_run(store, "split-a"), get_run(store, "split-b")]
    alone = build_report_data(store, runs, split=0)
    monkeypatch.setattr(report_worker.Worker, "code", "import time; time.sleep(600)")
    monkeypatch.setattr(report_data, "WORKER_WAIT_MIN_S", 0.5)
    monkeypatch.setattr(report_data, "WORKER_WAIT_FACTOR", 0.0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        both = build_report_data(store, runs, split=CHUNK)
    assert time.monotonic() - started < 60
    assert "had not answered 0 s after this process was done" in caplog.text
    _same(alone, both)


def test_no_worker_to_be_had_builds_it_all_here(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    runs = [get_run(store, "split-a"), get_run(store, "split-b")]
    alone = build_report_data(store, runs, split=0)
    monkeypatch.setattr(report_worker.sys, "executable", "/nonexistent/python")
    both = build_report_data(store, runs, split=CHUNK)
    assert "cannot start a worker process" in caplog.text
    _same(alone, both)


def test_small_runs_stay_in_one_process(store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``SPLIT_AT`` items no worker is started (starting one costs more than it saves);
    at or above it, one is."""

    def no_worker(*args: object) -> None:
        raise AssertionError("a worker was started")

    runs = [get_run(store, "split-a"), get_run(store, "split-b")]
    monkeypatch.setattr(report_data, "Worker", no_worker)
    build_report_data(store, runs)
    monkeypatch.setattr(report_data, "SPLIT_AT", N_ITEMS)
    with pytest.raises(AssertionError, match="a worker was started"):
        build_report_data(store, runs)


def test_equal_outputs_scored_otherwise_share_their_places_in_the_text(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C stored A's outputs but is scored with ``--match exact`` (so A's side is not reused
    whole): C's objects take their spans, mentions and how they were found from A's, only
    their statuses, gold and categories are C's own. The report is the one made without."""
    runs = [get_run(store, "split-a"), get_run(store, "split-c")]
    located: list[object] = []
    real_entity = report_items.entity_object

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        located.append(args[0])
        return real_entity(*args, **kwargs)

    monkeypatch.setattr(report_items, "entity_object", counting)
    shared = build_report_data(store, runs, split=0)
    n_shared = len(located)
    real_side = report_items.run_side
    monkeypatch.setattr(report_build, "run_side", lambda *args: real_side(*args[:6]))
    located.clear()
    alone = build_report_data(store, runs, split=0)
    n_alone = len(located)
    predicted = sum(
        1 for det in alone.details() for obj in det["runs"][1]["pred"] if obj["k"] == "e"
    )
    assert predicted > 0 and n_alone - n_shared == predicted  # C's entities: none located
    _same(shared, alone)
