"""A LangFuse server that tries to hang or exhaust ``runs pull`` (and ``compare`` / ``report``,
which pull a run they lack): the same cursor on every page, a body sent a byte at a time,
endless pages of items, and malformed answers. Every read is bounded by a documented setting
(``backends/langfuse/reads.py``): a walk cut short is one warning line and what was read is
kept; a deadline or an unreadable answer is one error line, never a traceback.

Each hostile behaviour in the fake is itself bounded (a number of pages, a drip of a few
seconds), so the code before these bounds fails these tests instead of hanging them."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import (
    FakeLangfuse,
    Query,
    RawAnswer,
    client_for,
    running_fake_langfuse,
)
from tests.support.tally import Tally

DATASET = "extraction-eval"
PIPE = "tests.support.pipelines:first_entity"
RUN = "ci-run"
ITEMS = 6
HOSTILE_PAGES = 40  # how long a hostile walk goes on before the fake gives up
ITEMS_PATH = "/api/public/experiment-items"
EXPERIMENTS_PATH = "/api/public/experiments"
SCORES_PATH = "/api/public/v3/scores"
DATASET_ITEMS_PATH = "/api/public/dataset-items"  # read by the SDK's get_dataset
OBSERVATIONS_PATH = "/api/public/v2/observations"  # the read-back's window query
ENV = "EXTRACTION_EVAL_LANGFUSE_"

cli = CliRunner()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeLangfuse]:
    """One fake LangFuse holding experiment ``RUN`` (6 items, one failed), made once."""
    with running_fake_langfuse() as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXTRACTION_EVAL_HOME", str(tmp_path_factory.mktemp("ci")))
        items = LocalStore().get_items(DATASET)[:ITEMS]
        upload(server, items, DATASET)
        use_langfuse(server, mp, "ci")
        mp.setenv("E2E_FAIL", items[2].id)
        result = cli.invoke(_run_app, ["--name", RUN, "--pipeline", PIPE])
        assert result.exit_code == 0, result.stderr
        yield server


@pytest.fixture
def server(made: FakeLangfuse, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuse]:
    """The fake, pointed at with fresh keys, honest again after the test."""
    use_langfuse(made, monkeypatch, "pull")
    made.reset_requests()
    yield made
    for path in (ITEMS_PATH, EXPERIMENTS_PATH, SCORES_PATH, DATASET_ITEMS_PATH, OBSERVATIONS_PATH):
        made.rewrite(path, None)


def _invoke(*args: str) -> tuple[Result, float]:
    started = time.monotonic()
    result = cli.invoke(app, list(args))
    return result, time.monotonic() - started


def _lines(result: Result, kind: str) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith(f"{kind}:")]


def _one_error_line(result: Result) -> bool:
    """A failing exit code, one ``error:`` line, no traceback."""
    return (
        result.exit_code != 0
        and len(_lines(result, "error")) == 1
        and not isinstance(result.exception, Exception)
        and "Traceback" not in result.output
    )


def _pulled() -> tuple[str, int] | None:
    run = LocalStore().get_run(RUN, DATASET)
    return None if run is None else (run.status, len(LocalStore().results(run.id)))


class _Pages:
    """Endless pages of ``GET experiment-items``: each the honest first page (``copies``
    times its rows) with ``cursor(n)`` as the next cursor; after HOSTILE_PAGES, no cursor."""

    def __init__(self, cursor: Callable[[int], str], copies: int = 1, delay_s: float = 0.0):
        self.cursor, self.copies, self.delay_s = cursor, copies, delay_s
        self.first: dict[str, Any] | None = None
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, query: Query, answer: Any) -> Any:
        with self._lock:
            self.calls += 1
            n = self.calls
            if self.first is None:
                self.first = answer
        time.sleep(self.delay_s)
        assert self.first is not None
        data = list(self.first["data"]) * self.copies
        more = n < HOSTILE_PAGES
        return {"data": data, "meta": {"cursor": self.cursor(n)} if more else {}}


def test_the_same_cursor_twice_ends_the_walk(server: FakeLangfuse, tally: Tally) -> None:
    pages = _Pages(lambda _: "same")
    server.rewrite(ITEMS_PATH, pages)
    result, _ = _invoke("runs", "pull", RUN)
    warned = [w for w in _lines(result, "warning") if "same page cursor twice" in w]
    held = result.exit_code == 0 and pages.calls == 2 and len(warned) == 1
    tally.input(held)
    assert result.exit_code == 0, result.output
    assert pages.calls == 2  # the page with the repeated cursor, then stop
    assert len(warned) == 1, result.stderr
    assert _pulled() == ("finished", ITEMS)


def test_a_slow_drip_body_is_cut_at_the_request_deadline(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tally: Tally
) -> None:
    deadline_s = 1.0
    drip_for_s = 8 * deadline_s  # the whole body would take this long

    def drip(_: Query, answer: Any) -> RawAnswer:
        payload = json.dumps(answer).encode()
        return RawAnswer(payload, drip_s=drip_for_s / len(payload))

    server.rewrite(EXPERIMENTS_PATH, drip)
    monkeypatch.setenv(f"{ENV}REQUEST_DEADLINE", str(deadline_s))
    result, took = _invoke("runs", "pull", RUN)
    held = _one_error_line(result) and took < drip_for_s / 2
    tally.input(held)
    assert _one_error_line(result), result.output
    assert f"{ENV}REQUEST_DEADLINE" in result.stderr
    assert took < drip_for_s / 2, took


def test_the_read_deadline_bounds_a_whole_pull(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tally: Tally
) -> None:
    delay_s = 0.2
    deadline_s = 1.5
    pages = _Pages(lambda n: f"page-{n}", delay_s=delay_s)  # 40 pages: 8 s
    server.rewrite(ITEMS_PATH, pages)
    monkeypatch.setenv(f"{ENV}READ_DEADLINE", str(deadline_s))
    result, took = _invoke("runs", "pull", RUN)
    kept = _pulled()
    held = _one_error_line(result) and took < HOSTILE_PAGES * delay_s / 2 and kept is not None
    tally.input(held)
    assert _one_error_line(result), result.output
    assert f"{ENV}READ_DEADLINE" in result.stderr
    assert took < HOSTILE_PAGES * delay_s / 2, took
    assert kept == ("failed", ITEMS)  # what was read is kept, marked as a failed pull
    server.rewrite(ITEMS_PATH, None)
    again, _ = _invoke("runs", "pull", RUN)  # pulling again redoes it
    assert again.exit_code == 0, again.output
    assert _pulled() == ("finished", ITEMS)


@pytest.mark.parametrize(
    ("setting", "value", "copies", "calls", "says"),
    [
        ("MAX_PAGES", "3", 1, 3, "stopped after 3 pages"),
        ("MAX_ITEMS", "2500", 1_000 // ITEMS, 3, "stopped at 2,500 records"),
    ],
)
def test_page_and_record_caps_end_the_walk(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    tally: Tally,
    setting: str,
    value: str,
    copies: int,
    calls: int,
    says: str,
) -> None:
    pages = _Pages(lambda n: f"page-{n}", copies=copies)
    server.rewrite(ITEMS_PATH, pages)
    monkeypatch.setenv(f"{ENV}{setting}", value)
    result, _ = _invoke("runs", "pull", RUN)
    warned = [w for w in _lines(result, "warning") if says in w and f"{ENV}{setting}" in w]
    held = result.exit_code == 0 and pages.calls == calls and len(warned) == 1
    tally.input(held)
    assert result.exit_code == 0, result.output
    assert pages.calls == calls
    assert len(warned) == 1, result.stderr
    assert _pulled() == ("finished", ITEMS)


def _endless_total_pages(_: Query, answer: Any) -> Any:
    answer["meta"]["totalPages"] = HOSTILE_PAGES  # the SDK walks pages up to totalPages
    return answer


def _drip_dataset_items(_: Query, answer: Any) -> RawAnswer:
    payload = json.dumps(answer).encode()
    return RawAnswer(payload, drip_s=8.0 / len(payload))  # 8 s for the whole body


@pytest.mark.parametrize(
    ("rewrite", "setting", "value", "says"),
    [
        (_endless_total_pages, "MAX_PAGES", "3", "more than 3 pages"),
        (_drip_dataset_items, "REQUEST_DEADLINE", "1", "did not arrive within 1 s"),
    ],
)
def test_the_sdks_own_dataset_reads_are_bounded_too(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    tally: Tally,
    rewrite: Callable[[Query, Any], Any],
    setting: str,
    value: str,
    says: str,
) -> None:
    """``get_dataset`` (the SDK's) pages a dataset until the server's ``totalPages``, each
    answer under its per-read timeout only: the same bounds hold through a response hook."""
    server.rewrite(DATASET_ITEMS_PATH, rewrite)
    monkeypatch.setenv(f"{ENV}{setting}", value)
    result, took = _invoke("runs", "pull", RUN)
    calls = len(server.requests_to(DATASET_ITEMS_PATH, "GET"))
    held = _one_error_line(result) and says in result.stderr and calls <= 4 and took < 4
    tally.input(held)
    assert _one_error_line(result), result.output
    assert says in result.stderr and f"{ENV}{setting}" in result.stderr, result.stderr
    assert calls <= 4 and took < 4, (calls, took)  # the cap, and the request over it


def test_a_langfuse_mode_run_reads_its_dataset_within_the_bounds(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tally: Tally
) -> None:
    """``run-experiment`` in LangFuse mode loads its dataset through the same SDK walk."""
    server.rewrite(DATASET_ITEMS_PATH, _endless_total_pages)
    monkeypatch.setenv(f"{ENV}MAX_PAGES", "3")
    started = time.monotonic()
    result = cli.invoke(_run_app, ["--name", "hostile-dataset", "--pipeline", PIPE])
    took = time.monotonic() - started
    calls = len(server.requests_to(DATASET_ITEMS_PATH, "GET"))
    held = _one_error_line(result) and "more than 3 pages" in result.stderr and calls <= 4
    tally.input(held)
    assert held, (result.output, calls, took)
    assert not server.requests_to(ITEMS_PATH)  # nothing ran


def test_the_read_back_after_a_run_stops_on_a_repeated_cursor(
    server: FakeLangfuse, tally: Tally
) -> None:
    """The read-back's window query (the SDK's observations list) on the same cursor: each
    poll stops at the repeat instead of paging until the traces show up (they never do)."""
    from datetime import UTC, datetime

    from extraction_eval.backends.langfuse import close_client, read_back

    calls = [0]

    def same_cursor(_: Query, answer: Any) -> Any:
        calls[0] += 1
        return {"data": [], "meta": {"cursor": "same"} if calls[0] < HOSTILE_PAGES else {}}

    server.rewrite(OBSERVATIONS_PATH, same_cursor)
    lf = client_for(server, "readback")
    try:
        report = read_back(
            lf, trace_ids=["never-arrives"], since=datetime.now(UTC), timeout_s=0.3, poll_s=0.1
        )
    finally:
        close_client(lf)
    polls_at_most = 5  # 0.3 s of polls at 0.1 s, each a first page and its repeat
    held = report.missing_traces == ("never-arrives",) and calls[0] <= 2 * polls_at_most
    tally.input(held)
    assert report.missing_traces == ("never-arrives",)
    assert calls[0] <= 2 * polls_at_most, calls[0]


def _experiments(change: Callable[[dict[str, Any]], None]) -> Callable[[Query, Any], Any]:
    def rewrite(_: Query, answer: Any) -> Any:
        for experiment in answer["data"]:
            change(experiment)
        return answer

    return rewrite


def _weird_score(_: Query, answer: Any) -> Any:
    answer["data"][0]["dataType"] = "WEIRD"
    return answer


def _junk_records(_: Query, answer: Any) -> Any:
    return {"data": [None, 1, *answer["data"]], "meta": None}


def _item_not_an_item(_: Query, answer: Any) -> Any:
    answer["data"][0] = {"id": 7, "input": None, "status": "WEIRD"}
    return answer


# (path, rewrite, "error" or the warning's text, what the line says)
MALFORMED: dict[str, tuple[str, Callable[[Query, Any], Any], str]] = {
    "invalid JSON": (EXPERIMENTS_PATH, lambda q, a: RawAnswer(b'{"data": [{"id'), "not JSON"),
    "a list": (EXPERIMENTS_PATH, lambda q, a: [1, 2, 3], "not a JSON object"),
    "null and 1 as records": (ITEMS_PATH, _junk_records, "2 records are not JSON objects"),
    "score dataType WEIRD": (SCORES_PATH, _weird_score, "dataType 'WEIRD'"),
    "startTime not-a-time": (
        EXPERIMENTS_PATH,
        _experiments(lambda e: e.update(startTime="not-a-time")),
        "unreadable time 'not-a-time'",
    ),
    "dataset items a list": (DATASET_ITEMS_PATH, lambda q, a: [1, 2, 3], "does not read"),
    "dataset item malformed": (DATASET_ITEMS_PATH, _item_not_an_item, "does not read"),
    "scoring metadata unknown key": (
        EXPERIMENTS_PATH,
        _experiments(lambda e: e["metadata"].update(scoring='{"weird": 1}')),
        "scoring metadata does not read",
    ),
    "prompt_version ²": (
        EXPERIMENTS_PATH,
        _experiments(lambda e: e["metadata"].update(prompt_version="²")),
        "",
    ),
}
FATAL = {
    "invalid JSON",
    "a list",
    "startTime not-a-time",
    "dataset items a list",
    "dataset item malformed",
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_answer_is_one_line(server: FakeLangfuse, tally: Tally, case: str) -> None:
    path, rewrite, says = MALFORMED[case]
    server.rewrite(path, rewrite)
    result, _ = _invoke("runs", "pull", RUN)
    if case in FATAL:
        held = _one_error_line(result) and says in result.stderr
    else:
        warned = [w for w in _lines(result, "warning") if says in w] if says else [""]
        held = (
            result.exit_code == 0
            and len(warned) == 1
            and len(_lines(result, "warning")) == (1 if says else 0)
            and _pulled() == ("finished", ITEMS)
        )
    tally.input(held)
    assert held, result.output


@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_pulling_from_a_hostile_server_is_one_line(
    server: FakeLangfuse, tmp_path: Path, tally: Tally, command: str
) -> None:
    server.rewrite(EXPERIMENTS_PATH, lambda q, a: [1, 2, 3])
    args = ["--out", str(tmp_path / "r.html")] if command == "report" else ["other-run"]
    result, _ = _invoke(command, RUN, *args)
    held = _one_error_line(result) and "not a JSON object" in result.stderr
    tally.input(held)
    assert held, result.output


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("MAX_PAGES", "abc"),
        ("MAX_ITEMS", "0"),
        ("REQUEST_DEADLINE", "nan"),
        ("READ_DEADLINE", "-1"),
    ],
)
def test_a_bad_bound_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tally: Tally, setting: str, value: str
) -> None:
    monkeypatch.setenv(f"{ENV}{setting}", value)
    result, _ = _invoke("runs", "pull", RUN)
    held = (
        result.exit_code == 2
        and _one_error_line(result)
        and f"{ENV}{setting} must be" in result.stderr
    )
    tally.input(held)
    assert held, result.output
