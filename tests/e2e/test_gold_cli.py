"""``gold build|review|override`` and ``--min-gold-confidence`` through the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
from extraction_eval.cli import app
from extraction_eval.llm.fake import register_fake, unregister_fake

runner = CliRunner()
MODELS = "fake:m1:1:2,fake:m2:1:1,fake:m3:1:1"


@pytest.fixture
def ids() -> Iterator[list[str]]:
    """Three disagreeing "models" on the first four bundled items (see test_gold_build)."""
    items = LocalStore().get_items(SAMPLE_DATASET)[:4]
    with LocalStore() as store:
        store.upload_items("small", items)
    m1, m2, m3 = {}, {}, {}
    for item in items:
        g = item.expected
        m1[item.id] = g.model_dump(mode="json")
        m2[item.id] = g.model_copy(update={"entities": g.entities[:-1]}).model_dump(mode="json")
        m3[item.id] = g.model_copy(
            update={"entities": [e.model_copy(update={"type": "thing"}) for e in g.entities]}
        ).model_dump(mode="json")
    for name, answers in (("m1", m1), ("m2", m2), ("m3", m3)):
        register_fake(name, {"items": answers})
    yield [i.id for i in items]
    unregister_fake()


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_build_review_override_and_trusted_scoring(ids: list[str], tmp_path: Path) -> None:
    code, out, err = cli("gold", "build", "--dataset", "small", "--models", MODELS, "--dry-run")
    assert code == 0, err
    assert "would make 12 model calls (fake:m1 4, fake:m2 4, fake:m3 4) for 4 items × 3 runs" in out
    with LocalStore() as store:
        assert store.get_dataset("small").version == 1  # a dry run writes nothing

    gold_file = tmp_path / "gold.jsonl"
    code, out, err = cli(
        "gold", "build", "--dataset", "small", "--models", MODELS, "--out", str(gold_file)
    )
    assert code == 0, err
    assert "built gold for 4 items of 'small'" in out and "12 model calls" in out
    assert "new version 2" in out
    # each item's last entity: m2 dropped it, m3 retyped it: its type has 2 of 4 weight
    assert "4 items below 0.75 confidence: sample-001 (0.50)," in out
    flat = " ".join(out.split())
    assert "agreement between the models on which objects are there (Krippendorff's α" in flat
    assert "entities α = " in flat and "candidates" in flat

    code, out, err = cli("gold", "review", "small", "--below", "0.8", "--format", "json")
    assert code == 0, err
    listed = json.loads(out)
    assert [x["item_id"] for x in listed] == [
        i for i in ids if LocalStore().get_items("small")[ids.index(i)].expected.entities
    ]
    code, out, err = cli("gold", "review", "small", "--item", ids[0])
    assert code == 0, err
    assert "thing: 1 (fake:m3#1)" in out

    # a person retypes an entity; the rebuild makes no call and keeps the override
    name = LocalStore().get_items("small")[0].expected.entities[0].name
    code, out, err = cli(
        "gold", "override", "small", ids[0], "--set", f"{name}.type=human",
        "--reason", "house style", "--author", "ana",
    )  # fmt: skip
    assert code == 0, err and "override #1 stored" in out
    code, out, err = cli("gold", "build", "--dataset", "small", "--models", MODELS)
    assert code == 0, err
    assert "0 model calls, 12 cached answers" in out and "(1 from overrides)" in out
    item0 = LocalStore().get_items("small")[0]
    assert item0.expected.entities[0].type == "human"
    assert item0.metadata["gold"]["entities"][0]["source"] == "override"

    # scoring against trusted gold only: m2's answer misses exactly the 0.75 entities
    preds = tmp_path / "m2.jsonl"
    with preds.open("w") as fp:
        for line in gold_file.read_text().splitlines():
            obj = json.loads(line)
            fp.write(json.dumps({"id": obj["id"], **_drop_last(obj)}) + "\n")
    args = ["score", "--gold", str(gold_file), "--predictions", str(preds), "--format", "json"]
    code, out, err = cli(*args, "--resamples", "0")
    assert code == 0, err
    assert json.loads(out)["entities"]["recall"] < 1.0
    code, out, err = cli(*args, "--resamples", "0", "--min-gold-confidence", "0.9")
    assert code == 0, err
    report = json.loads(out)
    assert report["entities"]["recall"] == 1.0
    assert any(
        "gold objects below ensemble confidence 0.9 ignored" in w for w in report["warnings"]
    )

    # and in a run: the same trusted gold, the count said once
    code, out, err = cli(
        "run", "--dataset", "small", "--model", "fake:m2", "--name", "m2-trusted",
        "--min-gold-confidence", "0.9",
    )  # fmt: skip
    assert code == 0, err
    assert "gold objects below ensemble confidence 0.9 ignored" in err


def _drop_last(obj: dict[str, object]) -> dict[str, object]:
    ents = list(obj.get("entities") or [])  # type: ignore[call-overload]
    return {"entities": ents[:-1], "relationships": obj.get("relationships") or []}


def test_override_file_reports_bad_lines(ids: list[str], tmp_path: Path) -> None:
    f = tmp_path / "overrides.jsonl"
    f.write_text(
        json.dumps(
            {
                "item_id": ids[0],
                "action": "add",
                "kind": "entity",
                "value": {"name": "Someone New", "type": "person"},
                "reason": "missed by every model",
            }
        )
        + "\n"
        + json.dumps({"item_id": ids[1], "action": "set", "kind": "entity", "reason": "x"})
        + "\n"
    )
    code, out, err = cli("gold", "override", "small", "--file", str(f))
    assert code == 0, err
    assert "stored 1 overrides" in out
    # the one line-warning format, the file by its name as in `score` and `datasets upload`
    assert f"warning: overrides.jsonl:2 (id {ids[1]}): target" in " ".join(err.split()), err
    code, out, err = cli("gold", "build", "--dataset", "small", "--models", MODELS)
    assert code == 0, err
    names = [e.name for e in LocalStore().get_items("small")[0].expected.entities]
    assert "Someone New" in names


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gold", "build", "--dataset", "small", "--models", "fake"], "--models 'fake': expected"),
        (
            ["gold", "build", "--dataset", "small", "--models", "fake:m1", "--min-agreement", "1"],
            "--min-agreement must be below 1",
        ),
        (["gold", "override", "small", "x", "--remove", "Ada"], "--reason is required"),
        (
            ["gold", "override", "small", "x", "--set", "Ada=1", "--reason", "r"],
            "--set takes TARGET.FIELD=VALUE",
        ),
        (
            ["gold", "override", "small", "x", "--set", "Ada.colour=red", "--reason", "r"],
            "--field 'colour' cannot be set on entity",
        ),
        (["gold", "review", "small", "--item", "nope"], "no built gold for item 'nope'"),
        (  # the store's ``version`` is this command's --dataset-version
            [
                "gold",
                "build",
                "--dataset",
                "small",
                "--models",
                "fake:m1",
                "--dataset-version",
                "x",
            ],
            "--dataset-version must be a number for a local dataset, got 'x'",
        ),
    ],
)
def test_bad_gold_options(ids: list[str], args: list[str], message: str) -> None:
    code, out, err = cli(*args)
    assert code == 2, (out, err)
    assert message in " ".join(err.split())


def test_config_file(ids: list[str], tmp_path: Path) -> None:
    cfg = tmp_path / "gold.toml"
    cfg.write_text(
        'dataset = "small"\n'
        "min_agreement = 0.9\n"
        'models = ["fake:m1:1:2", { model = "fake:m2", weight = 1 }, "fake:m3"]\n'
    )
    code, out, err = cli("gold", "build", "--config", str(cfg), "--dry-run")
    assert code == 0, err
    assert "would make 12 model calls (fake:m1 4, fake:m2 4, fake:m3 4)" in out
    # min_agreement 0.9 of weight 4: only objects all three found are kept
    code, out, err = cli("gold", "build", "--config", str(cfg))
    assert code == 0, err
    kept_strict = sum(len(i.expected.entities) for i in LocalStore().get_items("small"))
    # the command line wins over the file
    code, out, err = cli("gold", "build", "--config", str(cfg), "--min-agreement", "0.5")
    assert code == 0, err
    kept = sum(len(i.expected.entities) for i in LocalStore().get_items("small"))
    last_entities = sum(1 for i in LocalStore().get_items("small") if i.expected.entities)
    assert kept == kept_strict + last_entities  # each item's last entity (m2 lacks it) is back


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('dataset = "small"\nmodels = ["fake:m1"]\ncolour = 1\n', "unknown key 'colour'"),
        ('dataset = "small"\nmodels = [{ model = "fake:m1", runs = 0 }]\n', "models[1]"),
        ('dataset = "small"\nmodels = "fake:m1"\n', "models must be a list"),
        ('models = ["fake:m1"]\n', "--dataset is required"),
        ("dataset = [\n", "not valid TOML"),
    ],
)
def test_bad_config_file(ids: list[str], tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "gold.toml"
    cfg.write_text(text)
    code, out, err = cli("gold", "build", "--config", str(cfg))
    assert code == 2, (out, err)
    assert message in " ".join(err.split())


def test_compare_and_report_score_against_the_gold_the_runs_trusted(
    ids: list[str], tmp_path: Path
) -> None:
    code, out, err = cli("gold", "build", "--dataset", "small", "--models", MODELS)
    assert code == 0, err
    for model, name in (("fake:m2", "m2-t"), ("fake:m3", "m3-t")):
        code, out, err = cli(
            "run", "--dataset", "small", "--model", model, "--name", name,
            "--min-gold-confidence", "0.9",
        )  # fmt: skip
        assert code == 0, err
    code, out, err = cli("compare", "m2-t", "m3-t", "--format", "json", "--resamples", "100")
    assert code == 0, err
    data = json.loads(out)
    store = LocalStore()
    for side, name in (("a", "m2-t"), ("b", "m3-t")):
        run = store.get_run(name)
        assert run is not None and run.summary is not None
        values = run.summary["values"]
        for metric in ("entity_recall", "entity_f1", "entity_typed_f1"):
            assert data["metrics"][metric][side] == pytest.approx(values[metric]), (name, metric)
    # m2 lacks only the low-confidence entities: against the trusted gold it misses nothing
    assert data["metrics"]["entity_recall"]["a"] == 1.0
    # the report's figures too
    from extraction_eval.analysis.html_report.data import build_report_data

    report = build_report_data(store, [store.get_run("m2-t"), store.get_run("m3-t")])  # type: ignore[list-item]
    assert report.comparison is not None
    (row,) = [r for r in report.comparison["rows"] if r["metric"] == "entity_recall"]
    assert float(row["a"]) == 1.0
