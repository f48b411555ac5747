"""The read-back of a large run walks the experiment's items in start-time windows side by
side (cursor pages are sequential within one walk): every item and score is still found,
the windows cover the whole run with no gap, and their number is bounded (a small run keeps
its single walk: test_langfuse_delivery)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from extraction_eval.backends.langfuse import verify_run
from extraction_eval.backends.langfuse.readback import start_windows
from tests.support.langfuse_server import FakeLangfuse, parse_ts


def _experiment(lf: Any, n: int) -> tuple[str, dict[str, list[str]]]:
    """An experiment of ``n`` local items, each trace with one score on its task span."""
    traces: dict[str, list[str]] = {}

    async def task(*, item: Any, **_: Any) -> Any:
        trace_id = lf.get_current_trace_id()
        lf.create_score(
            name="entity_f1",
            value=0.5,
            trace_id=trace_id,
            observation_id=lf.get_current_observation_id(),
            data_type="NUMERIC",
        )
        traces[trace_id] = ["entity_f1"]
        return {"n": item["input"]["n"]}

    result = lf.run_experiment(
        name="windows",
        run_name="windows",
        data=[{"input": {"n": i}} for i in range(n)],
        task=task,
        max_concurrency=16,
    )
    lf.flush()
    return result.experiment_id, traces


def test_a_large_run_is_read_back_in_windows_that_cover_it_all(
    server: FakeLangfuse, lf: Any
) -> None:
    since = datetime.now(UTC) - timedelta(seconds=1)
    experiment_id, traces = _experiment(lf, 900)
    server.reset_requests()
    report = verify_run(
        lf, traces=traces, experiment_id=experiment_id, run_score_names=[], since=since,
        timeout_s=5,
    )  # fmt: skip
    assert report.ok, report.lines()
    assert (report.expected_traces, report.expected_scores) == (900, 900)
    walks = server.requests_to("/api/public/experiment-items", "GET")
    starts = sorted({parse_ts(r.param("fromStartTime") or "") for r in walks})
    assert len(starts) == 3  # 900 items: three windows of about 400
    assert starts[0] == since.replace(microsecond=since.microsecond // 1000 * 1000)
    ends = {parse_ts(r.param("fromStartTime") or ""): r.param("toStartTime") for r in walks}
    assert ends[starts[-1]] is None  # the last window is open: nothing after it is missed
    for first, second in itertools.pairwise(starts):
        end = ends[first]
        assert end is not None and parse_ts(end) > second  # overlapping: no gap between
    assert {r.param("fields") for r in walks} == {"core,scores"}


def test_windows_overlap_and_are_bounded() -> None:
    since = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    until = since + timedelta(seconds=30)
    assert start_windows(since, until, 10) == [(since, None)]
    assert start_windows(since, since, 5000) == [(since, None)]  # no span of time: one walk
    windows = start_windows(since, until, 100_000)
    assert len(windows) == 4  # bounded, however large the run
    assert windows[0][0] == since and windows[-1][1] is None
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end is not None and end - start == timedelta(milliseconds=1)
