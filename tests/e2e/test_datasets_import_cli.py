"""``datasets import`` through the CLI: into the store (with a dataset schema), or to JSONL."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data" / "importers"


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_import_into_the_store_names_each_bad_record(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"labels": {"Person": "person"}}), encoding="utf-8")
    code, out, err = cli(
        "datasets", "import", "ls", str(DATA / "label_studio.json"),
        "--format", "label-studio", "--schema", str(schema),
    )  # fmt: skip
    assert code == 0, err
    lines = err.strip().splitlines()
    assert lines[0] == (
        "warning: label_studio.json:3 (id 103): span 0-11 is 'Ilse Brandt' in the text but"
        " 'Ilse Brand' in the file; skipped"
    )
    assert (
        lines[1] == "imported 2 of 3 label-studio records (4 entities, 2 relationships); 1 skipped"
    )
    assert "ls: 2 created, 0 updated, 0 unchanged (now version 1); 1 record(s) skipped" in out
    assert "dataset schema set" in out
    store = LocalStore()
    assert [i.id for i in store.get_items("ls")] == ["101", "102"]
    info = store.get_dataset("ls")
    assert info.schema is not None and info.schema.labels == {"Person": "person"}


def test_import_to_jsonl_writes_our_format_and_uploads_nothing(tmp_path: Path) -> None:
    out_file = tmp_path / "brat.jsonl"
    code, out, err = cli(
        "datasets", "import", "b", str(DATA / "brat"), "--format", "brat", "--out", str(out_file)
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["doc1", "doc2"]
    assert rows[0]["entities"][0] == {
        "name": "Anja Holm",
        "type": "Person",
        "evidence": "Anja Holm",
        "start": 0,
        "end": 9,
        "attributes": {"Confirmed": "true"},
    }
    assert "b" not in [d.name for d in LocalStore().list_datasets()]
    # and it uploads as it is
    code, out, err = cli("datasets", "upload", "b", str(out_file))
    assert code == 0, err and "2 created" in out


def test_a_bad_format_or_nothing_importable_is_one_line(tmp_path: Path) -> None:
    code, _, err = cli("datasets", "import", "x", str(DATA / "label_studio.json"))
    assert code == 2 and err.startswith("error: --format must be one of label-studio")
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"id": 1, "text": "x", "label": [[0, 9, "A"]]}\n', encoding="utf-8")
    code, _, err = cli("datasets", "import", "x", str(empty), "--format", "doccano")
    assert code == 2 and "no record of" in err
    assert "x" not in [d.name for d in LocalStore().list_datasets()]
