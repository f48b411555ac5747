"""Dataset-level schemas, label maps and the warning when labels cannot meet, end to end.

The bundled sample with its gold relabelled the way CoNLL04 spells types (Peop, Org, Loc):
the offline baseline answers person / organization / location, so without a label map typed
F1 is 0 for a reason no model change fixes; with one it is a real number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
from extraction_eval.cli import app
from extraction_eval.datasets.jsonl import write_items
from extraction_eval.types import Schema

runner = CliRunner()
RENAMES = {"person": "Peop", "organization": "Org", "location": "Loc"}
LABELS = {"Peop": "person", "Org": "organization", "Loc": "location"}


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def relabelled(tmp_path: Path) -> Path:
    """The bundled sample's people, organizations and places, types renamed; items without a
    schema of their own."""
    items = []
    for item in LocalStore().get_items(SAMPLE_DATASET):
        ents = [
            e.model_copy(update={"type": RENAMES[e.type]})
            for e in item.expected.entities
            if e.type in RENAMES
        ]
        expected = item.expected.model_copy(update={"entities": ents})
        items.append(item.model_copy(update={"expected": expected, "schema_": None}))
    path = tmp_path / "relabelled.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        write_items(items, fh)
    return path


def _schema_file(tmp_path: Path, name: str, schema: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(schema), encoding="utf-8")
    return path


def _summary(name: str) -> dict[str, Any]:
    run = LocalStore().get_run(name)
    assert run is not None and run.summary is not None
    return {"config": run.config, **run.summary}


def test_labels_that_never_meet_are_named_and_a_label_map_fixes_them(
    relabelled: Path, tmp_path: Path
) -> None:
    code, _, err = cli("datasets", "upload", "raw", str(relabelled))
    assert code == 0, err
    code, out, err = cli("run", "--dataset", "raw", "--name", "raw")
    assert code == 0, err
    raw = _summary("raw")
    assert raw["values"]["entity_typed_f1"] == 0.0 and raw["values"]["entity_f1"] > 0.5
    flat = _flat(err)  # a warning that casts doubt on the run: on stderr, before the tables
    assert "labels never meet: predicted entity types (" in flat
    assert "never equal the gold's (" in flat and "Peop" in flat and "person" in flat
    assert '--schema schema.json with {"labels": {' in flat
    assert '"Loc": "location"' in flat and '"Org": "organization"' in flat
    assert raw["report"]["label_mismatch"] == {
        "entities": {
            "predicted": ["date", "location", "organization", "person"],
            "gold": ["Loc", "Org", "Peop"],
        }
    }

    # the dataset's schema, with a label map, given at upload: every item without its own
    schema = _schema_file(
        tmp_path,
        "schema.json",
        {"entity_types": ["Peop", "Org", "Loc"], "labels": LABELS},
    )
    code, out, err = cli("datasets", "upload", "mapped", str(relabelled), "--schema", str(schema))
    assert code == 0, err
    assert "dataset schema set" in out
    code, out, err = cli("datasets", "show", "mapped", "--limit", "1")
    assert code == 0, err
    assert "labels: Loc -> location, Org -> organization, Peop -> person" in _flat(out)
    # an export carries it on each item, so re-uploading the file asks the same
    code, out, err = cli("datasets", "export", "mapped")
    assert code == 0, err
    assert all(json.loads(line)["schema"]["labels"] == LABELS for line in out.splitlines())
    code, out, err = cli("run", "--dataset", "mapped", "--name", "mapped")
    assert code == 0, err
    assert "labels never meet" not in _flat(out)
    mapped = _summary("mapped")
    assert mapped["values"]["entity_typed_f1"] > 0.5
    assert mapped["report"]["label_mismatch"] is None
    assert mapped["config"]["dataset_schema"]["labels"] == LABELS  # in the run record
    assert "schema" not in mapped["config"]  # no run override
    # gold mapped, typed figures by the asked labels
    assert set(mapped["report"]["per_type"]["entities"]) >= {"person", "organization"}

    # score: the same label map from a schema file, the same typed counts
    preds = tmp_path / "preds.jsonl"
    code, _, err = cli("runs", "export", "mapped", "--format", "jsonl", "--out", str(preds))
    assert code == 0, err
    pred_file = tmp_path / "p.jsonl"
    rows = [json.loads(line) for line in preds.read_text().splitlines()]
    pred_file.write_text(
        "".join(json.dumps({"id": r["item_id"], **r["output"]}) + "\n" for r in rows)
    )
    args = ["score", "--gold", str(relabelled), "--predictions", str(pred_file)]
    code, out, err = cli(*args, "--format", "json", "--resamples", "0")
    assert code == 0, err
    assert json.loads(out)["entities_typed"]["tp"] == 0
    assert "labels never meet" in _flat(err)
    code, out, err = cli(*args, "--format", "json", "--resamples", "0", "--schema", str(schema))
    assert code == 0, err
    report = json.loads(out)
    assert report["entities_typed"]["tp"] == mapped["report"]["entities_typed"]["tp"]
    assert "labels never meet" not in _flat(err)


def test_a_run_schema_overrides_the_datasets_and_is_recorded(
    relabelled: Path, tmp_path: Path
) -> None:
    code, _, err = cli("datasets", "upload", "raw", str(relabelled))
    assert code == 0, err
    override = _schema_file(tmp_path, "run.json", {"labels": {"Peop": "person"}})
    code, out, err = cli("run", "--dataset", "raw", "--name", "o", "--schema", str(override))
    assert code == 0, err
    summary = _summary("o")
    assert summary["config"]["schema"] == {
        "entity_types": [],
        "relationship_types": [],
        "labels": {"Peop": "person"},
    }
    per_type = summary["report"]["per_type"]["entities"]
    assert per_type["person"]["tp"] > 0 and per_type["Org"]["tp"] == 0
    # a resumed run may not change the schema it was scored with
    other = _schema_file(tmp_path, "other.json", {"labels": {"Org": "organization"}})
    code, out, err = cli(
        "run", "--dataset", "raw", "--name", "o", "--resume", "--schema", str(other)
    )
    assert code != 0 and "schema differ from the original run" in _flat(err)
    # compare scores both runs with A's view of the gold (its schema)
    code, _, err = cli("run", "--dataset", "raw", "--name", "plain")
    assert code == 0, err
    code, out, err = cli("compare", "o", "plain", "--format", "json", "--resamples", "50")
    assert code == 0, err
    metrics = json.loads(out)["metrics"]
    assert metrics["entity_typed_f1"]["a"] == pytest.approx(summary["values"]["entity_typed_f1"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "--schema "),
        ('{"label": {"Peop": "person"}}', "unknown key(s) label"),
        ('{"labels": {"Peop": ""}}', "labels must be non-empty"),
        ("[1, 2]", "a schema is a JSON object"),
    ],
)
def test_a_bad_schema_file_is_one_line_and_nothing_is_created(
    relabelled: Path, tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    code, _, err = cli("datasets", "upload", "x", str(relabelled), "--schema", str(path))
    assert code == 2 and problem in err and len(err.strip().splitlines()) == 1
    assert err.startswith("error: --schema")
    names = [d.name for d in LocalStore().list_datasets()]
    assert "x" not in names


def test_the_python_api_sets_and_reads_a_dataset_schema(relabelled: Path) -> None:
    from extraction_eval.datasets.jsonl import read_items

    items, _ = read_items(relabelled)
    schema = Schema(entity_types=["Peop"], labels={"Peop": "person"})
    with LocalStore() as store:
        report = store.upload_items("api", items, schema=schema)
        assert report.schema_changed and store.get_dataset("api").schema == schema
        again = store.upload_items("api", items, schema=schema)
        assert not again.schema_changed and not again.new_version
        store.upload_items("api", items)  # no schema given: the dataset keeps its own
        assert store.get_dataset("api").schema == schema


def test_the_estimate_sees_the_answers_cached_under_the_asked_schema(
    relabelled: Path, tmp_path: Path
) -> None:
    schema = _schema_file(tmp_path, "s.json", {"entity_types": ["Peop"], "labels": LABELS})
    code, _, err = cli("datasets", "upload", "m", str(relabelled), "--schema", str(schema))
    assert code == 0, err
    code, _, err = cli("run", "--dataset", "m", "--model", "fake:x", "--name", "one")
    assert code == 0, err
    code, out, err = cli("run", "--dataset", "m", "--model", "fake:x", "--name", "two", "--dry-run")
    assert code == 0, err
    assert "items to run 0 (not counted: 48 answered from the response cache)" in _flat(out)


def test_an_attribute_the_dataset_schema_declares_can_gate_the_run(
    relabelled: Path, tmp_path: Path
) -> None:
    schema = _schema_file(
        tmp_path,
        "attrs.json",
        {"entity_types": ["Peop"], "attributes": {"Peop": {"role": ["staff", "other"]}}},
    )
    code, _, err = cli("datasets", "upload", "a", str(relabelled), "--schema", str(schema))
    assert code == 0, err
    args = ("run", "--dataset", "a", "--dry-run")
    code, _, err = cli(*args, "--fail-under", "attr.role=0.5")
    assert code == 0, err
    code, _, err = cli(*args, "--fail-under", "attr.mood=0.5")
    assert code == 2 and "has no attribute 'mood' (its attributes: role)" in _flat(err)


def test_a_matrix_cell_runs_with_the_datasets_schema(relabelled: Path, tmp_path: Path) -> None:
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.matrix import MatrixConfig, run_matrix

    schema = _schema_file(
        tmp_path, "s.json", {"entity_types": ["Peop", "Org", "Loc"], "labels": LABELS}
    )
    code, _, err = cli("datasets", "upload", "mx", str(relabelled), "--schema", str(schema))
    assert code == 0, err
    with LocalStore() as store:
        outcome = run_matrix(
            MatrixConfig(models=("offline:baseline",), name="mx", base=RunConfig(dataset="mx")),
            store=store,
        )
        (cell,) = outcome.cells
        run = store.get_run_by_id(cell.run.id)
        assert run.config["dataset_schema"]["labels"] == LABELS
        assert run.summary is not None and run.summary["values"]["entity_typed_f1"] > 0.5
