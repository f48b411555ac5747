"""The driver both modes share, through local mode: what happens when the mirror refuses a
result, the reuse error that names no CLI flag (the CLI maps the field), the summary folded
as items finish, and the collector kept off what was alive before the run."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
from dataclasses import replace
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import BackendError, InvalidValue
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local
from extraction_eval.experiments.runner import ItemRunner
from extraction_eval.experiments.summary import SummaryAccumulator
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import ItemResult, Score, Usage

PIPE = "tests.support.pipelines:first_entity"
DATASET = "extraction-eval"


def _config(name: str, **extra: Any) -> RunConfig:
    return RunConfig(
        dataset=DATASET, name=name, pipeline=PipelineConfig(pipeline=PIPE), limit=5, **extra
    )


def test_a_refused_mirror_write_is_reported_after_the_run_and_the_other_items_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = LocalStore()
    items = store.get_items(DATASET)[:5]
    refused = items[2].id
    record = LocalStore.record_result

    def flaky_record(self: LocalStore, run_id: int, result: Any, **how: Any) -> None:
        if result.item_id == refused:
            raise OSError("disk I/O error\n(details on a second line)")
        record(self, run_id, result, **how)

    monkeypatch.setattr(LocalStore, "record_result", flaky_record)
    with pytest.raises(BackendError) as caught:
        asyncio.run(arun_local(_config("flaky"), store=store))
    assert str(caught.value) == (
        f"1 results could not be written to the local store (first: {refused}:"
        " disk I/O error (details on a second line))"
    )
    run = store.get_run("flaky", DATASET)
    assert run is not None and run.status == "finished"
    stored = {r.item_id for r in store.results(run.id)}
    assert stored == {i.id for i in items} - {refused}  # every other item ran and was kept


def test_reusing_a_run_name_is_a_flag_free_error_on_the_resume_field() -> None:
    store = LocalStore()
    asyncio.run(arun_local(_config("taken"), store=store))
    with pytest.raises(InvalidValue) as caught:
        asyncio.run(arun_local(_config("taken"), store=store))
    error = caught.value
    assert error.field == "resume" and "--" not in str(error)
    assert "run 'taken' on dataset 'extraction-eval'" in str(error)
    assert len(store.list_runs()) == 1  # refused before anything was created
    outcome = asyncio.run(arun_local(_config("taken", resume=True), store=store))
    assert outcome.ran == 0 and outcome.summary.items == 5


def test_the_outcome_holds_no_results_and_reads_them_from_the_store_in_dataset_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 100,000-item run must not keep every result in memory: finalize streams the stored
    results into the summary and the outcome reads them back only when asked."""
    store = LocalStore()
    items = store.get_items(DATASET)[:5]

    def load_all(self: LocalStore, run_id: int, **kw: Any) -> list[ItemResult]:
        raise AssertionError("every stored result loaded at once")

    monkeypatch.setattr(LocalStore, "results", load_all)
    outcome = asyncio.run(arun_local(_config("lazy"), store=store))
    held = [v for v in vars(outcome).values() if isinstance(v, (list, tuple, dict))]
    assert not any(isinstance(x, ItemResult) for v in held for x in v)
    assert outcome.summary.items == 5 and "5 results" in repr(outcome)
    assert [r.item_id for r in outcome.results] == [i.id for i in items]  # dataset order
    assert [r.item_id for r in outcome.iter_results()] == [i.id for i in items]
    # read when asked: a result recorded after the run (a later retry) is what it gives
    retried = outcome.results[1].model_copy(update={"latency_ms": 1234.0})
    store.record_result(outcome.run.id, retried)
    assert outcome.results[1] == retried


