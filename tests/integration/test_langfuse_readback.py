"""``read_back``: after a run, check with LangFuse that every trace and score arrived."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from extraction_eval.backends.langfuse import LangfuseTracer, read_back
from tests.support.langfuse_server import FakeLangfuse

NAMES = ("entity_f1", "extraction_error")


def _traced_items(lf: Any, n: int) -> list[str]:
    """n traces, each one generation; returns their trace ids."""
    tracer = LangfuseTracer(lf)
    trace_ids = []
    for i in range(n):
        with tracer.generation(name="extract", model="m", model_parameters={}, input=f"doc {i}"):
            trace_ids.append(lf.get_current_trace_id())
    return trace_ids


def _score_all(lf: Any, trace_ids: list[str]) -> None:
    for trace_id in trace_ids:
        lf.create_score(name="entity_f1", value=0.5, trace_id=trace_id, data_type="NUMERIC")
        lf.create_score(
            name="extraction_error", value=False, trace_id=trace_id, data_type="BOOLEAN"
        )


def test_everything_arrived(server: FakeLangfuse, lf: Any) -> None:
    started = datetime.now(UTC) - timedelta(minutes=1)
    trace_ids = _traced_items(lf, 3)
    _score_all(lf, trace_ids)
    lf.create_score(name="micro_f1", value=0.7, dataset_run_id="exp-1")
    lf.flush()
    for since in (None, started):  # per-trace lookups, and one window query
        report = read_back(
            lf,
            trace_ids=trace_ids,
            score_names=NAMES,
            experiment_id="exp-1",
            run_score_names=["micro_f1"],
            since=since,
            timeout_s=2,
            poll_s=0.05,
        )
        assert report.ok, report.lines()
        assert (report.expected_traces, report.expected_scores) == (3, 6)
        assert report.lines()[0].startswith("verified in LangFuse: 3 traces, 6 scores")
    scores_read = server.requests_to("/api/public/v3/scores")
    assert scores_read[0].param("name") == "entity_f1,extraction_error"


def test_rejected_score_batch_is_reported_missing(server: FakeLangfuse, lf: Any) -> None:
    trace_ids = _traced_items(lf, 2)
    server.reject_scores(400)
    _score_all(lf, trace_ids)
    lf.flush()  # the SDK only logs the 400: nothing raises
    posted = server.requests_to("/api/public/scores", "POST")
    assert posted and {r.status for r in posted} == {400}
    assert len(server.posted_scores) == 4 and server.scores == []
    report = read_back(lf, trace_ids=trace_ids, score_names=NAMES, timeout_s=0.3, poll_s=0.1)
    assert not report.ok
    assert report.missing_traces == ()
    assert report.missing_scores == tuple(sorted((t, n) for t in trace_ids for n in NAMES))
    (line,) = report.lines()
    assert line.startswith("missing in LangFuse: 4 of 4 item scores")
    assert str(report).startswith(line[:40]) and "\n" not in str(report)
    assert report.waited_s < 2


def test_partially_rejected_batch_names_the_missing_score(server: FakeLangfuse, lf: Any) -> None:
    trace_ids = _traced_items(lf, 1)
    server.reject_scores(None, names=["entity_f1"])
    _score_all(lf, trace_ids)
    lf.flush()
    assert {r.status for r in server.requests_to("/api/public/scores", "POST")} == {207}
    report = read_back(lf, trace_ids=trace_ids, score_names=NAMES, timeout_s=0.2, poll_s=0.1)
    assert report.missing_scores == ((trace_ids[0], "entity_f1"),)


def test_missing_trace_and_run_score_are_reported(server: FakeLangfuse, lf: Any) -> None:
    trace_ids = _traced_items(lf, 1)
    lf.create_score(name="micro_f1", value=0.7, dataset_run_id="exp-2")
    lf.flush()
    never_sent = "0" * 32
    report = read_back(
        lf,
        trace_ids=[*trace_ids, never_sent],
        experiment_id="exp-2",
        run_score_names=["micro_f1", "micro_f1_ci_low"],
        since=datetime.now(UTC) - timedelta(minutes=5),
        timeout_s=0.2,
        poll_s=0.1,
    )
    assert report.missing_traces == (never_sent,)
    assert report.missing_run_scores == ("micro_f1_ci_low",)
    assert any("1 run scores (micro_f1_ci_low)" in line for line in report.lines())


def test_late_arrivals_are_waited_for(server: FakeLangfuse, lf: Any) -> None:
    trace_ids = _traced_items(lf, 1)
    lf.flush()
    server.fail_next("/api/public/v3/scores", 2, status=404)  # "not readable yet"
    _score_all(lf, trace_ids)
    lf.flush()
    report = read_back(lf, trace_ids=trace_ids, score_names=NAMES, timeout_s=5, poll_s=0.05)
    assert report.ok, report.lines()
    assert len(report.errors) == 2  # the failed reads are kept, polling went on


def test_server_down_during_read_back_reports_instead_of_raising(
    server: FakeLangfuse, lf: Any
) -> None:
    trace_ids = _traced_items(lf, 1)
    lf.flush()
    server.down("refuse")
    report = read_back(lf, trace_ids=trace_ids, score_names=NAMES, timeout_s=0.2, poll_s=0.1)
    assert report.missing_traces == tuple(trace_ids)
    assert report.errors and "cannot reach LangFuse" in report.errors[-1]
    assert "cannot reach LangFuse" in report.lines()[-1]
    server.up()
