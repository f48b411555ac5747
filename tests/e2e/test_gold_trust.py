"""``--min-gold-confidence`` as an ignore region, on the issue's CoNLL04 case, and the same
figures from ``score``, ``run-experiment``, ``compare``, ``report`` and ``matrix``.

The case (issue 21): seven CoNLL04 test documents with three entities each (21 gold
entities); ensemble gold from three scripted models, m1 (weight 2) and m2 answering the gold,
m3 leaving out the last entity of the first two documents (so those two entities have
confidence 3/4). m1's answer is the whole gold. Before: with ``--min-gold-confidence 0.9``
the two low-confidence entities left the gold but m1's predictions of them stayed, as false
positives (precision 1.000 -> 0.905, tp 21 -> 19, fp 0 -> 2). Now they are ignored with the
gold they align with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.analysis.compare.runs import CompareOptions, compare_runs
from extraction_eval.analysis.html_report.data import build_report_data
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.matrix import MatrixConfig, run_matrix
from extraction_eval.llm.fake import register_fake, unregister_fake

runner = CliRunner()
MODELS = "fake:m1:1:2,fake:m2:1:1,fake:m3:1:1"


def _shared_data() -> Path | None:
    env = os.environ.get("EXTRACTION_EVAL_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "data")
    return next((p for p in candidates if (p / "conll04_test.jsonl").is_file()), None)


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _answer(doc: dict[str, Any], drop_last: bool = False) -> dict[str, Any]:
    ents = doc["entities"][:-1] if drop_last else doc["entities"]
    return {
        "entities": [{"name": e["name"], "type": e["type"], "evidence": e["name"]} for e in ents],
        "relationships": [
            {"source": r["source"], "type": r["type"], "target": r["target"]}
            for r in doc["relationships"]
        ],
    }


@pytest.fixture
def c7(tmp_path: Path) -> Iterator[Path]:
    data = _shared_data()
    if data is None:
        pytest.skip("shared data not found (conll04_test.jsonl); set EXTRACTION_EVAL_SHARED_DATA")
    docs = [json.loads(line) for line in (data / "conll04_test.jsonl").open(encoding="utf-8")]
    picked = [d for d in docs if len(d["entities"]) == 3][:7]
    path = tmp_path / "c7.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for d in picked:
            keep = ("id", "text", "entities", "relationships")
            fh.write(json.dumps({k: d[k] for k in keep}) + "\n")
    full = {d["id"]: _answer(d) for d in picked}
    register_fake("m1", {"items": full})
    register_fake("m2", {"items": full})
    register_fake("m3", {"items": {d["id"]: _answer(d, n < 2) for n, d in enumerate(picked)}})
    code, _, err = cli("datasets", "upload", "c7", str(path))
    assert code == 0, err
    code, _, err = cli("gold", "build", "--dataset", "c7", "--models", MODELS)
    assert code == 0, err
    yield path
    unregister_fake()


def _counts(report: dict[str, Any], block: str = "entities") -> tuple[int, int, int]:
    return report[block]["tp"], report[block]["fp"], report[block]["fn"]


def test_low_confidence_gold_is_an_ignore_region_everywhere(c7: Path, tmp_path: Path) -> None:
    code, out, err = cli("run", "--dataset", "c7", "--model", "fake:m1", "--name", "all")
    assert code == 0, err
    code, out, err = cli(
        "run", "--dataset", "c7", "--model", "fake:m1", "--name", "trusted",
        "--min-gold-confidence", "0.9",
    )  # fmt: skip
    assert code == 0, err
    assert "2 gold objects below ensemble confidence 0.9 ignored" in err
    flat = " ".join(out.split())
    assert "ignored gold 2 gold objects below the confidence floor ignored" in flat
    assert "with the 2 predictions aligned with them" in flat
    store = LocalStore()
    all_run, trusted = store.get_run("all"), store.get_run("trusted")
    assert all_run is not None and trusted is not None
    assert all_run.summary is not None and trusted.summary is not None
    assert _counts(all_run.summary["report"]) == (21, 0, 0)
    report = trusted.summary["report"]
    # was (19, 2, 0), precision 0.905: the predictions of the ignored gold were fp
    assert _counts(report) == (19, 0, 0) and report["entities"]["precision"] == 1.0
    assert report["ignored"] == {"gold": 2, "predictions": 2}
    run_scores = {s.name: s.value for s in store.run_scores(trusted.id)}
    assert (run_scores["ignored_gold"], run_scores["ignored_predictions"]) == (2.0, 2.0)
    assert "ignored_gold" not in {s.name for s in store.run_scores(all_run.id)}
    values = trusted.summary["values"]

    # score: the same gold file and m1's answers as predictions
    gold = tmp_path / "gold.jsonl"
    code, _, err = cli("datasets", "export", "c7", "--out", str(gold))
    assert code == 0, err
    preds = tmp_path / "preds.jsonl"
    code, _, err = cli("runs", "export", "trusted", "--format", "jsonl", "--out", str(preds))
    assert code == 0, err
    lines = [json.loads(line) for line in preds.read_text().splitlines()]
    pred_file = tmp_path / "p.jsonl"
    pred_file.write_text(
        "".join(json.dumps({"id": r["item_id"], **r["output"]}) + "\n" for r in lines)
    )
    args = ("score", "--gold", str(gold), "--predictions", str(pred_file), "--format", "json")
    code, out, err = cli(*args, "--resamples", "0", "--min-gold-confidence", "0.9")
    assert code == 0, err
    scored = json.loads(out)
    assert _counts(scored) == (19, 0, 0) and scored["ignored"] == {"gold": 2, "predictions": 2}

    # compare (A = trusted: its floor for both sides), report, matrix
    comparison = compare_runs(
        trusted, all_run, store=store, options=CompareOptions(resamples=50)
    ).to_json()
    metrics = comparison["metrics"]
    for metric in ("entity_precision", "entity_recall", "entity_f1", "entity_typed_f1"):
        assert metrics[metric]["a"] == pytest.approx(values[metric]), metric
        assert metrics[metric]["b"] == pytest.approx(values[metric]), metric  # A's floor
    data = build_report_data(store, [trusted, all_run])
    assert data.comparison is not None
    (row,) = [r for r in data.comparison["rows"] if r["metric"] == "entity_precision"]
    assert float(row["a"]) == float(row["b"]) == 1.0
    statuses = [s for item in data.items for s in item["runs"][0]["gst"]]
    assert statuses.count("ignored") == 2 and statuses.count("missed") == 0
    ignored_preds = [
        o for item in data.items for o in item["runs"][0]["pred"] if o["st"] == "ignored"
    ]
    assert len(ignored_preds) == 2
    outcome = run_matrix(
        MatrixConfig(
            models=("fake:m1",),
            name="mx",
            base=RunConfig(dataset="c7", backend="local", min_gold_confidence=0.9),
        ),
        store=store,
    )
    (cell,) = outcome.cells
    cell_run = store.get_run_by_id(cell.run.id)
    assert cell_run.summary is not None
    assert _counts(cell_run.summary["report"]) == (19, 0, 0)
    assert cell_run.summary["report"]["ignored"] == {"gold": 2, "predictions": 2}
    store.close()


def test_report_marks_ignored_gold_nothing_predicted(c7: Path) -> None:
    """m3 leaves out exactly the low-confidence gold: the run's stored alignment fits its
    prediction, but has no "ignored" state, so the report must not read it as "missed"."""
    code, _, err = cli(
        "run", "--dataset", "c7", "--model", "fake:m3", "--name", "m3-trusted",
        "--min-gold-confidence", "0.9",
    )  # fmt: skip
    assert code == 0, err
    store = LocalStore()
    run = store.get_run("m3-trusted")
    assert run is not None and run.summary is not None
    assert _counts(run.summary["report"]) == (19, 0, 0)
    assert run.summary["report"]["ignored"] == {"gold": 2, "predictions": 0}
    data = build_report_data(store, [run])
    statuses = [s for item in data.items for s in item["runs"][0]["gst"]]
    assert statuses.count("ignored") == 2 and statuses.count("missed") == 0
    preds = [o["st"] for item in data.items for o in item["runs"][0]["pred"]]
    assert preds and set(preds) == {"matched"}
    store.close()
