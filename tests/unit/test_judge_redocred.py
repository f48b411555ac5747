"""Re-DocRED with the mention lists removed from gold and every entity named by another of its
mentions in the predictions: string matching misses the renamed ones, ``offline:rules``
credits many of them back, and the string figures stay byte-identical to a run without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from extraction_eval.analysis.score_files import score_files
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.judge.rules import RulesJudge


def renamed(source: Path, tmp: Path) -> tuple[Path, Path, int]:
    """(gold without mentions, predictions naming each entity by another mention, renamed)."""
    gold_lines: list[str] = []
    pred_lines: list[str] = []
    changed = 0
    for line in source.read_text(encoding="utf-8").splitlines():
        doc: dict[str, Any] = json.loads(line)
        names = []
        for e in doc["entities"]:
            forms = [m["name"] for m in e.get("mentions", [])]
            other = [f for f in forms if f.casefold() != e["name"].casefold()]
            names.append(other[0] if other else e["name"])
            changed += bool(other)
            e.pop("mentions", None)
        rels = [
            {"source": names[r["head"]], "type": r["type"], "target": names[r["tail"]]}
            for r in doc["relationships"]
        ]
        ents = [{"name": n, "type": e["type"]} for n, e in zip(names, doc["entities"], strict=True)]
        gold_lines.append(json.dumps(doc))
        pred_lines.append(json.dumps({"id": doc["id"], "entities": ents, "relationships": rels}))
    gold, pred = tmp / "gold.jsonl", tmp / "pred.jsonl"
    gold.write_text("\n".join(gold_lines) + "\n", encoding="utf-8")
    pred.write_text("\n".join(pred_lines) + "\n", encoding="utf-8")
    return gold, pred, changed


def test_rules_raise_entity_f1_and_leave_string_figures(shared_data: Path, tmp_path: Path) -> None:
    gold, pred, changed = renamed(shared_data / "redocred_dev_first100.jsonl", tmp_path)
    assert changed > 100
    config = ScoringConfig(resamples=200, seed=7)
    plain = score_files(gold, pred, config).report
    with_judge = score_files(gold, pred, config, judge=RulesJudge()).report
    judged = with_judge.pop("judged")
    assert json.dumps(with_judge, sort_keys=True) == json.dumps(plain, sort_keys=True)
    assert plain["entities"]["f1"] < 1.0
    assert judged["entities"]["f1"] > plain["entities"]["f1"]
    assert judged["entities_typed"]["f1"] > plain["entities_typed"]["f1"]
    assert judged["relationships"]["f1"] > plain["relationships"]["f1"]
    assert judged["matches"]["entities"] > 0 and judged["stats"]["calls"] == 0
    # a judged match never exceeds what string matching missed
    assert judged["entities"]["tp"] <= plain["entities"]["tp"] + plain["entities"]["fn"]


def test_the_cli_credits_only_the_renamed_entity_and_prints_identical_string_figures(
    shared_data: Path, tmp_path: Path
) -> None:
    """``score --judge offline:rules`` through the CLI: its string figures byte for byte those
    of ``score`` without a judge, and every judged entity match pairs a prediction with the
    very gold entity it renamed (predictions keep gold's order), never another one."""
    from typer.testing import CliRunner

    from extraction_eval.cli import app

    gold, pred, _ = renamed(shared_data / "redocred_dev_first100.jsonl", tmp_path)
    per_item = tmp_path / "items.jsonl"
    args = ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"]
    plain = CliRunner().invoke(app, args)
    judged = CliRunner().invoke(
        app, [*args, "--judge", "offline:rules", "--per-item", str(per_item)]
    )
    assert plain.exit_code == 0 and judged.exit_code == 0, judged.output
    report = json.loads(judged.stdout)
    block = report.pop("judged")
    assert json.dumps(report, indent=2, ensure_ascii=False) + "\n" == plain.stdout
    assert block["entities"]["f1"] > report["entities"]["f1"]
    lines = [json.loads(x) for x in per_item.read_text(encoding="utf-8").splitlines()]
    matches = [m for x in lines for m in x["judged"]["matches"] if m["kind"] == "entities"]
    assert len(matches) == block["matches"]["entities"] > 0
    wrong = [(m["pred_name"], m["gold_name"]) for m in matches if m["pred"] != m["gold"]]
    assert wrong == []


def test_the_shortlist_keeps_a_model_judge_within_two_calls_per_item(
    shared_data: Path, tmp_path: Path
) -> None:
    """The issue's cost target, measured on the model path (the scripted fake, verdict cache
    off, so every call counts): at most 2 judge calls per item on average on Re-DocRED."""
    from extraction_eval.analysis.judged import SHORTLIST_K
    from extraction_eval.judge.model import ModelJudge
    from extraction_eval.llm.fake import FakeProvider
    from extraction_eval.llm.retry import RetryPolicy

    def never_same(request: Any) -> dict[str, Any]:
        lines = [x for x in request.messages[-1].content.splitlines() if " vs " in x]
        verdicts = [{"id": i, "same": False, "reason": "no"} for i in range(1, len(lines) + 1)]
        return {"json": {"verdicts": verdicts}}

    gold, pred, _ = renamed(shared_data / "redocred_dev_first100.jsonl", tmp_path)
    fake = FakeProvider.from_script({"default": never_same}, model="bench")
    judge = ModelJudge("fake:bench", provider=fake, retry=RetryPolicy.immediate(max_attempts=1))
    scored = score_files(gold, pred, ScoringConfig(resamples=0), judge=judge)
    items = len(scored.judged or [])
    stats = scored.report["judged"]["stats"]
    assert items > 0 and stats["errors"] == 0 and stats["calls"] == len(fake.calls) > 0
    assert stats["calls"] / items <= 2
    r = scored.report  # K per unmatched prediction of each figure; a fact asks both ends
    bound = SHORTLIST_K * (r["entities"]["fp"] + r["entities_typed"]["fp"])
    bound += SHORTLIST_K * 2 * r["relationships"]["fp"]
    assert stats["pairs"] <= bound