def test_the_summary_is_folded_as_items_finish_and_only_earlier_results_are_rescored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each item is scored once, as it finishes; finalize re-scores only the results an
    earlier invocation stored, and the figures equal a one-shot run's."""
    store = LocalStore()
    items = store.get_items(DATASET)[:5]
    scored: list[str] = []
    score = ItemRunner.score

    def counting(self: ItemRunner, item: Any, pred: Any) -> Any:
        scored.append(item.id)
        return score(self, item, pred)

    monkeypatch.setattr(ItemRunner, "score", counting)
    monkeypatch.setenv("E2E_FAIL", f"{items[1].id},{items[3].id}")
    first = asyncio.run(arun_local(_config("fold"), store=store))
    assert first.summary.errors == 2
    assert sorted(scored) == sorted(i.id for i in items)  # once each: no re-score at the end

    scored.clear()
    monkeypatch.delenv("E2E_FAIL")
    again = asyncio.run(arun_local(_config("fold", resume=True, retry_errors=True), store=store))
    assert again.ran == 2 and again.summary.errors == 0 and again.summary.items == 5
    # the two retried items scored as they ran, the three kept results re-scored from the store
    assert sorted(scored) == sorted(i.id for i in items)

    one_shot = asyncio.run(arun_local(_config("one-shot"), store=store))
    assert again.summary.report == one_shot.summary.report
    assert again.summary.score_means == one_shot.summary.score_means
    assert again.summary.values == one_shot.summary.values
    stored = store.get_run("fold", DATASET)
    assert stored is not None and stored.summary == again.summary.to_json()
    # and both equal re-scoring every stored result, as finalize did before the fold
    assert _rescored(store, "fold", items) == again.summary.to_json()
    assert _rescored(store, "one-shot", items) == one_shot.summary.to_json()


def _rescored(store: LocalStore, name: str, items: list[Any]) -> dict[str, Any]:
    from extraction_eval.evaluators import ContextIndex
    from extraction_eval.experiments.runner import Rescorer, finalize

    run = store.get_run(name, DATASET)
    assert run is not None
    scorer = Rescorer(ScoringConfig(), ContextIndex({i.id: i.text for i in items}))
    return finalize(store, run, items, scorer, status=run.status).to_json()


def test_a_fold_cut_short_falls_back_to_rescoring_every_stored_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C (or any error) in the middle of folding one result must not count it twice:
    the run is summarised from what the store holds."""
    from extraction_eval.evaluators.report import ReportAccumulator

    store = LocalStore()
    add, seen = ReportAccumulator.add, []

    def interrupted_third(self: ReportAccumulator, score: Any) -> None:
        seen.append(score.item_id)
        if len(seen) == 3:
            raise KeyboardInterrupt
        add(self, score)

    monkeypatch.setattr(ReportAccumulator, "add", interrupted_third)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(arun_local(_config("cut", concurrency=1), store=store))
    monkeypatch.setattr(ReportAccumulator, "add", add)
    run = store.get_run("cut", DATASET)
    assert run is not None and run.status == "interrupted" and run.summary is not None
    stored = store.results(run.id)
    assert len(stored) == 3  # the third item's row was written before its fold
    assert run.summary["items"] == 3 and run.summary["report"]["items"] == 3


def test_a_run_stopped_by_a_raised_keyboard_interrupt_hands_sigint_back_to_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a run that a ``KeyboardInterrupt`` (raised, not signalled) stopped, the process
    has Python's default SIGINT handler again, so the next ``asyncio.run`` (a notebook's next
    run) installs its own and a Ctrl-C there cancels the run instead of raising wherever it
    lands. It used to keep the dead run's asyncio handler."""
    from extraction_eval.evaluators.report import ReportAccumulator

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    add, seen = ReportAccumulator.add, []

    def interrupted(self: ReportAccumulator, score: Any) -> None:
        seen.append(score.item_id)
        if len(seen) == 2:
            raise KeyboardInterrupt
        add(self, score)

    monkeypatch.setattr(ReportAccumulator, "add", interrupted)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(arun_local(_config("stopped", concurrency=1), store=LocalStore()))
    monkeypatch.setattr(ReportAccumulator, "add", add)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    async def handler_during_a_run() -> Any:
        return signal.getsignal(signal.SIGINT)

    during = asyncio.run(handler_during_a_run())
    assert isinstance(during, functools.partial)  # asyncio's own, for this new run
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_error_swallowed_by_the_scheduler_mid_fold_still_counts_each_item_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LangFuse's ``run_experiment`` catches a task's exception and goes on: a fold cut short
    there leaves a finished run whose summary must still come from the store."""
    from extraction_eval.evaluators.report import ReportAccumulator
    from extraction_eval.experiments.driver import Driver
    from extraction_eval.experiments.prepare import prepare

    store = LocalStore()
    add, calls = ReportAccumulator.add, []

    def broken_second(self: ReportAccumulator, score: Any) -> None:
        calls.append(score.item_id)
        if len(calls) == 2:  # once: half of the second item is folded, then it fails
            raise RuntimeError("fold failed")
        add(self, score)

    monkeypatch.setattr(ReportAccumulator, "add", broken_second)
    prep = prepare(_config("swallowed"), store)
    driver = Driver(prep, store)

    async def schedule() -> None:
        for item in prep.iter_todo():
            result = await driver.run_item(item)
            with contextlib.suppress(RuntimeError):  # what the SDK does with a task's error
                driver.record(result)

    with driver.running():
        asyncio.run(schedule())
    summary = driver.outcome().summary
    assert summary.items == 5 and summary.report["items"] == 5


def test_summary_figures_do_not_depend_on_the_order_items_finish_in() -> None:
    """Results are folded in the order they finish: float sums must not depend on it."""
    values = [1e16, 1.0, -1e16]  # a plain left-to-right sum gives 0.0 in this order

    def folded(order: list[float]) -> Any:
        acc = SummaryAccumulator(ScoringConfig())
        for i, v in enumerate(order):
            acc.add_result(
                ItemResult(
                    item_id=f"i{i}",
                    scores=[Score(name="x", value=v)],
                    usage=Usage(cost_usd=v),
                )
            )
        return acc

    sums = [folded(order) for order in (values, [1.0, 1e16, -1e16], values[::-1])]
    assert {a.summary().score_means["x"] for a in sums} == {1.0 / 3}
    assert {a.summary().cost_usd for a in sums} == {1.0}


def test_objects_alive_before_a_run_are_kept_out_of_the_collector_during_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Full collections during a run must not walk the imported SDKs' objects again (it cost
    about a fifth of the loop's CPU at concurrency 64); they go back afterwards."""
    import gc

    from tests.support.gc_watch import watch_freeze

    frozen = watch_freeze(monkeypatch)
    assert gc.get_freeze_count() == 0
    asyncio.run(arun_local(_config("frozen"), store=LocalStore()))
    assert len(frozen) == 5 and min(frozen) > 1000
    assert gc.get_freeze_count() == 0


