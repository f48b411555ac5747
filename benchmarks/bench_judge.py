"""What the judge costs per item: candidate pairs per item and judge calls per 1,000 items.
Figures are printed, never asserted.

    .venv/bin/python benchmarks/bench_judge.py

Corpora from ../shared/data (or $EXTRACTION_EVAL_SHARED_DATA): CoNLL04 test (288 documents)
and Re-DocRED dev (500 documents). Predictions are gold renamed the way a paraphrasing model
names things: Re-DocRED's entities by another of their mentions (gold keeps no mention list);
CoNLL04's (seeded) a third of the multi-word people by their surname, of the multi-word
organisations by their initials, a tenth of all entities dropped. Each set is scored with
``--judge offline:rules`` and with the scripted fake provider (one call settles up to 20
pairs of an item; the fake answers "not the same" to every pair), verdict cache off, so every
call is counted.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from extraction_eval.analysis.score_files import score_files
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.judge.base import Judge
from extraction_eval.judge.model import ModelJudge
from extraction_eval.judge.rules import RulesJudge
from extraction_eval.llm.fake import FakeProvider
from extraction_eval.llm.retry import RetryPolicy

ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    env = os.environ.get("EXTRACTION_EVAL_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def _conll_name(e: dict[str, Any], rng: random.Random) -> str | None:
    words = e["name"].split()
    roll = rng.random()
    if roll < 0.1:
        return None
    if len(words) > 1 and roll < 0.43:
        if e["type"] == "Peop":
            return words[-1]
        if e["type"] == "Org":
            return "".join(w[0] for w in words if w[:1].isupper()) or e["name"]
    return str(e["name"])


def _redocred_name(e: dict[str, Any], rng: random.Random) -> str | None:
    forms = [m["name"] for m in e.get("mentions", [])]
    other = [f for f in forms if f.casefold() != e["name"].casefold()]
    return other[0] if other else str(e["name"])


def prepared(source: Path, tmp: Path, rename: Any) -> tuple[Path, Path, int]:
    rng = random.Random(7)
    gold_lines, pred_lines = [], []
    for line in source.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        names = [rename(e, rng) for e in doc["entities"]]
        for e in doc["entities"]:
            e.pop("mentions", None)
        ents = [
            {"name": n, "type": e["type"]}
            for n, e in zip(names, doc["entities"], strict=True)
            if n is not None
        ]
        rels = [
            {"source": names[r["head"]], "type": r["type"], "target": names[r["tail"]]}
            for r in doc["relationships"]
            if names[r["head"]] is not None and names[r["tail"]] is not None
        ]
        gold_lines.append(json.dumps(doc))
        pred_lines.append(json.dumps({"id": doc["id"], "entities": ents, "relationships": rels}))
    gold, pred = tmp / f"{source.stem}.gold.jsonl", tmp / f"{source.stem}.pred.jsonl"
    gold.write_text("\n".join(gold_lines) + "\n", encoding="utf-8")
    pred.write_text("\n".join(pred_lines) + "\n", encoding="utf-8")
    return gold, pred, len(gold_lines)


def _never_same(request: Any) -> dict[str, Any]:
    user = request.messages[-1].content
    n = sum(1 for x in user.splitlines() if x[:1].isdigit() and " vs " in x)
    return {
        "json": {"verdicts": [{"id": i, "same": False, "reason": "no"} for i in range(1, n + 1)]}
    }


def judges() -> list[tuple[str, Judge]]:
    fake = FakeProvider.from_script({"default": _never_same}, model="bench")
    model = ModelJudge("fake:bench", provider=fake, retry=RetryPolicy.immediate(max_attempts=1))
    return [("offline:rules", RulesJudge()), ("fake (model path)", model)]


def main() -> None:
    data = data_dir()
    corpora = [
        ("CoNLL04 test", data / "conll04_test.jsonl", _conll_name),
        ("Re-DocRED dev", data / "redocred_dev.jsonl", _redocred_name),
    ]
    config = ScoringConfig(resamples=0)
    print(
        f"{'corpus':<14} {'judge':<18} {'items':>6} {'cand/item':>9} {'calls/1k':>9}"
        f" {'ent F1 str':>10} {'judged':>7} {'s/item':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for label, path, rename in corpora:
            if not path.exists():
                print(f"{label}: {path} not found, skipped")
                continue
            gold, pred, n = prepared(path, tmp, rename)
            for name, judge in judges():
                started = time.perf_counter()
                report = score_files(gold, pred, config, judge=judge).report
                took = time.perf_counter() - started
                j = report["judged"]
                calls = j["stats"]["calls"] * 1000 / n
                print(
                    f"{label:<14} {name:<18} {n:>6} {j['candidates']['per_item']:>9.2f}"
                    f" {calls:>9.0f} {report['entities']['f1']:>10.3f}"
                    f" {j['entities']['f1']:>7.3f} {took / n:>8.4f}"
                )


if __name__ == "__main__":
    main()
