"""Seeding datasets from production traces, through the real SDK and the loopback LangFuse."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.backends.langfuse import LangfuseDatasetBackend, langfuse_item_id
from extraction_eval.commands.seed import seed
from extraction_eval.errors import InvalidValue, UsageError
from extraction_eval.seeds.from_trace import parse_since, seed_from_traces
from tests.support.langfuse_server import FakeLangfuse

TEXT = "Ada Lovelace worked with Charles Babbage in London."
OUTPUT = {
    "entities": [
        {"name": "Ada Lovelace", "type": "person"},
        {"name": "Charles Babbage", "type": "person"},
    ],
    "relationships": [
        {"source": "Ada Lovelace", "type": "worked_with", "target": "Charles Babbage"}
    ],
}
CORRECTED = {
    **OUTPUT,
    "entities": [*OUTPUT["entities"], {"name": "London", "type": "location"}],
}


def client_for_keys(server: FakeLangfuse, public: str, secret: str) -> Any:
    from langfuse import Langfuse

    return Langfuse(public_key=public, secret_key=secret, base_url=server.base_url)


def _item_posts(server: FakeLangfuse) -> list[dict[str, Any]]:
    return [r.body for r in server.requests_to("/api/public/dataset-items", "POST")]


def test_single_trace_becomes_one_linked_item(server: FakeLangfuse, lf: Any) -> None:
    trace = server.seed_trace(
        input={"text": TEXT, "schema": {"entity_types": ["person"]}},
        output=OUTPUT,
        trace_name="extract-request",
    )
    report = seed_from_traces(lf, dataset="seeded", trace_ids=[trace.trace_id])
    assert [it.action for it in report.items] == ["create"] and report.skipped == ()
    (posted,) = _item_posts(server)
    assert posted["sourceTraceId"] == trace.trace_id
    assert posted["sourceObservationId"] == trace.observation_id
    assert posted["id"] == langfuse_item_id("seeded", f"from-{trace.trace_id}")
    assert posted["input"]["text"] == TEXT
    assert posted["expectedOutput"]["relationships"][0]["type"] == "worked_with"
    assert posted["metadata"]["seed_source"] == "output"
    # the trace was read as SDK 5 reads traces: its root observation, with the field groups
    (read,) = server.requests_to("/api/public/v2/observations")
    assert read.param("traceId") == trace.trace_id
    assert read.param("isRootObservation") == "true"
    assert read.param("fields") == "core,basic,io,metadata,trace_context"
    (item,) = LangfuseDatasetBackend(lf).get_items("seeded")
    assert item.id == f"from-{trace.trace_id}" and item.text == TEXT
    assert item.schema_ is not None and item.schema_.entity_types == ["person"]
    assert [e.name for e in item.expected.entities] == ["Ada Lovelace", "Charles Babbage"]
    assert item.source_trace_id == trace.trace_id
    assert item.metadata == {"seed_source": "output", "trace_name": "extract-request"}


def test_seeding_twice_updates_one_item_and_a_correction_takes_precedence(
    server: FakeLangfuse, lf: Any
) -> None:
    trace = server.seed_trace(input=TEXT, output=OUTPUT)  # plain-string input
    seed_from_traces(lf, dataset="seeded", trace_ids=[trace.trace_id])
    again = seed_from_traces(lf, dataset="seeded", trace_ids=[trace.trace_id])
    assert [it.action for it in again.items] == ["unchanged"]
    assert len(_item_posts(server)) == 1  # nothing resent
    # a reviewer records the corrected output (LangFuse "corrections": a CORRECTION score)
    server.seed_trace(
        input=TEXT,
        output=OUTPUT,
        trace_id=trace.trace_id,
        observation_id=trace.observation_id,
        scores=[{"name": "output", "value": json.dumps(CORRECTED), "dataType": "CORRECTION"}],
    )
    corrected = seed_from_traces(lf, dataset="seeded", trace_ids=[trace.trace_id])
    assert [(it.action, it.source) for it in corrected.items] == [("update", "correction")]
    assert len(server.dataset_items("seeded")) == 1
    (item,) = LangfuseDatasetBackend(lf).get_items("seeded")
    assert item.text == TEXT
    assert "London" in [e.name for e in item.expected.entities]
    assert item.metadata["seed_source"] == "correction"
    assert item.metadata["correction_score_id"]


def test_bulk_by_tag_skips_invalid_outputs_with_one_line_each(
    server: FakeLangfuse, lf: Any
) -> None:
    good = [server.seed_trace(input={"text": "Doc a."}, output=OUTPUT, tags=["validated"])]
    good.append(server.seed_trace(input={"text": "Doc b."}, output=OUTPUT, tags=["validated", "x"]))
    server.seed_trace(input={"text": "Not reviewed."}, output=OUTPUT, tags=["prod"])
    bad_json = server.seed_trace(input={"text": "Bad."}, output="{not json", tags=["validated"])
    bad_shape = server.seed_trace(
        input={"text": "Shape."}, output={"answer": "42"}, tags=["validated"]
    )
    no_text = server.seed_trace(input={"question": "?"}, output=OUTPUT, tags=["validated"])
    report = seed_from_traces(lf, dataset="bulk", tag="validated")
    assert sorted(it.trace_id for it in report.items) == sorted(t.trace_id for t in good)
    assert len(report.skipped) == 3
    by_trace = {line.split(":")[0]: line for line in report.skipped}
    assert "not a valid extraction" in by_trace[f"trace {bad_json.trace_id}"]
    assert "neither 'entities' nor 'relationships'" in by_trace[f"trace {bad_shape.trace_id}"]
    assert "input has no 'text'" in by_trace[f"trace {no_text.trace_id}"]
    assert all("\n" not in line for line in report.skipped)
    assert {p["sourceTraceId"] for p in _item_posts(server)} == {t.trace_id for t in good}
    # the tag went to the server as a structured filter on root observations
    read = server.requests_to("/api/public/v2/observations")[0]
    conditions = json.loads(read.param("filter") or "[]")
    assert {
        "type": "arrayOptions",
        "column": "tags",
        "operator": "any of",
        "value": ["validated"],
    } in conditions


def test_bulk_by_since_and_by_score(server: FakeLangfuse, lf: Any) -> None:
    now = datetime.now(UTC)
    old = server.seed_trace(
        input="Old one.", output=OUTPUT, start_time=now - timedelta(days=10), tags=["validated"]
    )
    recent = server.seed_trace(
        input="Recent one.",
        output=OUTPUT,
        start_time=now - timedelta(days=1),
        scores=[{"name": "human_review", "value": "approved", "dataType": "CATEGORICAL"}],
    )
    rejected = server.seed_trace(
        input="Rejected one.",
        output=OUTPUT,
        start_time=now - timedelta(hours=2),
        scores=[{"name": "human_review", "value": "rejected", "dataType": "CATEGORICAL"}],
    )
    flagged = server.seed_trace(
        input="Flagged.",
        output=OUTPUT,
        start_time=now - timedelta(days=20),
        scores=[{"name": "validated", "value": 1, "dataType": "BOOLEAN"}],
    )
    by_since = seed_from_traces(lf, dataset="s", since="7d", dry_run=True)
    assert {it.trace_id for it in by_since.items} == {recent.trace_id, rejected.trace_id}
    assert old.trace_id not in {it.trace_id for it in by_since.items}

    by_score = seed_from_traces(
        lf, dataset="s", since="7d", score_filters=["human_review=approved"], dry_run=True
    )
    assert [it.trace_id for it in by_score.items] == [recent.trace_id]
    assert by_score.not_selected == 1

    score_only = seed_from_traces(lf, dataset="s", score_filters=["validated=true"], dry_run=True)
    assert [it.trace_id for it in score_only.items] == [flagged.trace_id]


def test_dry_run_lists_what_would_be_created_and_writes_nothing(
    server: FakeLangfuse, lf: Any
) -> None:
    traces = [
        server.seed_trace(input=f"Doc {i}.", output=OUTPUT, tags=["validated"]) for i in range(2)
    ]
    report = seed_from_traces(lf, dataset="dry", tag="validated", dry_run=True)
    assert report.dry_run and report.upload is None
    assert sorted(it.trace_id for it in report.items) == sorted(t.trace_id for t in traces)
    assert {it.action for it in report.items} == {"create"}
    assert server.requests_to("/api/public/dataset-items", "POST") == []
    assert server.requests_to("/api/public/v2/datasets", "POST") == []
    assert server.datasets == {}


def test_paths_pick_text_and_extraction_from_other_trace_shapes(
    server: FakeLangfuse, lf: Any
) -> None:
    trace = server.seed_trace(
        input={
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": TEXT}]
        },
        output={"result": {"extraction": json.dumps(OUTPUT)}, "model": "x"},
    )
    without = seed_from_traces(lf, dataset="p", trace_ids=[trace.trace_id], dry_run=True)
    assert without.items == () and "point input_path at the text" in without.skipped[0]
    report = seed_from_traces(
        lf,
        dataset="p",
        trace_ids=[trace.trace_id],
        input_path="messages.1.content",
        output_path="result.extraction",
    )
    (item,) = LangfuseDatasetBackend(lf).get_items("p")
    assert report.skipped == () and item.text == TEXT and len(item.expected.entities) == 2
    missing = seed_from_traces(
        lf, dataset="p", trace_ids=[trace.trace_id], input_path="messages.5.content", dry_run=True
    )
    assert "out of range" in missing.skipped[0]


def test_unknown_and_unselected_named_traces_are_reported(server: FakeLangfuse, lf: Any) -> None:
    trace = server.seed_trace(input="Untagged.", output=OUTPUT)
    report = seed_from_traces(
        lf, dataset="n", trace_ids=["f" * 32, trace.trace_id], tag="validated", dry_run=True
    )
    assert report.items == ()
    assert report.skipped == (
        f"trace {'f' * 32}: not found (no root observation)",
        f"trace {trace.trace_id}: not tagged 'validated'",
    )


def test_bad_options_are_usage_errors(lf: Any) -> None:
    with pytest.raises(UsageError, match="select traces by tag, since or score"):
        seed_from_traces(lf, dataset="x")
    with pytest.raises(InvalidValue, match="since expects an age") as since:
        seed_from_traces(lf, dataset="x", since="yesterday")
    assert since.value.field == "since"  # the CLI shows it as --since
    with pytest.raises(InvalidValue, match="NAME=VALUE") as score:
        seed_from_traces(lf, dataset="x", score_filters=["validated"])
    assert score.value.field == "score"
    now = datetime(2026, 1, 10, tzinfo=UTC)
    assert parse_since("24h", now=now) == datetime(2026, 1, 9, tzinfo=UTC)
    assert parse_since("2w", now=now) == datetime(2025, 12, 27, tzinfo=UTC)
    assert parse_since("2026-01-01") == datetime(2026, 1, 1, tzinfo=UTC)


def test_seed_command_dry_run_then_real(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    public, secret = server.new_keys("seed-cli")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)
    monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
    good = server.seed_trace(input=TEXT, output=OUTPUT, tags=["validated"])
    bad = server.seed_trace(input=TEXT, output="nope", tags=["validated"])
    app = typer.Typer()
    app.command("seed-from-trace")(seed)
    runner = CliRunner()

    dry = runner.invoke(app, ["--tag", "validated", "--dataset", "cli", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert f"would create from-{good.trace_id}" in dry.stdout
    assert "nothing was written" in dry.stdout
    assert f"skipped trace {bad.trace_id}:" in dry.stderr
    assert server.requests_to("/api/public/dataset-items", "POST") == []

    real = runner.invoke(app, [good.trace_id, "--dataset", "cli"])
    assert real.exit_code == 0, real.output
    assert f"created from-{good.trace_id}" in real.stdout
    assert [p["sourceTraceId"] for p in _item_posts(server)] == [good.trace_id]

    failing = runner.invoke(app, [bad.trace_id, "--dataset", "cli"])
    assert failing.exit_code == 1
    assert f"skipped trace {bad.trace_id}: output is not a valid extraction" in failing.stderr

    # the commands left the SDK's client for these keys usable (flushed, not shut down)
    lf = client_for_keys(server, public, secret)
    lf.create_score(name="still-delivered", value=1.0, trace_id=good.trace_id)
    lf.flush()
    assert "still-delivered" in [s["name"] for s in server.scores]

    monkeypatch.delenv("LANGFUSE_BASE_URL")
    unconfigured = runner.invoke(app, [good.trace_id])
    assert unconfigured.exit_code == 2 and "LANGFUSE_BASE_URL" in unconfigured.stderr


def test_a_lone_surrogate_in_production_text_is_repaired_not_lost(
    server: FakeLangfuse, lf: Any
) -> None:
    """A truncated emoji in a trace (half of a UTF-16 pair) can be neither sent in a body nor
    stored by LangFuse: the seeded item carries U+FFFD and says it was repaired."""
    broken = TEXT + " \ud83d"  # the JSON the server returns holds "\ud83d"
    output = {**OUTPUT, "entities": [*OUTPUT["entities"], {"name": "\udc00x", "type": "misc"}]}
    trace = server.seed_trace(input={"text": broken}, output=output)
    report = seed_from_traces(lf, dataset="seeded", trace_ids=[trace.trace_id])
    assert [it.action for it in report.items] == ["create"] and report.skipped == ()
    (posted,) = _item_posts(server)
    assert posted["input"]["text"] == TEXT + " \ufffd"
    assert posted["expectedOutput"]["entities"][-1]["name"] == "\ufffdx"
    assert posted["metadata"]["text_repaired"] is True
    (item,) = LangfuseDatasetBackend(lf).get_items("seeded")
    assert item.text == TEXT + " \ufffd"
