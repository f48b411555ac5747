"""The runner: every item ends as exactly one row, failures are counted, concurrency is real."""

from __future__ import annotations

import asyncio

import pytest

from extraction_eval.errors import ProviderError, SchemaFailure
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.runner import ItemRunner, run_bounded
from extraction_eval.pipeline.base import PipelineOutput
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult
from tests.support.summaries import fold_summary

GOLD = Extraction(entities=[Entity(name="Ada Lovelace", type="person")])


def _item(i: int, gold: Extraction = GOLD) -> DatasetItem:
    return DatasetItem(id=f"i{i}", text=f"Ada Lovelace wrote note {i}.", expected=gold)


class ScriptedPipeline:
    """A pipeline whose behaviour per item id is given by the test."""

    def __init__(self, behaviour: dict[str, object], delay: float = 0.0) -> None:
        self.behaviour = behaviour
        self.delay = delay
        self.calls: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def extract(self, item: DatasetItem) -> PipelineOutput:
        self.calls.append(item.id)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            what = self.behaviour.get(item.id, GOLD)
            if isinstance(what, BaseException):
                raise what
            assert isinstance(what, Extraction)
            return PipelineOutput(extraction=what, raw="{}", attempts=1)
        finally:
            self.in_flight -= 1


def _run(pipeline: ScriptedPipeline, items: list[DatasetItem], concurrency: int = 4):
    runner = ItemRunner(pipeline=pipeline, scoring=ScoringConfig(resamples=200))
    results: list[ItemResult] = []
    asyncio.run(
        run_bounded(items, runner.run_item, concurrency=concurrency, on_result=results.append)
    )
    return runner, results


def _score(result: ItemResult, name: str) -> object:
    return {s.name: s.value for s in result.scores}[name]


def test_every_item_is_a_row_and_errors_are_scored() -> None:
    items = [_item(i) for i in range(5)]
    schema_err = SchemaFailure("not JSON", raw="oops")
    schema_err.attempts = 1  # type: ignore[attr-defined]
    provider_err = ProviderError("HTTP 500", retryable=True)
    provider_err.attempts = 4  # type: ignore[attr-defined]
    pipeline = ScriptedPipeline(
        {"i1": schema_err, "i2": provider_err, "i3": ValueError("boom\nsecond line")}
    )
    _runner, results = _run(pipeline, items)
    by_id = {r.item_id: r for r in results}
    assert sorted(by_id) == [f"i{i}" for i in range(5)]
    assert by_id["i0"].ok and _score(by_id["i0"], "extraction_error") is False
    assert by_id["i1"].error_kind == "schema" and by_id["i1"].raw_output == "oops"
    assert by_id["i2"].error_kind == "provider" and by_id["i2"].attempts == 4
    assert by_id["i3"].error == "ValueError: boom second line"  # one line (errors.one_line)
    for i in ("i1", "i2", "i3"):
        err = {s.name: s for s in by_id[i].scores}["extraction_error"]
        assert err.value is True and err.data_type == "BOOLEAN" and err.comment == by_id[i].error
        assert _score(by_id[i], "entity_recall") == 0.0


def test_failed_items_count_in_aggregates_as_empty_predictions() -> None:
    items = [_item(i) for i in range(4)]
    pipeline = ScriptedPipeline({"i0": ProviderError("down")})
    runner, results = _run(pipeline, items)
    scores = [runner.score(items[int(r.item_id[1:])], r.output) for r in results]
    summary = fold_summary(results, scores, runner.scoring, expected_items=4)
    assert summary.errors == 1 and summary.items == 4 and summary.missing == 0
    # 4 gold entities, 3 found: a dropped failure would make recall 1.0
    assert summary.report["entities"]["recall"] == pytest.approx(0.75)
    assert summary.values["entity_recall"] == pytest.approx(0.75)
    assert summary.values["error_rate"] == pytest.approx(0.25)
    assert summary.score_means["extraction_error"] == pytest.approx(0.25)
    names = {s.name for s in summary.run_scores}
    assert {"entity_f1", "error_count", "schema_failure_count"} <= names


