"""``--judge anthropic:MODEL``: the judge through the Anthropic provider against a loopback
Messages API server (``tests/support/anthropic_server.py``): its verdicts ride in the forced
tool call, a gateway refusing tools is detected once and asked for text, failures are counted
and never matches, the key never shown. Nothing leaves 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.analysis.score_files import score_files
from extraction_eval.cli import app
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.judge.factory import make_judge
from extraction_eval.judge.model import ModelJudge
from extraction_eval.llm.anthropic_provider import AnthropicProvider
from extraction_eval.llm.retry import RetryPolicy
from tests.support.anthropic_server import AnthropicServer
from tests.support.judging import IBM_GOLD, IBM_PRED, lyon_differs, write_ibm_pair
from tests.support.openai_server import content, slow

KEY = "anth-judge-DO-NOT-LEAK-5150"
GOLD, PRED = IBM_GOLD, IBM_PRED
CONFIG = ScoringConfig(resamples=0)


def answer(body: dict[str, Any]) -> str:
    return json.dumps(lyon_differs(body, "loopback claude"))


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write_ibm_pair(tmp_path)


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(answer=answer) as s:
        yield s


def test_the_cli_judges_with_claude_through_the_forced_tool_call(
    server: AnthropicServer, files: tuple[Path, Path]
) -> None:
    gold, pred = files
    args = ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"]
    args += ["--judge", "anthropic:claude-judge", "--judge-base-url", server.url]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    judged = report["judged"]
    assert judged["stats"]["errors"] == 0, judged["stats"]
    assert judged["matches"]["entities"] == 1  # IBM, not Lyon
    assert report["entities"]["tp"] == 0 and judged["entities"]["tp"] == 1
    assert judged["judge"].startswith("anthropic:claude-judge at http://127.0.0.1")
    calls = server.message_requests
    sent = calls[-1].body
    assert sent["model"] == "claude-judge" and "temperature" not in sent
    assert sent["tool_choice"]["type"] == "tool"
    assert sent["tools"][0]["input_schema"]["required"] == ["verdicts"]
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert len(server.message_requests) == len(calls)  # every verdict from the cache
    assert json.loads(again.stdout)["judged"]["stats"]["cache_hits"] == 2
    assert KEY not in first.output + again.output


def test_a_gateway_refusing_tools_is_detected_once_and_asked_for_text(
    files: tuple[Path, Path],
) -> None:
    """A Messages-API gateway without tool use (400 to any request with tools): the judge
    probes once, as a run does, and its calls then go as text and are read the same way."""
    gold, pred = files
    with AnthropicServer(answer=answer, refuse_tools=True) as server:
        judge = make_judge(
            "anthropic:claude-judge",
            base_url=server.url,
            retry=RetryPolicy.immediate(max_attempts=2),
        )
        report = score_files(gold, pred, CONFIG, judge=judge).report
        judged = report["judged"]
        assert judged["stats"]["errors"] == 0, judged["stats"]
        assert judged["matches"]["entities"] == 1
        assert "tools" not in server.message_requests[-1].body
        assert isinstance(judge, ModelJudge) and isinstance(judge.provider, AnthropicProvider)
        assert judge.provider.response_format == "text"


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        (content("Both name IBM, so yes.", times=2), "wrong schema"),
        (content('{"verdict": "same"}', times=2), "wrong schema"),
        (content(json.dumps({"verdicts": [{"id": 1, "same": True, "reason": KEY}]})), "secret"),
        (slow(2.0, times=2), "timed out"),
    ],
)
def test_bad_or_slow_claude_answers_are_counted_and_change_no_string_figure(
    server: AnthropicServer, files: tuple[Path, Path], fault: Any, problem: str
) -> None:
    gold, pred = files
    plain = score_files(gold, pred, CONFIG).report
    server.inject(fault)
    judge = ModelJudge(
        "anthropic:claude-judge",
        base_url=server.url,
        timeout_s=0.5,
        max_attempts=2,
        response_format="json_schema",  # pinned: the faults meet the judge's calls
    )
    report = score_files(gold, pred, CONFIG, judge=judge).report
    judged = report.pop("judged")
    assert report == plain
    assert judged["stats"]["errors"] >= 1 and judged["matches"]["entities"] == 0
    assert any(problem in line for line in judged["stats"]["error_examples"]), judged["stats"]
    assert KEY not in json.dumps(judged)
