"""``score --judge``: judged figures beside string figures that stay byte-identical, judged
matches with their reasons, the verdict cache, a failing judge, and the calibration line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.commands.judge import judge_app
from extraction_eval.commands.score import score
from extraction_eval.llm.fake import FakeProvider, register_fake, unregister_fake

app = typer.Typer()
app.command("score")(score)


@app.callback()
def _group() -> None:
    """A group, like the real CLI."""


runner = CliRunner()

TEXT = "International Business Machines hired Barack Obama in Paris; IBM opened in Paris."
GOLD = {
    "id": "a",
    "text": TEXT,
    "entities": [
        {"name": "International Business Machines", "type": "ORG"},
        {"name": "Barack Obama", "type": "PER"},
        {"name": "Paris", "type": "LOC"},
    ],
    "relationships": [
        {"source": "Barack Obama", "type": "works_for", "target": "International Business Machines"}
    ],
}
PRED = {
    "id": "a",
    "entities": [
        {"name": "IBM", "type": "ORG"},
        {"name": "Obama", "type": "PER"},
        {"name": "Lyon", "type": "LOC"},
    ],
    "relationships": [{"source": "Obama", "type": "works_for", "target": "IBM"}],
}
FAILED = {"id": "b", "text": "Nothing here.", "entities": [{"name": "X", "type": "ORG"}]}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    gold = tmp_path / "gold.jsonl"
    pred = tmp_path / "pred.jsonl"
    gold.write_text(json.dumps(GOLD) + "\n" + json.dumps(FAILED) + "\n", encoding="utf-8")
    pred.write_text(json.dumps(PRED) + "\n", encoding="utf-8")
    return gold, pred


@pytest.fixture
def fake_judge() -> Iterator[None]:
    yield
    unregister_fake()


def _score(gold: Path, pred: Path, *extra: str) -> tuple[dict[str, Any], str]:
    result = runner.invoke(
        app,
        ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json", *extra],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stdout


def _without_judged(report: dict[str, Any]) -> str:
    rest = {k: v for k, v in report.items() if k != "judged"}
    return json.dumps(rest, sort_keys=True, indent=2, ensure_ascii=False)


def test_rules_judge_credits_ibm_not_lyon_and_leaves_string_figures(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    gold, pred = files
    plain, plain_text = _score(gold, pred)
    per_item = tmp_path / "items.jsonl"
    judged, _ = _score(gold, pred, "--judge", "offline:rules", "--per-item", str(per_item))
    assert _without_judged(judged) + "\n" == plain_text  # byte for byte
    j = judged["judged"]
    assert j["entities"]["tp"] == plain["entities"]["tp"] + 2  # IBM and Obama, not Lyon
    assert j["entities"]["f1"] > plain["entities"]["f1"]
    assert j["relationships"]["tp"] == plain["relationships"]["tp"] + 1
    assert j["matches"] == {"entities": 2, "entities_typed": 2, "relationships": 1}
    assert j["backing"] == "no calibration for this judge"
    assert j["stats"]["calls"] == 0 and j["stats"]["errors"] == 0
    line = json.loads(per_item.read_text(encoding="utf-8").splitlines()[0])
    names = {(m["pred_name"], m["gold_name"]) for m in line["judged"]["matches"]}
    assert ("IBM", "International Business Machines") in names
    assert not any("Lyon" in p for p, _ in names)
    assert all(m["reason"] and m["source"] == "rules" for m in line["judged"]["matches"])


def _verdicts(step: Any) -> dict[str, Any]:
    return {"default": step}


def test_model_judge_through_the_fake_and_its_cache(
    files: tuple[Path, Path], fake_judge: None
) -> None:
    gold, pred = files

    def answer(request: Any) -> dict[str, Any]:
        user = request.messages[-1].content
        pairs = [x for x in user.splitlines() if x[:1].isdigit() and " vs " in x]
        same = [("Lyon" not in p) for p in pairs]
        return {
            "json": {
                "verdicts": [
                    {"id": i, "same": s, "reason": "scripted"} for i, s in enumerate(same, start=1)
                ]
            }
        }

    fake: FakeProvider = register_fake("judge", {"default": answer})
    first, _ = _score(gold, pred, "--judge", "fake:judge")
    assert len(fake.calls) == 1  # one item with candidates, one call
    assert first["judged"]["stats"]["calls"] == 1
    assert first["judged"]["matches"]["entities"] == 2
    fake.reset()
    again, _ = _score(gold, pred, "--judge", "fake:judge")
    assert len(fake.calls) == 0
    assert again["judged"]["stats"]["calls"] == 0
    assert again["judged"]["stats"]["cache_hits"] == first["judged"]["stats"]["pairs"]
    assert again["judged"]["entities"] == first["judged"]["entities"]


@pytest.mark.parametrize(
    "step",
    [{"error": 500}, {"text": "They are the same."}, {"json": {"wrong": 1}}],
)
def test_a_failing_judge_leaves_the_string_figures_and_counts_its_errors(
    files: tuple[Path, Path], fake_judge: None, step: dict[str, Any]
) -> None:
    gold, pred = files
    plain, plain_text = _score(gold, pred)
    register_fake("broken", {"default": step})
    judged, _ = _score(gold, pred, "--judge", "fake:broken")
    assert _without_judged(judged) + "\n" == plain_text
    j = judged["judged"]
    assert j["stats"]["errors"] == j["stats"]["pairs"] > 0
    assert j["matches"] == {"entities": 0, "entities_typed": 0, "relationships": 0}
    assert j["entities"]["tp"] == plain["entities"]["tp"]


def test_the_stored_calibration_backs_the_judged_figures(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        json.dumps({"a": "IBM", "b": "International Business Machines", "same": True})
        + "\n"
        + json.dumps({"a": "Lyon", "b": "Paris", "same": False})
        + "\n",
        encoding="utf-8",
    )
    done = runner.invoke(
        judge_app, ["calibrate", "--judge", "offline:rules", "--pairs", str(pairs)]
    )
    assert done.exit_code == 0, done.output
    gold, pred = files
    judged, _ = _score(gold, pred, "--judge", "offline:rules")
    assert judged["judged"]["backing"] == "judge κ 1.00 [1.00, 1.00] on 2 pairs"
    assert judged["judged"]["calibration"]["tp"] == 1


def test_table_output_has_a_second_block(files: tuple[Path, Path]) -> None:
    gold, pred = files
    result = runner.invoke(
        app, ["score", "--gold", str(gold), "--predictions", str(pred), "--judge", "offline:rules"]
    )
    assert result.exit_code == 0, result.output
    assert "judged by offline:rules" in result.stdout
    assert "no calibration for this judge" in result.stdout


def test_bad_judge_options_are_one_line(files: tuple[Path, Path]) -> None:
    gold, pred = files
    for extra, problem in (
        (["--judge", "nosuch:model"], "unknown model provider"),
        (["--judge", "openai:"], "--judge 'openai:' names no model"),
        (["--judge-base-url", "http://127.0.0.1:9/v1"], "--judge-base-url needs --judge"),
        (
            ["--judge", "openai:x", "--judge-base-url", "http://u:pw@127.0.0.1:9/v1"],
            "--judge-base-url must not carry credentials",
        ),
    ):
        result = runner.invoke(
            app, ["score", "--gold", str(gold), "--predictions", str(pred), *extra]
        )
        assert result.exit_code == 2, result.output
        assert problem in result.output and "pw" not in result.output


def test_relationship_endpoints_are_judged_with_their_gold_type(tmp_path: Path) -> None:
    """'Paris' is not 'Paris, Texas' as an endpoint either: the type guard knows it is a
    place from the gold entity the relationship's tail points at."""
    gold = tmp_path / "g.jsonl"
    pred = tmp_path / "p.jsonl"
    gold.write_text(
        json.dumps(
            {
                "id": "t",
                "text": "Barack Obama visited Paris, Texas.",
                "entities": [
                    {"name": "Barack Obama", "type": "PER"},
                    {"name": "Paris, Texas", "type": "LOC"},
                ],
                "relationships": [
                    {"source": "Barack Obama", "type": "visited", "target": "Paris, Texas"},
                    {"source": "Barack Obama", "type": "born_in", "target": "Paris, Texas"},
                ],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    pred.write_text(
        json.dumps(
            {
                "id": "t",
                "relationships": [
                    {"source": "Obama", "type": "visited", "target": "Paris"},
                    {"source": "Obama", "type": "born_in", "target": "Paris, Texas"},
                ],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    judged, _ = _score(gold, pred, "--judge", "offline:rules")
    assert judged["judged"]["matches"]["relationships"] == 1  # born_in only


def test_a_person_overrules_the_judge(files: tuple[Path, Path], tmp_path: Path) -> None:
    gold, pred = files
    people = tmp_path / "people.jsonl"
    people.write_text(
        json.dumps({"a": "international business machines", "b": "IBM", "same": False})
        + "\n"
        + json.dumps({"a": "Lyon", "b": "Paris", "type": "LOC", "same": True, "reason": "renamed"})
        + "\n"
        + json.dumps({"a": "x", "b": "y"})
        + "\n",
        encoding="utf-8",
    )
    result = runner.invoke(
        app,
        [
            *("score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"),
            *("--judge", "offline:rules", "--judge-overrides", str(people)),
            *("--per-item", str(tmp_path / "items.jsonl")),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "people.jsonl:3" in result.stderr  # the bad line, one warning
    judged = json.loads(result.stdout)["judged"]
    assert judged["overruled"] >= 2
    line = json.loads((tmp_path / "items.jsonl").read_text(encoding="utf-8").splitlines()[0])
    matches = {(m["kind"], m["pred_name"]): m for m in line["judged"]["matches"]}
    assert ("entities", "IBM") not in matches
    assert matches[("entities", "Lyon")]["source"] == "person"
    assert matches[("entities", "Lyon")]["reason"] == "renamed"
    assert ("entities", "Obama") in matches  # the rest is still the judge's


def test_judging_from_inside_a_running_event_loop(files: tuple[Path, Path]) -> None:
    """A notebook calls ``score_files`` with its own loop running: judging still works."""
    import asyncio

    from extraction_eval.analysis.score_files import score_files
    from extraction_eval.evaluators import ScoringConfig
    from extraction_eval.judge.rules import RulesJudge

    gold, pred = files

    async def in_a_notebook() -> dict[str, Any]:
        return score_files(gold, pred, ScoringConfig(resamples=0), judge=RulesJudge()).report

    report = asyncio.run(in_a_notebook())
    assert report["judged"]["matches"]["entities"] == 2
