"""The config objects refuse bad values themselves: a notebook gets the same refusal as the CLI,
as ``InvalidValue`` naming the field (a ``UsageError`` for the CLI, a ``ValueError`` for code)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from extraction_eval.analysis.compare.run_diff import diff_runs
from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.config import (
    RunConfig,
    fail_under_range,
    parse_fail_over,
    parse_fail_under,
)
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import ItemResult


@pytest.mark.parametrize(
    ("factory", "field"),
    [
        (lambda: PipelineConfig(timeout_s=-1), "timeout_s"),
        (lambda: PipelineConfig(timeout_s=0), "timeout_s"),
        (lambda: PipelineConfig(timeout_s=math.nan), "timeout_s"),
        (lambda: PipelineConfig(max_attempts=0), "max_attempts"),
        (lambda: PipelineConfig(max_attempts=2.5), "max_attempts"),  # type: ignore[arg-type]
        (lambda: PipelineConfig(temperature=-0.1), "temperature"),
        (lambda: PipelineConfig(temperature=math.inf), "temperature"),
        (lambda: PipelineConfig(model=" "), "model"),
        (lambda: PipelineConfig(base_url="localhost:8000"), "base_url"),
        (lambda: PipelineConfig(prompt_name=""), "prompt_name"),
        (lambda: PipelineConfig(prompt_label=""), "prompt_label"),
        (lambda: PipelineConfig(prompt_version=0), "prompt_version"),
        (lambda: RunConfig(concurrency=0), "concurrency"),
        (lambda: RunConfig(limit=0), "limit"),
        (lambda: RunConfig(dataset=""), "dataset"),
        (lambda: RunConfig(name=" "), "name"),
        (lambda: RunConfig(backend="cloud"), "backend"),  # type: ignore[arg-type]
        (lambda: RunConfig(fail_under={"entity_f1": 1.5}), "fail_under"),
        (lambda: RunConfig(fail_under={"error_rate": -0.1}), "fail_under"),
        (lambda: RunConfig(fail_under={"hallucination_rate": -1.0}), "fail_under"),
        (lambda: RunConfig(fail_under={"entity_f1": math.nan}), "fail_under"),
        (lambda: RunConfig(fail_under={"nope": 0.5}), "fail_under"),
        (lambda: ScoringConfig(seed=-1), "seed"),
        (lambda: ScoringConfig(threshold=math.nan), "threshold"),
        (lambda: ScoringConfig(resamples=-1), "resamples"),
        (lambda: ScoringConfig(match="regex"), "match"),  # type: ignore[arg-type]
        (lambda: ScoringConfig(confidence=1.0), "confidence"),
    ],
)
def test_config_objects_refuse_bad_values_naming_the_field(factory: Any, field: str) -> None:
    with pytest.raises(InvalidValue) as info:
        factory()
    assert info.value.field == field and str(info.value).startswith(field)
    assert isinstance(info.value, UsageError) and isinstance(info.value, ValueError)


def test_fail_under_bounds_per_metric() -> None:
    assert fail_under_range("entity_f1") == (0.0, 1.0)
    assert fail_under_range("error_rate") == (0.0, 1.0)
    assert fail_under_range("hallucination_rate") == (0.0, None)  # objects per empty item
    assert fail_under_range("attr.date") == (0.0, 1.0)
    assert fail_under_range("nope") is None
    assert parse_fail_under(["entity_f1=1", "zero_fp_pass_rate=0.5"]) == {
        "entity_f1": 1.0,
        "zero_fp_pass_rate": 0.5,
    }
    assert parse_fail_over(["hallucination_rate=3", "error_rate=0"]) == {
        "hallucination_rate": 3.0,
        "error_rate": 0.0,
    }
    # a floor on a lower-is-better figure would fail a run for having too few errors
    with pytest.raises(InvalidValue, match="error_rate is better when lower"):
        parse_fail_under(["error_rate=0.1"])
    with pytest.raises(InvalidValue, match="lower is better"):
        parse_fail_over(["entity_f1=0.5"])
    with pytest.raises(InvalidValue, match="hallucination_rate=-1"):
        parse_fail_over(["hallucination_rate=-1"])
    with pytest.raises(InvalidValue, match=r"entity_f1=1\.5: entity_f1 must be between 0 and 1"):
        parse_fail_under(["entity_f1=1.5"])


def test_the_diff_refuses_a_negative_top() -> None:
    store = LocalStore()
    run = store.create_run(name="r", dataset="extraction-eval", dataset_version=1, config={})
    with pytest.raises(InvalidValue, match="top must be at least 0"):
        diff_runs(store, run, run, top=-1)


def test_delete_empty_run_never_deletes_a_run_with_results() -> None:
    store = LocalStore()
    empty = store.create_run(name="e", dataset="extraction-eval", dataset_version=1, config={})
    kept = store.create_run(name="k", dataset="extraction-eval", dataset_version=1, config={})
    store.record_result(kept.id, ItemResult(item_id="i1", error="boom", error_kind="provider"))
    assert store.delete_empty_run(empty.id) is True
    assert store.delete_empty_run(kept.id) is False
    assert [r.name for r in store.list_runs()] == ["k"]


def test_the_run_record_holds_no_credential_of_the_base_url() -> None:
    import json

    from extraction_eval.errors import InvalidValue
    from extraction_eval.experiments.config import RunConfig, describe, redact_url
    from extraction_eval.pipeline.base import PipelineConfig

    url = "http://user:hunter2@127.0.0.1:9/v1?api-key=hunter3"
    # a URL with credentials is refused (the message shows none of them) ...
    with pytest.raises(InvalidValue) as info:
        PipelineConfig(model="openai:gpt-4o-mini", base_url=url)
    assert "hunter" not in str(info.value)
    # ... and the record's redaction would hide them anyway
    assert redact_url(url) == "http://***@127.0.0.1:9/v1?***"
    assert "hunter" not in json.dumps(redact_url(url))
    plain = describe(
        RunConfig(pipeline=PipelineConfig(model="llama3", base_url="http://127.0.0.1:9/v1")),
        packages={},
        git=None,
    )
    assert plain["pipeline"]["base_url"] == "http://127.0.0.1:9/v1"
