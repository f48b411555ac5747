"""``judge pairs`` and ``judge calibrate``: pairs from mention clusters, κ that the per-pair
file reproduces, the calibration kept with the judge's identity, and bad pairs files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.commands.judge import judge_app
from extraction_eval.datasets.pairs import read_pairs
from extraction_eval.evaluators.stats.gold_agreement import cohen_kappa, kappa_interval
from extraction_eval.judge.calibrate import summarise
from extraction_eval.judge.rules import RULES_MODEL, RulesJudge

runner = CliRunner()

GOLD = [
    {
        "id": "d1",
        "text": "International Business Machines (IBM) and Microsoft met in Lyon, not Paris.",
        "entities": [
            {
                "name": "International Business Machines",
                "type": "ORG",
                "mentions": [{"name": "International Business Machines"}, {"name": "IBM"}],
            },
            {"name": "Microsoft", "type": "ORG"},
            {"name": "Lyon", "type": "LOC"},
            {"name": "Paris", "type": "LOC"},
        ],
    },
    {
        "id": "d2",
        "text": "Barack Obama spoke. Obama left. Michelle Obama stayed.",
        "entities": [
            {"name": "Barack Obama", "type": "PER", "aliases": ["Obama"]},
            {"name": "Michelle Obama", "type": "PER"},
        ],
    },
]


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return path


def test_kappa_by_hand() -> None:
    # p_o = 0.7, p_e = (25*30 + 25*20) / 50**2 = 0.5
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4)
    assert cohen_kappa(10, 0, 0, 0) is None  # both always say yes: chance agreement is 1
    assert cohen_kappa(0, 0, 0, 0) is None
    low, high = kappa_interval([0] * 20 + [1] * 5 + [2] * 10 + [3] * 15, resamples=500, seed=1)
    assert low < 0.4 < high


def test_pairs_from_mention_clusters(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.jsonl", GOLD)
    out = tmp_path / "pairs.jsonl"
    result = runner.invoke(judge_app, ["pairs", "--gold", str(gold), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    positives = {(r["a"], r["b"]) for r in rows if r["same"]}
    assert positives == {("International Business Machines", "IBM"), ("Barack Obama", "Obama")}
    negatives = [(r["a"], r["b"], r["type"]) for r in rows if not r["same"]]
    # same type, one document, most similar first; never across types
    assert ("Barack Obama", "Michelle Obama", "PER") in negatives
    assert all(t in ("ORG", "LOC", "PER") for _, _, t in negatives)
    assert not any({a, b} == {"Microsoft", "Lyon"} for a, b, _ in negatives)
    assert all(r["context"] for r in rows)


def test_gold_without_mentions_is_one_line(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.jsonl", [{**GOLD[0], "entities": GOLD[0]["entities"][1:]}])
    result = runner.invoke(
        judge_app, ["pairs", "--gold", str(gold), "--out", str(tmp_path / "p.jsonl")]
    )
    assert result.exit_code == 2
    assert "no entity has two different surface forms" in result.output


def test_calibrate_kappa_is_recomputed_from_its_own_per_pair_file(tmp_path: Path) -> None:
    pairs = _write(
        tmp_path / "pairs.jsonl",
        [
            {"a": "IBM", "b": "International Business Machines", "type": "ORG", "same": True},
            {"a": "Obama", "b": "Barack Obama", "type": "PER", "same": True},
            {"a": "Lyon", "b": "Paris", "type": "LOC", "same": False},
            {"a": "Microsoft", "b": "IBM", "type": "ORG", "same": False},
            {"a": "Mola", "b": "Mola di Bari", "type": "LOC", "same": True},  # rules: no
            {"a": "Bergman", "b": "Torbern Bergman", "type": "PER", "same": False},  # rules: yes
            {"a": "U.S.", "b": "United States", "same": True},
        ],
    )
    per_pair = tmp_path / "verdicts.jsonl"
    result = runner.invoke(
        judge_app,
        [
            "calibrate",
            "--judge",
            RULES_MODEL,
            "--pairs",
            str(pairs),
            "--per-pair",
            str(per_pair),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["tp"], report["fp"], report["fn"], report["tn"]) == (3, 1, 1, 2)
    rows = [json.loads(x) for x in per_pair.read_text(encoding="utf-8").splitlines()]
    assert all(isinstance(r["verdict"], bool) and r["reason"] for r in rows)
    again = summarise(
        report["judge"],
        [r["same"] for r in rows],
        [r["verdict"] for r in rows],
        resamples=report["resamples"],
        seed=report["seed"],
    )
    assert again.kappa == report["kappa"]
    assert [again.ci[0], again.ci[1]] == [report["kappa_ci"]["low"], report["kappa_ci"]["high"]]
    assert report["backing"].startswith(f"judge κ {report['kappa']:.2f} [")
    # kept with the judge's identity, for judged figures to name
    with LocalStore(seed=False) as store:
        stored = store.latest_judge_calibration(RulesJudge().identity)
    assert stored is not None and stored["kappa"] == report["kappa"]


def test_bad_pairs_lines_are_one_line_each_and_the_rest_is_used(tmp_path: Path) -> None:
    good = {"a": "IBM", "b": "International Business Machines", "same": True}
    pairs = _write(
        tmp_path / "bad.jsonl",
        [
            good,
            {"a": "Lyon", "b": "Paris"},  # no label
            {"a": "Lyon", "b": "Paris", "same": "no"},  # not a boolean
            {"a": "", "b": "Paris", "same": False},
            {"a": "x", "b": "y", "same": False, "context": "z" * 10_000_001},
            {"a": "Ob\x1b[31mama", "b": "Barack Obama", "same": True},  # kept, cleaned
            "{not json",
            {"a": "Paris", "b": "Lyon", "same": False},
        ],
    )
    got, warnings = read_pairs(pairs)
    assert [(p.a, p.same) for p in got] == [
        ("IBM", True),
        ("Ob [31mama", True),
        ("Paris", False),
    ]
    assert len(warnings) == 6 and all("\n" not in w for w in warnings)
    assert all(w.startswith("bad.jsonl:") for w in warnings)
    assert any("label" in w and ":2" in w for w in warnings)
    assert any("10,000,001 characters" in w for w in warnings)
    assert any("control characters" in w for w in warnings)
    result = runner.invoke(judge_app, ["calibrate", "--judge", RULES_MODEL, "--pairs", str(pairs)])
    assert result.exit_code == 0, result.output
    assert "judge κ" in result.stdout


def test_a_pairs_file_with_no_usable_line_is_refused(tmp_path: Path) -> None:
    pairs = _write(tmp_path / "none.jsonl", [{"a": "x", "b": "y"}])
    result = runner.invoke(judge_app, ["calibrate", "--judge", RULES_MODEL, "--pairs", str(pairs)])
    assert result.exit_code == 2
    assert "no usable labelled pair" in result.output


def test_failed_pairs_are_null_verdicts_left_out_of_kappa(tmp_path: Path) -> None:
    """A model judge through the fake: the pairs of one context fail (HTTP 500), the rest get
    scripted verdicts; failures are ``verdict: null``, counted, and κ from the rows is κ."""
    from extraction_eval.datasets.pairs import LabelledPair
    from extraction_eval.judge.calibrate import calibrate
    from extraction_eval.judge.model import ModelJudge
    from extraction_eval.llm.fake import FakeProvider
    from extraction_eval.llm.retry import RetryPolicy

    def answer(request: Any) -> dict[str, Any]:
        lines = [x for x in request.messages[-1].content.splitlines() if " vs " in x]
        verdicts = [
            {"id": i, "same": "Paris" not in x, "reason": "scripted"}
            for i, x in enumerate(lines, start=1)
        ]
        return {"json": {"verdicts": verdicts}}

    script = {"rules": [{"contains": "BROKEN", "responses": [{"error": 500}]}], "default": answer}
    fake = FakeProvider.from_script(script, model="cal")
    judge = ModelJudge("fake:cal", provider=fake, retry=RetryPolicy.immediate(max_attempts=1))
    rows_in = [
        ("IBM", "International Business Machines", True, "ctx one"),
        ("Lyon", "Paris", False, "ctx one"),
        ("Obama", "Michelle Obama", False, "ctx one"),  # the fake says same: a false positive
        ("U.S.", "United States", True, "BROKEN ctx"),
        ("Mola", "Mola di Bari", True, "BROKEN ctx"),
    ]
    pairs = [
        LabelledPair(a, b, same, None, ctx, n, {"a": a, "b": b, "same": same, "context": ctx})
        for n, (a, b, same, ctx) in enumerate(rows_in, start=1)
    ]
    result, rows = calibrate(judge, pairs, resamples=200, seed=3)
    assert (result.tp, result.fp, result.fn, result.tn, result.errors) == (1, 1, 0, 1, 2)
    assert [r["verdict"] for r in rows] == [True, False, True, None, None]
    assert all("judge call failed" in r["error"] for r in rows[3:])
    again = summarise(
        result.judge,
        [r["same"] for r in rows],
        [r["verdict"] for r in rows],
        resamples=200,
        seed=3,
    )
    assert again.kappa == result.kappa and again.ci == result.ci
    assert len(fake.calls) == 2  # one call per context
