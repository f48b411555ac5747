"""One item can never stop the run or lose its row: a pipeline that raises any
``BaseException``, an exception whose ``str()`` raises, a pipeline that hangs past
``timeout_s``, and text with lone UTF-16 surrogates (model reply, pipeline output, error
message). A real Ctrl-C still stops the run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.repair import REPAIRED_SCORE
from extraction_eval.experiments.run import arun_local, run_experiment
from extraction_eval.llm.fake import register_fake
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import ItemResult

DATASET = "extraction-eval"
HOSTILE = "tests.support.hostile_pipelines:"


def _run(store: LocalStore, name: str, *, limit: int = 3, **pipeline: Any) -> list[ItemResult]:
    config = RunConfig(dataset=DATASET, name=name, pipeline=PipelineConfig(**pipeline), limit=limit)
    outcome = asyncio.run(arun_local(config, store=store))
    assert outcome.run.status == "finished"
    results = outcome.results
    assert len(results) == limit  # every item a row
    return results


@pytest.mark.parametrize(
    ("function", "error"),
    [
        ("system_exit", "SystemExit: 3"),
        ("keyboard_interrupt", "KeyboardInterrupt"),
        ("async_keyboard_interrupt", "KeyboardInterrupt"),
        ("async_system_exit", "SystemExit: bye"),
        ("generator_exit", "GeneratorExit"),
        ("own_base_exception", "OwnBaseException: mine"),
        ("stop_iteration", "RuntimeError: StopIteration raised: StopIteration()"),
        ("unprintable", "Unprintable: <str() of Unprintable raised RuntimeError>"),
        ("hostile_attributes", "HostileAttributes: attributes raise"),
    ],
)
def test_whatever_a_pipeline_raises_is_its_items_pipeline_error_and_the_run_goes_on(
    function: str, error: str
) -> None:
    results = _run(LocalStore(), function, pipeline=HOSTILE + function)
    assert {(r.error, r.error_kind, r.attempts) for r in results} == {(error, "pipeline", 1)}


@pytest.mark.parametrize("function", ["hang", "async_hang"])
def test_timeout_bounds_a_user_pipeline_and_records_a_timeout_error(function: str) -> None:
    started = time.monotonic()
    results = _run(LocalStore(), function, pipeline=HOSTILE + function, timeout_s=0.3)
    assert time.monotonic() - started < 10  # not the 30 s the pipeline sleeps
    how = "cancelled" if function.startswith("async") else "its thread may still be running"
    assert {(r.error, r.error_kind) for r in results} == {
        (f"TimeoutError: pipeline did not return within 0.3 s ({how})", "timeout")
    }
    # a TimeoutError the pipeline raises itself keeps its own message
    own = _run(LocalStore(), f"own-{function}", pipeline=HOSTILE + "own_timeout", timeout_s=30)
    assert {r.error for r in own} == {"TimeoutError: my own timeout"}


def _repaired(result: ItemResult) -> str | None:
    found = [s for s in result.scores if s.name == REPAIRED_SCORE]
    return found[0].comment if found else None


def test_a_lone_surrogate_in_a_pipelines_output_is_stored_as_fffd_and_recorded() -> None:
    store = LocalStore()
    results = _run(store, "sur-out", pipeline=HOSTILE + "surrogate_output")
    for result in results:
        assert result.output is not None
        assert [(e.name, e.type) for e in result.output.entities] == [
            ("Ada \ufffd", "person\ufffd")
        ]
        assert _repaired(result) == "lone UTF-16 surrogates replaced with U+FFFD in: output"
    config = RunConfig(
        dataset=DATASET,
        name="sur-out",
        pipeline=PipelineConfig(pipeline=HOSTILE + "surrogate_output"),
        limit=3,
        resume=True,
    )
    again = asyncio.run(arun_local(config, store=store))  # resume works afterwards
    assert again.ran == 0 and len(again.results) == 3


def test_a_lone_surrogate_in_a_returned_json_string_is_repaired_in_output_and_raw() -> None:
    results = _run(LocalStore(), "sur-str", pipeline=HOSTILE + "surrogate_string")
    for result in results:
        assert result.output is not None and result.output.entities[0].name == "Ada \ufffd"
        assert _repaired(result) == "lone UTF-16 surrogates replaced with U+FFFD in: output"


def test_a_lone_surrogate_in_an_error_message_is_stored_as_fffd_and_recorded() -> None:
    run = _run(LocalStore(), "sur-err", pipeline=HOSTILE + "surrogate_error")
    for result in run:
        assert result.error == "ValueError: bad \ufffd byte"
        assert _repaired(result) == "lone UTF-16 surrogates replaced with U+FFFD in: error"


def test_a_lone_surrogate_in_a_model_reply_is_stored_as_fffd_and_the_run_resumes() -> None:
    store = LocalStore()
    escaped = '{"entities": [{"name": "Ada \\ud800", "type": "person"}], "relationships": []}'
    raw = '{"entities": [{"name": "Ada \ud800", "type": "person"}], "relationships": []}'
    items = store.get_items(DATASET)[:2]
    register_fake("surrogates", {"items": {items[0].id: escaped, items[1].id: raw}})
    config = RunConfig(
        dataset=DATASET, name="sur-model", pipeline=PipelineConfig(model="fake:surrogates"), limit=2
    )
    outcome = asyncio.run(arun_local(config, store=store))
    by_id = {r.item_id: r for r in outcome.results}
    assert len(by_id) == 2
    for result in by_id.values():
        assert result.ok and result.output is not None
        assert result.output.entities[0].name == "Ada \ufffd"
    assert _repaired(by_id[items[0].id]) == "lone UTF-16 surrogates replaced with U+FFFD in: output"
    assert "raw_output" in (_repaired(by_id[items[1].id]) or "")
    assert any("lone UTF-16 surrogates" in w for w in outcome.warnings)
    again = asyncio.run(
        arun_local(
            RunConfig(
                dataset=DATASET,
                name="sur-model",
                pipeline=PipelineConfig(model="fake:surrogates"),
                limit=2,
                resume=True,
            ),
            store=store,
        )
    )
    assert again.ran == 0 and len(again.results) == 2


def test_a_pipelines_keyboard_interrupt_is_its_error_but_a_real_sigint_stops_the_run() -> None:
    """A pipeline that raises ``KeyboardInterrupt`` itself is only its item's error; a Ctrl-C
    at the terminal is a SIGINT: the run stops (as before), the rows it finished are kept."""
    import tests.support.hostile_pipelines as hp

    calls: list[str] = []

    async def interrupt_on_second(*, item: Any, **_: Any) -> Any:
        calls.append(item.id)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.05)
        return hp.EMPTY

    hp.interrupt_on_second = interrupt_on_second  # type: ignore[attr-defined]
    store = LocalStore()
    config = RunConfig(
        dataset=DATASET,
        name="ctrl-c",
        pipeline=PipelineConfig(pipeline=HOSTILE + "interrupt_on_second"),
        limit=10,
        concurrency=1,
    )
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(config, store=store)
    run = store.get_run("ctrl-c", DATASET)
    assert run is not None and run.status == "interrupted"
    assert len(calls) < 10
    assert signal.getsignal(signal.SIGINT) is before  # handed back
    json.dumps(run.summary)  # the interrupted run was finalized
    # a pipeline's own KeyboardInterrupt is still its item's error, after a real Ctrl-C too
    for function in ("async_keyboard_interrupt", "keyboard_interrupt"):
        own = _run(LocalStore(), f"own-{function}", pipeline=HOSTILE + function)
        assert {r.error for r in own} == {"KeyboardInterrupt"}
