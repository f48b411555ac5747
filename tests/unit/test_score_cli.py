"""`extraction-eval score` end to end on the bundled example (every number by hand), and the
JSONL edge: line-numbered warnings, missing / unknown ids, unusable input -> exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.analysis.score_files import score_files
from extraction_eval.commands.score import score
from extraction_eval.datasets.bundled import example_paths
from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.datasets.predictions import read_predictions
from extraction_eval.evaluators import ScoringConfig

app = typer.Typer()
app.command("score")(score)


@app.callback()
def _group() -> None:
    """A group, like the real CLI, so the command is invoked as `score`."""


runner = CliRunner()
GOLD, PRED = example_paths()


def run(*args: str) -> Any:
    return runner.invoke(app, ["score", *args])


def run_json(*args: str) -> dict[str, Any]:
    result = run("--gold", str(GOLD), "--predictions", str(PRED), "--format", "json", *args)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- the bundled example, computed by hand ---------------------------------------------------
#
# ex-employment  entities 4 gold / 4 pred: Acme Corp exact, "jane doe" (casefold -> 1.0),
#                "Springfeld" fuzzy (10/11); "plant" truncated; "Springfield plant" missed.
#                relationships 3/3: employed_by = inverse, located_in -> Springfeld = fuzzy,
#                "Springfield plnt" managed_by = inverse-fuzzy. Evidence: 3 quotes, 3 grounded
#                (one elided with "…").
# ex-family      entities 4/4 by name, Pierre Curie ORG vs PERSON = wrong_type (typed 3).
#                relationships: married_to swapped = exact (symmetric), worked_in exact,
#                born_in swapped = reversed (+ gold missed). Warsaw evidence grounded (relaxed).
# ex-review      3/3 entities, attributes polarity 2/3, intensity 1/3; Shipping's quote is not
#                in the text = ungrounded. Evidence 3 quotes, 2 grounded. No relationships.
# ex-empty       gold empty, 1 prediction = hallucinated_on_empty (zero-FP fails).
# ex-empty-ok    gold empty, prediction empty (zero-FP passes; every ratio 1.0).
# ex-missing     no prediction line: 2 entities + 1 relationship missed.
# ex-errors      entities 4 gold / 6 pred, 2 matched; "Austin to Dallas" merged; Hank Scorpio
#                context_bleed (text of ex-missing); Lumbergh ungrounded; Peter spurious;
#                relationships 2/3, none matched: based_in wrong_relation_type, Bill Lumbergh
#                hallucinated_argument, lived_in spurious; 2 gold missed.
# Totals: entities tp 12 fp 6 fn 5; typed 11/7/6; type_correct 11; relationships 5/4/4.


def test_example_report_by_hand() -> None:
    r = run_json("--resamples", "200")
    assert r["items"] == 7
    assert r["no_prediction"] == {"count": 1, "ids": ["ex-missing"]}
    assert r["entities"] == {
        "tp": 12,
        "fp": 6,
        "fn": 5,
        "precision": 12 / 18,
        "recall": 12 / 17,
        "f1": 24 / 35,
        "type_correct": 11,
    }
    assert r["entities_typed"] == {
        "tp": 11,
        "fp": 7,
        "fn": 6,
        "precision": 11 / 18,
        "recall": 11 / 17,
        "f1": 22 / 35,
    }
    assert r["type_accuracy"] == 11 / 12
    assert r["relationships"] == {
        "tp": 5,
        "fp": 4,
        "fn": 4,
        "precision": 5 / 9,
        "recall": 5 / 9,
        "f1": 10 / 18,
    }
    assert r["relationship_accuracy"] == 5 / 9
    assert r["match_types"] == {"exact": 2, "inverse": 1, "fuzzy": 1, "inverse-fuzzy": 1}
    # Only "Springfeld" is below 1.0; "jane doe" is equal once casefolded.
    assert r["entity_match_types"] == {"exact": 11, "fuzzy": 1}
    assert r["taxonomy"] == {
        "missed": 9,
        "spurious": 2,
        "wrong_type": 1,
        "truncated": 1,
        "merged": 1,
        "hallucinated_on_empty": 1,
        "ungrounded": 2,
        "context_bleed": 1,
        "reversed": 1,
        "wrong_relation_type": 1,
        "hallucinated_argument": 1,
    }
    assert r["evidence"] == {
        "mode": "relaxed",
        "predicted": 27,
        "with_evidence": 7,
        "grounded": 6,
        "evidence_coverage_rate": 6 / 27,
        "entities": {"predicted": 18, "with_evidence": 5, "grounded": 4, "coverage_rate": 4 / 18},
        "relationships": {
            "predicted": 9,
            "with_evidence": 2,
            "grounded": 2,
            "coverage_rate": 2 / 9,
        },
    }
    assert r["negative_space"] == {
        "gold_empty_items": 2,
        "errored": 0,
        "scored": 2,
        "zero_fp_pass_count": 1,
        "zero_fp_pass_rate": 0.5,
        "hallucination_count": 1,
        "hallucination_rate": 0.5,
    }
    assert r["attributes"]["entities"] == {
        "intensity": {"agree": 1, "total": 3, "accuracy": 1 / 3},
        "polarity": {"agree": 2, "total": 3, "accuracy": 2 / 3},
    }
    assert r["attributes"]["relationships"] == {}
    # pooled per key (the attr.<key> values); every attribute sits in one item, so every
    # resample holds 0 or k copies of it and the CI collapses onto the value
    assert r["attributes"]["keys"] == {
        "intensity": {
            "agree": 1,
            "total": 3,
            "accuracy": 1 / 3,
            "ci": {"low": 1 / 3, "high": 1 / 3},
        },
        "polarity": {
            "agree": 2,
            "total": 3,
            "accuracy": 2 / 3,
            "ci": {"low": 2 / 3, "high": 2 / 3},
        },
    }
    # no schema declares attributes in the example: nothing is checked
    assert r["attributes"]["violations"] == {
        "declared": False,
        "checked": 0,
        "objects": 0,
        "count": 0,
        "attribute_violation_rate": None,
        "items": [],
    }
    assert r["per_type"]["entities"]["LOC"] == {
        "tp": 3,  # Springfeld, Warsaw, Paris (Austin, Dallas missed; merged pred is fp)
        "fp": 1,
        "fn": 2,
        "precision": 3 / 4,
        "recall": 3 / 5,
        "f1": 6 / 9,
    }
    # tp goes to the gold type (employs, matched by an employed_by prediction); fp to the
    # prediction's type (the unmatched employed_by -> Bill Lumbergh).
    assert r["per_type"]["relationships"]["employs"]["tp"] == 1
    assert r["per_type"]["relationships"]["employed_by"] == {
        "tp": 0,
        "fp": 1,
        "fn": 1,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }
    assert r["warnings"] == [
        "1 prediction id(s) not in gold, ignored: ex-unknown",
        "1 item(s) had no prediction (errored) and were scored as failures: ex-missing",
        "only 7 items: the bootstrap confidence intervals are approximate below 50 (they tend"
        " to be too narrow)",
    ]
    # macro = mean over the 7 items of the per-item entity F1:
    # employment 6/8, family 1, review 1, empty 0, empty-ok 1, missing 0, errors 4/10.
    assert r["macro"]["entity_f1"] == pytest.approx((6 / 8 + 1 + 1 + 0 + 1 + 0 + 4 / 10) / 7)
    assert r["config"]["match"] == "fuzzy" and r["config"]["threshold"] == 0.85


def test_example_span_and_strict_modes() -> None:
    strict = run_json("--evidence", "strict", "--resamples", "0")
    # "born in warsaw" is found only when case is ignored.
    assert strict["evidence"]["grounded"] == 5
    assert strict["taxonomy"]["ungrounded"] == 3
    span = run_json("--match", "span", "--resamples", "0")
    # ex-review: evidence Jaccard 0.8, 1.0 and 0.5 (>= 0.5) -> still 3 pairs; with 0.6 only 2.
    assert span["per_type"]["entities"]["ASPECT"]["tp"] == 3
    tighter = run_json("--match", "span", "--span-threshold", "0.6", "--resamples", "0")
    assert tighter["per_type"]["entities"]["ASPECT"]["tp"] == 2
    exact = run_json("--match", "exact", "--resamples", "0")
    # "jane doe", "Springfeld" and "Shipping" no longer match: 12 - 3.
    assert exact["entities"]["tp"] == 9
    assert exact["match_types"] == {"exact": 2, "inverse": 1, "fuzzy": 0, "inverse-fuzzy": 0}


def test_table_output_and_bundled_default() -> None:
    result = run("--resamples", "100")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "7 items (1 without prediction)" in out
    for text in (
        "entities",
        "relationships",
        "0.686",
        "0.556",
        "inverse-fuzzy 1",
        "context_bleed 1",
    ):
        assert text in out
    assert "bundled example" in result.stderr
    flat = " ".join(out.split())
    assert "CIs: expanded percentile bootstrap (Hesterberg 2015) over items, 100 resamples" in flat
    plain = run("--resamples", "100", "--ci", "percentile")
    assert "CIs: percentile bootstrap over items" in " ".join(plain.stdout.split())
    bad = run("--ci", "bca")
    assert bad.exit_code == 2 and "--ci must be one of expanded, percentile" in bad.stderr


def test_json_is_byte_stable_and_out_file_matches(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    args = [
        "--gold",
        str(GOLD),
        "--predictions",
        str(PRED),
        "--format",
        "json",
        "--resamples",
        "300",
    ]
    first = run(*args, "--out", str(out))
    second = run(*args)
    assert first.exit_code == second.exit_code == 0
    assert first.stdout == second.stdout
    assert out.read_text(encoding="utf-8") == first.stdout
    report = json.loads(first.stdout)
    assert json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n" == first.stdout
    ci = report["ci"]["entity_f1"]
    assert 0.0 <= ci["low"] <= report["entities"]["f1"] <= ci["high"] <= 1.0


def test_per_item_lines(tmp_path: Path) -> None:
    per_item = tmp_path / "items.jsonl"
    result = run(
        "--gold",
        str(GOLD),
        "--predictions",
        str(PRED),
        "--per-item",
        str(per_item),
        "--resamples",
        "0",
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in per_item.read_text(encoding="utf-8").splitlines()]
    assert [x["id"] for x in lines] == [
        "ex-employment",
        "ex-family",
        "ex-review",
        "ex-empty",
        "ex-empty-ok",
        "ex-missing",
        "ex-errors",
    ]
    emp = lines[0]
    assert emp["entities"]["tp"] == 3 and emp["relationships"]["tp"] == 3
    assert emp["match_types"] == {"exact": 0, "inverse": 1, "fuzzy": 1, "inverse-fuzzy": 1}
    assert emp["pairs"]["relationships"][2] == {
        "pred": 2,
        "gold": 2,
        "match_type": "inverse-fuzzy",
        "similarity": pytest.approx((16 / 17 + 1.0) / 2),
    }
    # The elided quote "Jane Doe manages … Springfield plant" is found in two parts.
    assert emp["evidence"]["objects"][2] == {
        "kind": "relationship",
        "index": 2,
        "grounded": True,
        "spans": [[43, 59], [64, 81]],
    }
    family = lines[1]
    assert family["taxonomy_counts"]["wrong_type"] == 1
    assert family["taxonomy_counts"]["reversed"] == 1
    assert lines[3]["negative_space"] == {"zero_fp_pass": False, "hallucination_count": 1}
    assert lines[4]["negative_space"] == {"zero_fp_pass": True, "hallucination_count": 0}
    assert lines[4]["entities"]["f1"] == 1.0 and lines[4]["relationships"]["f1"] == 1.0
    assert lines[5]["failed"] is True and lines[5]["entities"]["fn"] == 2
    bleed = [t for t in lines[6]["taxonomy"] if t["category"] == "context_bleed"]
    assert bleed == [
        {
            "category": "context_bleed",
            "kind": "entity",
            "side": "pred",
            "index": 3,
            "label": "Hank Scorpio",
            "source_id": "ex-missing",
        }
    ]


# ---- the JSONL edge ------------------------------------------------------------------------


def test_malformed_lines_are_warnings_with_line_and_id(tmp_path: Path) -> None:
    gold = write(
        tmp_path / "gold.jsonl",
        [
            '{"id": "a", "text": "Ann met Bob.", "entities": [{"name": "Ann", "type": "PER"}]}',
            '{"id": "b", "text": "broken", "entities": [',
            "",
            '{"id": "c", "entities": []}',
            '{"id": "d", "text": "x", "entities": [{"name": "x"}]}',
            '{"id": "a", "text": "again", "entities": []}',
            "[1, 2]",
        ],
    )
    pred = write(
        tmp_path / "pred.jsonl",
        [
            '{"id": "a", "entities": [{"name": "Ann", "type": "PER"}]}',
            '{"id": "zzz", "entities": []}',
            "{not json",
        ],
    )
    result = runner.invoke(
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
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["items"] == 1
    assert report["entities"]["f1"] == 1.0
    warnings = report["warnings"]
    assert warnings[0].startswith("gold.jsonl:2 (id b): invalid JSON")
    assert warnings[1] == 'gold.jsonl:4 (id c): missing or non-string "text"; skipped'
    assert warnings[2] == "gold.jsonl:5 (id d): entities.0.type: Field required; skipped"
    assert warnings[3] == "gold.jsonl:6 (id a): duplicate id, first seen on line 1; skipped"
    assert warnings[4] == "gold.jsonl:7: expected a JSON object, got list; skipped"
    assert warnings[5].startswith("pred.jsonl:3: invalid JSON")
    assert warnings[6] == "1 prediction id(s) not in gold, ignored: zzz"
    assert len(warnings) == 7
    assert "warning: gold.jsonl:2 (id b)" in result.stderr


def test_edge_normalisation_of_evidence_lists_and_attributes(tmp_path: Path) -> None:
    gold = write(
        tmp_path / "gold.jsonl",
        [
            json.dumps(
                {
                    "id": 7,
                    "text": "First sentence. Second one.",
                    "entities": [
                        {
                            "name": "First",
                            "type": "X",
                            "attributes": {"n": 3, "ok": True, "gone": None},
                        }
                    ],
                    "relationships": [
                        {
                            "source": "First",
                            "type": "r",
                            "target": "Second",
                            "evidence": [{"text": "First sentence."}, {"text": "Second one."}],
                        }
                    ],
                }
            )
        ],
    )
    records, warnings = read_gold(gold)
    assert warnings == []
    (rec,) = records
    assert rec.id == "7"
    assert rec.extraction.entities[0].attributes == {"n": "3", "ok": "true"}
    assert rec.extraction.relationships[0].evidence == "First sentence. … Second one."
    scored = score_files(gold, gold, ScoringConfig(resamples=0))
    assert scored.report["evidence"]["grounded"] == 1  # each elided part found in order


def test_missing_prediction_lines_are_scored_as_empty(tmp_path: Path) -> None:
    gold = write(
        tmp_path / "g.jsonl",
        ['{"id": "a", "text": "Ann", "entities": [{"name": "Ann", "type": "P"}]}'],
    )
    empty = write(tmp_path / "p.jsonl", [])
    scored = score_files(gold, empty, ScoringConfig(resamples=0))
    assert scored.report["entities"]["recall"] == 0.0
    assert scored.report["no_prediction"] == {"count": 1, "ids": ["a"]}
    assert read_predictions(empty) == ({}, [], 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gold", "nope.jsonl", "--predictions", "nope.jsonl"], "nope.jsonl: file not found"),
        (["--gold", "GOLD"], "give both --gold and --predictions"),
        (["--match", "regex"], "--match must be one of exact, casefold, fuzzy, span, got 'regex'"),
        (["--evidence", "loose"], "--evidence must be one of strict, relaxed"),
        (["--format", "xml"], "--format must be one of table, json"),
        (["--threshold", "1.5"], "--threshold must be between 0 and 1, got 1.5"),
        (["--span-threshold", "-0.1"], "--span-threshold must be between 0 and 1"),
        (["--resamples", "-1"], "--resamples must be >= 0"),
    ],
)
def test_unusable_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    args = [str(GOLD) if a == "GOLD" else a for a in args]
    result = run(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_unusable_files_exit_2(tmp_path: Path) -> None:
    good = write(tmp_path / "good.jsonl", ['{"id": "a", "text": "Ann", "entities": []}'])
    cases = {
        "no usable gold items": (write(tmp_path / "bad.jsonl", ["{oops"]), good),
        "no usable prediction lines": (good, write(tmp_path / "badp.jsonl", ["{oops", "[]"])),
        "no prediction id matches a gold id": (
            good,
            write(tmp_path / "other.jsonl", ['{"id": "b"}']),
        ),
        "is a directory": (tmp_path, good),
    }
    for message, (gold, pred) in cases.items():
        result = run("--gold", str(gold), "--predictions", str(pred))
        assert result.exit_code == 2, message
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_unwritable_output_exits_2(tmp_path: Path) -> None:
    result = run("--out", str(tmp_path / "missing-dir" / "r.json"), "--resamples", "0")
    assert result.exit_code == 2
    assert "cannot write" in result.stderr


def test_interrupted_scoring_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while scoring ends like every command's (``commands.common.handle_errors``):
    one ``error:`` line, exit 130, no traceback."""

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("extraction_eval.analysis.score_files.score_files", interrupted)
    result = run("--gold", str(GOLD), "--predictions", str(PRED), "--resamples", "0")
    assert result.exit_code == 130, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: interrupted"), lines