def test_concurrency_really_overlaps_and_is_bounded() -> None:
    items = [_item(i) for i in range(12)]
    pipeline = ScriptedPipeline({}, delay=0.1)
    _, results = _run(pipeline, items, concurrency=4)
    assert len(results) == 12
    assert pipeline.max_in_flight == 4  # overlapping (serial gives 1), bounded by concurrency


def test_every_run_value_is_a_known_fail_under_name() -> None:
    from extraction_eval.experiments.summary import RUN_VALUE_NAMES

    gold = Extraction(
        entities=[Entity(name="Ada Lovelace", type="person", evidence="Ada Lovelace")]
    )
    items = [_item(0, gold), _item(1, Extraction())]
    pipeline = ScriptedPipeline({"i0": gold, "i1": Extraction()})
    runner, results = _run(pipeline, items)
    scores = [runner.score(items[int(r.item_id[1:])], r.output) for r in results]
    summary = fold_summary(results, scores, runner.scoring)
    assert "evidence_coverage_rate" in summary.values and "zero_fp_pass_rate" in summary.values
    assert set(summary.values) <= RUN_VALUE_NAMES


def test_run_outcome_repr_is_short_so_asyncio_run_does_not_print_every_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On Python 3.11, ``asyncio.run`` builds the repr of its main task (and so of the task's
    result) twice while restoring the SIGINT handler; a full dataclass repr of a 2,000-item
    outcome cost ~0.3 s each time. The outcome's repr must not walk its results."""
    from extraction_eval.backends.base import RunRecord
    from extraction_eval.experiments.runner import RunOutcome

    items = [_item(i) for i in range(300)]
    runner, results = _run(ScriptedPipeline({}), items)
    summary = fold_summary(results, [runner.score(i, GOLD) for i in items], runner.scoring)
    run = RunRecord(
        id=7, name="r", dataset="d", dataset_version=1, backend="local", experiment_id=None,
        config={}, status="finished", started_at="t0", ended_at="t1", summary=summary.to_json(),
    )  # fmt: skip
    outcome = RunOutcome(
        run=run, summary=summary, ran=len(results), read_results=lambda: iter(results)
    )
    reprs = 0
    original = ItemResult.__repr__

    def counting_repr(self: ItemResult) -> str:
        nonlocal reprs
        reprs += 1
        return original(self)

    monkeypatch.setattr(ItemResult, "__repr__", counting_repr)

    async def main() -> RunOutcome:
        return outcome

    assert asyncio.run(main()) is outcome
    text = repr(outcome)
    assert reprs == 0
    assert len(text) < 300
    assert "'r'" in text and "300 results" in text


def test_an_answer_is_dumped_once_for_the_surrogate_test_and_the_secret_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runner tests the answer for lone surrogates with its JSON dump and scans the same
    text for secrets: one dump per answer, not one each (per-item CPU on every item). A
    secret in the answer is still masked."""
    from extraction_eval.redact import register_secret

    dumps = []
    real = Extraction.model_dump_json

    def counted(self: Extraction, **kwargs: object) -> str:
        dumps.append(1)
        return real(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Extraction, "model_dump_json", counted)
    _, results = _run(ScriptedPipeline({}), [_item(1)])
    assert len(dumps) == 1 and results[0].output == GOLD

    secret = "sk-runner-dump-once-" + "x" * 24
    register_secret(secret)
    leaky = Extraction(entities=[Entity(name=f"Ada {secret}", type="person")])
    _, results = _run(ScriptedPipeline({"i2": leaky}), [_item(2)])
    output = results[0].output
    assert output is not None and secret not in output.entities[0].name
    assert _score(results[0], "secret_masked") is True
