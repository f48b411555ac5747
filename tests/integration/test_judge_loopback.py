"""A model judge over real HTTP: the ``openai`` client against a loopback OpenAI-compatible
server (``--judge-base-url``). Errors, malformed and slow answers and an echoed key each leave
the string figures as they are and are counted; an unchanged re-run sends no request. Nothing
leaves 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.analysis.score_files import score_files
from extraction_eval.commands.score import score
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.judge.model import ModelJudge
from extraction_eval.llm.retry import RetryPolicy
from tests.support.judging import IBM_GOLD, IBM_PRED, lyon_differs, write_ibm_pair
from tests.support.openai_server import (
    LoopbackServer,
    content,
    echo_auth,
    malformed_body,
    server_error,
    slow,
)

KEY = "sk-judge-SECRET-0123456789"
GOLD, PRED = IBM_GOLD, IBM_PRED

app = typer.Typer()
app.command("score")(score)


@app.callback()
def _group() -> None:
    """A group, like the real CLI."""


verdicts = lyon_differs  # the judge a person would be


def answer(body: dict[str, Any]) -> str:
    return json.dumps(verdicts(body))


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(answer=answer) as s:
        yield s


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write_ibm_pair(tmp_path)


CONFIG = ScoringConfig(resamples=0)


def _judge(server: LoopbackServer, attempts: int = 2, timeout_s: float = 5.0) -> ModelJudge:
    """Format pinned: the injected faults meet the judge's calls, not a format probe."""
    return ModelJudge(
        "openai:judge-model",
        base_url=server.url,
        retry=RetryPolicy.immediate(max_attempts=attempts, timeout_s=timeout_s),
        response_format="json_schema",
    )


def test_the_cli_judges_over_http_and_an_unchanged_rerun_sends_nothing(
    server: LoopbackServer, files: tuple[Path, Path]
) -> None:
    gold, pred = files
    args = ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"]
    args += ["--judge", "openai:judge-model", "--judge-base-url", server.url]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    # the response-format probe (a compatible server: detected once), then one judge call
    assert len(server.chat_requests) == 2
    assert report["judged"]["stats"]["calls"] == 1
    sent = server.chat_requests[-1].body
    assert sent["model"] == "judge-model" and sent["temperature"] == 0.0
    assert sent["response_format"]["type"] == "json_schema"
    assert report["judged"]["matches"]["entities"] == 1  # IBM, not Lyon
    assert report["entities"]["tp"] == 0 and report["judged"]["entities"]["tp"] == 1
    assert "127.0.0.1" in report["judged"]["judge"]
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len(server.chat_requests) == 2  # every verdict from the cache: not even a probe
    assert json.loads(again.stdout)["judged"]["stats"]["cache_hits"] == 2


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        (server_error(500, times=2), "judge call failed"),
        (malformed_body(times=2), "judge call failed"),
        (content("Both name IBM, so yes.", times=2), "not JSON"),
        (content('{"verdict": "same"}', times=2), "wrong schema"),
        (slow(2.0, times=2), "timed out"),
    ],
)
def test_a_failing_server_is_counted_and_changes_no_string_figure(
    server: LoopbackServer, files: tuple[Path, Path], fault: Any, problem: str
) -> None:
    gold, pred = files
    plain = score_files(gold, pred, CONFIG).report
    server.inject(fault)
    judge = _judge(server, timeout_s=0.5)
    report = score_files(gold, pred, CONFIG, judge=judge).report
    judged = report.pop("judged")
    assert report == plain
    assert judged["stats"]["errors"] == judged["stats"]["pairs"] == 2
    assert judged["matches"]["entities"] == 0
    assert any(problem in line for line in judged["stats"]["error_examples"]), judged["stats"]


def test_a_server_refusing_json_schema_is_asked_for_json_object(
    files: tuple[Path, Path],
) -> None:
    """llama.cpp's server refuses ``json_schema`` (500, invalid request) and follows the
    schema given with ``json_object``: the judge detects that once and its calls then work."""
    from tests.support.openai_server import llama_cpp_python_formats

    gold, pred = files
    with LoopbackServer(answer=answer, formats=llama_cpp_python_formats()) as server:
        judge = ModelJudge(
            "openai:judge-model", base_url=server.url, retry=RetryPolicy.immediate(max_attempts=2)
        )
        report = score_files(gold, pred, CONFIG, judge=judge).report
        assert report["judged"]["stats"]["errors"] == 0
        assert report["judged"]["matches"]["entities"] == 1
        assert server.chat_requests[-1].body["response_format"]["type"] == "json_object"


def test_an_echoed_key_never_reaches_the_report(
    server: LoopbackServer, files: tuple[Path, Path]
) -> None:
    gold, pred = files
    server.inject(echo_auth(401, times=5))
    report = score_files(gold, pred, CONFIG, judge=_judge(server)).report
    assert report["judged"]["stats"]["errors"] == 2
    assert KEY not in json.dumps(report)
    # and a verdict whose reason quotes the key is not used
    server.inject(content(json.dumps({"verdicts": [{"id": 1, "same": True, "reason": KEY}]})))
    report = score_files(gold, pred, CONFIG, judge=_judge(server)).report
    assert KEY not in json.dumps(report)
    assert report["judged"]["matches"]["entities"] == 0


def test_the_judges_own_timeout_is_honoured_and_no_item_is_lost(tmp_path: Path) -> None:
    """The judge's ``timeout_s`` (no retry policy given: the judge builds its own) cuts a slow
    answer: one item's pairs become counted errors after about ``attempts x timeout``, never
    the server's delay; every other item is still judged, every item keeps its row, and the
    string figures are the plain run's."""
    docs = [{**GOLD, "id": f"d{n}", "text": f"{GOLD['text']} Item {n}."} for n in range(1, 4)]
    gold, pred = tmp_path / "gold.jsonl", tmp_path / "pred.jsonl"
    gold.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    pred.write_text("".join(json.dumps({**PRED, "id": d["id"]}) + "\n" for d in docs))
    plain = score_files(gold, pred, CONFIG)
    timeout_s, attempts, delay_s = 0.4, 2, 5.0
    with LoopbackServer(answer=answer) as server:
        server.inject(slow(delay_s, times=attempts, match="Item 2."))
        judge = ModelJudge(
            "openai:judge-model",
            base_url=server.url,
            timeout_s=timeout_s,
            max_attempts=attempts,
            response_format="json_schema",
        )
        started = time.monotonic()
        scored = score_files(gold, pred, CONFIG, judge=judge)
        took = time.monotonic() - started
    report = dict(scored.report)
    judged = report.pop("judged")
    assert report == plain.report
    assert took < delay_s  # the server's delay was never waited out
    stats = judged["stats"]
    assert stats["errors"] == 2 and stats["calls"] == len(docs)
    assert any(f"timed out after {timeout_s:g}s" in x for x in stats["error_examples"]), stats
    assert [j.item_id for j in scored.judged or []] == [d["id"] for d in docs]
    assert judged["matches"]["entities"] == len(docs) - 1  # the two answered items: IBM each