def test_runs_side_by_side_share_one_freeze_and_leave_someone_elses_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from tests.support.gc_watch import watch_freeze

    frozen = watch_freeze(monkeypatch)
    store = LocalStore()

    async def both() -> None:  # the short run ends first: the long one must stay frozen
        await asyncio.gather(
            arun_local(replace(_config("short", concurrency=1), limit=1), store=store),
            arun_local(replace(_config("long", concurrency=1), limit=6), store=store),
        )

    asyncio.run(both())
    assert len(frozen) == 7 and min(frozen) > 1000
    assert gc.get_freeze_count() == 0
    # and their Ctrl-C watches, ended out of order, left Python's own SIGINT handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    gc.freeze()  # a freeze the process made itself stays after our run
    try:
        before = gc.get_freeze_count()
        asyncio.run(arun_local(_config("theirs"), store=store))
        assert before > 1000 and gc.get_freeze_count() > before // 2  # not thawed (0)
    finally:
        gc.unfreeze()


class _OnlyResults:
    """A store that offers the driver the ``ResultStore`` protocol and nothing more: any
    other store method the driver reached for would be an AttributeError."""

    def __init__(self, store: LocalStore) -> None:
        self.record_result = store.record_result
        self.iter_item_results = store.iter_item_results
        self.finish_run = store.finish_run
        self.delete_empty_run = store.delete_empty_run
        self.get_run = store.get_run
        self.release_run_lock = store.release_run_lock


def test_the_driver_needs_only_a_result_store() -> None:
    from extraction_eval.backends.base import ResultStore
    from extraction_eval.experiments.driver import Driver
    from extraction_eval.experiments.prepare import prepare
    from extraction_eval.experiments.runner import run_bounded

    store = LocalStore()
    prep = prepare(_config("narrow"), store)
    narrow: ResultStore = _OnlyResults(store)
    driver = Driver(prep, narrow)

    async def drive() -> None:
        await run_bounded(prep.iter_todo(), driver.run_item, concurrency=2, on_result=driver.record)

    with driver.running():
        asyncio.run(drive())
    outcome = driver.outcome()
    whole = asyncio.run(arun_local(_config("whole"), store=store))
    assert outcome.run.status == "finished" and len(outcome.results) == 5
    assert outcome.summary.values == whole.summary.values  # latencies aside, the same run
    assert outcome.summary.report == whole.summary.report
