"""No false alarms, no silent loss: a slow server's late answers are not reported as lost
scores, a score the server lost is re-posted by the read-back (same id: never doubled), and
the run's last line says what is verified in LangFuse."""

from __future__ import annotations

from collections import Counter

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app
from tests.integration.test_langfuse_experiment import DATASET, PIPE, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

cli = CliRunner()


def test_a_slow_server_gives_no_dropped_alarm_and_the_last_line_says_all_arrived(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(server, LocalStore().get_items(DATASET)[:3])
    use_langfuse(server, monkeypatch, "slow")
    monkeypatch.setenv("LANGFUSE_TIMEOUT", "1")  # the SDK gives up on each batch after 1 s
    server.slow_scores(1.5)  # ... which the server stored before answering
    result = cli.invoke(_run_app, ["--name", "slow-1", "--pipeline", PIPE])
    assert result.exit_code == 0, result.stderr
    assert "dropped" not in result.stderr and "dropped" not in result.stdout
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("verified in LangFuse: 3 traces, ")
    assert "the SDK could not confirm" in last and "all of them had arrived" in last
    store = LocalStore()
    run = store.get_run("slow-1", DATASET)
    assert run is not None
    expected = sum(len(r.scores) for r in store.results(run.id))
    assert len([s for s in server.scores if s.get("traceId")]) == expected


def test_the_read_back_re_posts_lost_scores_with_their_ids_and_says_so(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(server, LocalStore().get_items(DATASET)[:3])
    use_langfuse(server, monkeypatch, "lost")
    server.lose_scores(["entity_f1", "error_count"])  # accepted, then lost once per id
    result = cli.invoke(_run_app, ["--name", "lost-1", "--pipeline", PIPE])
    assert result.exit_code == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("verified in LangFuse: 3 traces, ")
    assert "re-posted 5 scores" in last  # entity_f1 on 3 traces; run-level entity_f1, error_count
    posted = Counter(
        s["id"] for s in server.posted_scores if s["name"] == "entity_f1" and s.get("traceId")
    )
    assert len(posted) == 3 and set(posted.values()) == {2}  # each sent twice, same id
    stored = [s for s in server.scores if s["name"] == "entity_f1" and s.get("traceId")]
    assert len(stored) == 3  # never doubled
    assert {s["name"] for s in server.scores if s.get("datasetRunId")} >= {"error_count"}


def test_the_read_back_walks_the_experiments_items_a_page_at_a_time(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    upload(server, LocalStore().get_items(DATASET)[:6])
    use_langfuse(server, monkeypatch, "walk")
    result = cli.invoke(_run_app, ["--name", "walk-1", "--pipeline", PIPE])
    assert result.exit_code == 0, result.stderr
    walks = server.requests_to("/api/public/experiment-items", "GET")
    assert len(walks) == 1  # 6 items with their scores: one page
    assert walks[0].param("fields") == "core,scores" and walks[0].param("limit") == "100"
    by_trace = [r for r in server.requests_to("/api/public/v3/scores") if r.param("traceId")]
    assert by_trace == []  # no per-trace score lookups
    assert server.requests_to("/api/public/v2/observations") == []
    assert result.stdout.strip().splitlines()[-1].startswith("verified in LangFuse: 6 traces, ")
