"""``--aliases FILE`` and ``--no-aliases`` through the CLI: score, run-experiment, --resume."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app

runner = CliRunner()

GOLD = [
    {
        "id": "a",
        "text": "IBM hired Ann.",
        "entities": [
            {"name": "International Business Machines", "type": "ORG"},
            {"name": "Ann Lee", "type": "PER", "mentions": [{"name": "Ann"}]},
        ],
        "relationships": [
            {"source": "Ann Lee", "type": "works_for", "target": "International Business Machines"}
        ],
    },
    {"id": "b", "text": "Nothing.", "entities": [], "relationships": []},
]
PRED = [
    {
        "id": "a",
        "entities": [{"name": "IBM", "type": "ORG"}, {"name": "Ann", "type": "PER"}],
        "relationships": [{"source": "Ann", "type": "works_for", "target": "IBM"}],
    },
    {"id": "b", "entities": [], "relationships": []},
]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(tmp_path: Path, *extra: str) -> tuple[int, dict[str, object] | None, str]:
    gold = _write(tmp_path / "gold.jsonl", GOLD)
    pred = _write(tmp_path / "pred.jsonl", PRED)
    result = runner.invoke(
        app,
        ["score", "--gold", str(gold), "--predictions", str(pred), "--format", "json", *extra],
    )
    report = json.loads(result.stdout) if result.exit_code == 0 else None
    return result.exit_code, report, result.stderr


def _f1s(report: dict[str, object]) -> tuple[object, ...]:
    return tuple(report[b]["f1"] for b in ("entities", "relationships"))  # type: ignore[index]


def test_alias_table_json_csv_and_tsv_and_no_aliases(tmp_path: Path) -> None:
    code, plain, _ = _score(tmp_path)
    assert code == 0 and plain is not None
    # the mention credits Ann; nothing credits IBM yet, so the relationship misses too
    assert plain["alias_matches"] == {"entities": 1, "entities_typed": 1, "relationships": 0}
    assert _f1s(plain) == (0.5, 0.0)
    table = tmp_path / "aliases.json"
    table.write_text(json.dumps([["IBM", "International Business Machines"]]), encoding="utf-8")
    csv_table = tmp_path / "aliases.csv"
    csv_table.write_text('IBM,"International Business Machines"\n', encoding="utf-8")
    tsv_table = tmp_path / "aliases.tsv"
    tsv_table.write_text("IBM\tInternational Business Machines\n", encoding="utf-8")
    for path in (table, csv_table, tsv_table):
        code, report, err = _score(tmp_path, "--aliases", str(path))
        assert code == 0, err
        assert report is not None and _f1s(report) == (1.0, 1.0)
        assert report["config"]["alias_groups"] == [  # type: ignore[index]
            ["IBM", "International Business Machines"]
        ]
    code, off, _ = _score(tmp_path, "--no-aliases")
    assert code == 0 and off is not None and _f1s(off) == (0.0, 0.0)
    code, _, err = _score(tmp_path, "--aliases", str(table), "--no-aliases")
    assert code == 2 and "exclude each other" in err and len(err.strip().splitlines()) == 1


def test_the_table_view_names_alias_matches(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.jsonl", GOLD)
    pred = _write(tmp_path / "pred.jsonl", PRED)
    result = runner.invoke(app, ["score", "--gold", str(gold), "--predictions", str(pred)])
    assert result.exit_code == 0
    assert "through aliases" in result.stdout and "entities 1" in result.stdout
    off = runner.invoke(
        app, ["score", "--gold", str(gold), "--predictions", str(pred), "--no-aliases"]
    )
    assert "off (--no-aliases)" in off.stdout


def test_bad_alias_tables_are_one_line_each_and_the_rest_is_used(tmp_path: Path) -> None:
    table = tmp_path / "bad.csv"
    table.write_text(
        "x" * 1_100_000
        + "\n"  # a 1 MB line
        + "IBM,International Business Machines\n"
        + "B,C\nC,A\nA,B\n"  # a cycle: one group
        + "lonely\n",
        encoding="utf-8",
    )
    code, report, err = _score(tmp_path, "--aliases", str(table))
    assert code == 0 and report is not None
    assert _f1s(report) == (1.0, 1.0)  # the good group was used
    assert report["config"]["alias_groups"] == [  # type: ignore[index]
        ["A", "B", "C"],
        ["IBM", "International Business Machines"],
    ]
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert any("bad.csv:1" in w and "bytes" in w for w in warnings)
    assert any("bad.csv:6" in w and "two names" in w for w in warnings)
    assert all(len(w) < 300 for w in warnings)  # one short line, not the 1 MB line echoed
    not_a_table = tmp_path / "nested.json"
    not_a_table.write_text("[" * 100_000, encoding="utf-8")
    code, _, err = _score(tmp_path, "--aliases", str(not_a_table))
    assert code == 2 and "nested.json" in err and len(err.strip().splitlines()) == 1
    code, _, err = _score(tmp_path, "--aliases", str(tmp_path / "missing.csv"))
    assert code == 2 and "missing.csv" in err


def test_run_records_the_table_and_resume_refuses_a_changed_one(tmp_path: Path) -> None:
    table = tmp_path / "aliases.json"
    table.write_text(json.dumps([["Ada Lovelace", "Countess of Lovelace"]]), encoding="utf-8")
    args = ["run", "--name", "al", "--limit", "3", "--aliases", str(table)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    run = LocalStore().get_run("al", "extraction-eval")
    assert run is not None
    assert run.config["scoring"]["alias_groups"] == [["Ada Lovelace", "Countess of Lovelace"]]
    again = runner.invoke(app, [*args, "--resume"])
    assert again.exit_code == 0, again.stderr
    table.write_text(json.dumps([["Ada Lovelace", "Ada King"]]), encoding="utf-8")
    changed = runner.invoke(app, [*args, "--resume"])
    assert changed.exit_code == 2
    assert "alias_groups" in changed.stderr or "aliases" in changed.stderr


def test_matrix_cells_record_the_table(tmp_path: Path) -> None:
    table = tmp_path / "aliases.json"
    table.write_text(json.dumps([["Ada Lovelace", "Countess of Lovelace"]]), encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "matrix",
            "--name",
            "mx",
            "--model",
            "offline:baseline",
            "--temperature",
            "0",
            "--limit",
            "2",
            "--aliases",
            str(table),
        ],
    )
    assert result.exit_code == 0, result.stderr
    runs = [r for r in LocalStore().list_runs() if r.name.startswith("mx")]
    assert runs
    for run in runs:
        assert run.config["scoring"]["alias_groups"] == [["Ada Lovelace", "Countess of Lovelace"]]
