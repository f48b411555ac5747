"""``--max-cost`` for the judge on ``score``, ``compare`` and ``report`` (they make no
extraction call, so only the judge's calls count): past the ceiling the remaining pairs are
not judged (judge errors counted as ``budget_refused``, never matches), one ``stopped:
budget`` line, and everything judged is kept and printed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.llm.fake import FakeProvider, register_fake, unregister_fake
from tests.support.judging import last_word_answers, last_word_files

runner = CliRunner(env={"COLUMNS": "200"})
DATASET = "extraction-eval"


@pytest.fixture
def fakes() -> Iterator[None]:
    yield
    unregister_fake()


def _judge(cost: float) -> FakeProvider:
    """A judge calling every pair the same entity; each call costs ``cost`` USD."""

    def answer(request: Any) -> dict[str, Any]:
        user = request.messages[-1].content
        pairs = [x for x in user.splitlines() if x[:1].isdigit() and " vs " in x]
        verdicts = [{"id": k, "same": True, "reason": "scripted"} for k in range(1, len(pairs) + 1)]
        return {"json": {"verdicts": verdicts}, "usage": {"cost_usd": cost}}

    return register_fake("costly", {"default": answer})


def _last_word(n: int) -> dict[str, Any]:
    return last_word_answers(LocalStore().get_items(DATASET)[:n])


def _runs(*names: str) -> None:
    register_fake("lwc", {"items": _last_word(3)})
    for name in names:
        done = runner.invoke(app, ["run", "--model", "fake:lwc", "--limit", "3", "--name", name])
        assert done.exit_code == 0, done.output


def _budget_lines(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if "stopped: budget" in x]


def _kept(name: str) -> dict[str, Any]:
    store = LocalStore()
    run = store.get_run(name, DATASET)
    assert run is not None
    (block,) = store.run_judged(run.id)
    return block


def test_score_stops_the_judge_at_its_ceiling_and_keeps_what_it_judged(
    fakes: None, tmp_path: Path
) -> None:
    gold, pred = last_word_files(tmp_path, LocalStore().get_items(DATASET)[:3])
    fake = _judge(cost=1.0)  # one call spends twice the ceiling
    done = runner.invoke(
        app,
        [
            "score",
            "--gold",
            str(gold),
            "--predictions",
            str(pred),
            "--format",
            "json",
            "--resamples",
            "0",
            "--judge",
            "fake:costly",
            "--max-cost",
            "0.5",
        ],
    )
    assert done.exit_code == 0, done.output
    assert len(fake.calls) == 1
    (line,) = _budget_lines(done.stderr)
    assert "--max-cost 0.5" in line and "judge budget of $" in line
    assert "after 1 judge calls" in line
    judged = json.loads(done.stdout)["judged"]
    stats = judged["stats"]
    assert stats["calls"] == 1 and stats["budget_refused"] > 0
    assert stats["errors"] >= stats["budget_refused"]
    assert judged["matches"]["entities"] > 0  # the first call's verdicts count


def test_compare_shares_one_ceiling_between_both_runs_judges(fakes: None) -> None:
    _runs("ca", "cb")
    fake = _judge(cost=1.0)
    done = runner.invoke(
        app,
        ["compare", "ca", "cb", "--judge", "fake:costly", "--max-cost", "0.5", "--format", "json"],
    )
    assert done.exit_code == 0, done.output
    assert len(fake.calls) == 1  # B's judge had nothing left
    (line,) = _budget_lines(done.stderr)
    assert "--max-cost 0.5" in line
    judged = json.loads(done.stdout)["judged"]
    assert judged["ca"]["stats"]["calls"] == 1 and judged["cb"]["stats"]["calls"] == 0
    assert all(judged[n]["stats"]["budget_refused"] > 0 for n in ("ca", "cb"))
    assert judged["ca"]["matches"]["entities"] > 0
    cb = judged["cb"]  # its judge had A's verdicts in the cache (same outputs), nothing else
    assert cb["stats"]["pairs"] == cb["stats"]["cache_hits"] + cb["stats"]["budget_refused"]
    assert cb["matches"]["entities"] <= cb["stats"]["cache_hits"]  # refused: never matches
    assert _kept("ca")["stats"]["calls"] == 1  # kept with each run


def test_report_stops_the_judge_at_its_ceiling(fakes: None, tmp_path: Path) -> None:
    _runs("ra", "rb")
    fake = _judge(cost=1.0)
    out = tmp_path / "r.html"
    done = runner.invoke(
        app,
        ["report", "ra", "rb", "--out", str(out), "--judge", "fake:costly", "--max-cost", "0.5"],
    )
    assert done.exit_code == 0, done.output
    assert len(fake.calls) == 1
    assert len(_budget_lines(done.stderr)) == 1
    assert out.exists() and "Judged metrics" in out.read_text(encoding="utf-8")
    assert _kept("ra")["stats"]["budget_refused"] > 0
    assert _kept("rb")["stats"]["budget_refused"] > 0


def test_a_ceiling_high_enough_judges_everything_and_says_nothing(fakes: None) -> None:
    _runs("ha", "hb")
    fake = _judge(cost=0.01)
    done = runner.invoke(
        app,
        ["compare", "ha", "hb", "--judge", "fake:costly", "--max-cost", "5", "--format", "json"],
    )
    assert done.exit_code == 0, done.output
    assert _budget_lines(done.stderr) == []
    judged = json.loads(done.stdout)["judged"]
    assert all(judged[n]["stats"]["budget_refused"] == 0 for n in ("ha", "hb"))
    assert len(fake.calls) == judged["ha"]["stats"]["calls"] + judged["hb"]["stats"]["calls"]


@pytest.mark.parametrize("command", [["score"], ["compare", "x", "y"], ["report", "x"]])
def test_max_cost_needs_a_judge(command: list[str]) -> None:
    done = runner.invoke(app, [*command, "--max-cost", "1"])
    assert done.exit_code == 2 and "--max-cost needs --judge MODEL" in done.stderr


def test_a_negative_ceiling_is_refused() -> None:
    done = runner.invoke(app, ["score", "--judge", "offline:rules", "--max-cost", "-1"])
    assert done.exit_code == 2 and "--max-cost must be >= 0" in done.stderr
