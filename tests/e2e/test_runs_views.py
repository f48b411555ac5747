"""Runs read back through the CLI: deterministic exports of two real runs, the failure
taxonomy in exports and ``runs show --category``, and every table readable at 80 columns."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from extraction_eval.analysis.reporting import INVOCATION_FIELDS
from extraction_eval.analysis.score_files import score_files
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.datasets.bundled import example_paths
from extraction_eval.evaluators import CATEGORIES, ScoringConfig
from extraction_eval.views.score_report import render_report
from tests.support.fake_log import read_fake_log

runner = CliRunner()
LONG = "baseline-second-run-with-a-rather-long-name"


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _run(*args: str) -> None:
    result = runner.invoke(_run_app, list(args))
    assert result.exit_code == 0, result.stderr


def _export(name: str, *extra: str) -> str:
    code, out, err = _invoke("runs", "export", name, *extra)
    assert code == 0, err
    return out


def _rows(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


# --- point 5: deterministic exports ---------------------------------------------------------


def test_two_baseline_runs_export_byte_identically_with_deterministic() -> None:
    _run("--name", "base-a")
    _run("--name", "base-b")
    det_a, det_b = _export("base-a", "--deterministic"), _export("base-b", "--deterministic")
    assert det_a == det_b and len(det_a.splitlines()) == 48
    assert _export("base-a", "--deterministic", "--format", "csv") == _export(
        "base-b", "--deterministic", "--format", "csv"
    )
    full_a, full_b = _rows(_export("base-a")), _rows(_export("base-b"))
    assert full_a != full_b  # wall-clock latency differs between the runs
    # ... and it is the only kind of difference: without the dropped fields they are equal
    stripped = [{k: v for k, v in r.items() if k not in INVOCATION_FIELDS} for r in full_a]
    assert stripped == _rows(det_a)
    assert {k for r in full_a for k in r} - {k for r in _rows(det_a) for k in r} == set(
        INVOCATION_FIELDS
    )
    differing = {k for ra, rb in zip(full_a, full_b, strict=True) for k in ra if ra[k] != rb[k]}
    assert differing and differing <= set(INVOCATION_FIELDS)


@pytest.fixture
def fake_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    items = LocalStore().get_items("extraction-eval")[:6]
    ids = [i.id for i in items]
    script = {
        "default": {"entities": [], "relationships": []},
        "rules": [
            {
                "item": ids[0],
                "responses": [
                    {"error": 429, "retry_after": 0},
                    {"json": items[0].expected.model_dump(mode="json")},
                ],
            },
            {"item": ids[1], "responses": [{"text": "{not json"}]},
            {"item": ids[2], "responses": [{"error": 401, "message": "bad key"}]},
        ],
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(path))
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_LOG", str(log))
    return ids, log


def test_two_fake_provider_runs_export_identically_although_the_second_hits_the_cache(
    fake_script: tuple[list[str], Path],
) -> None:
    ids, log = fake_script
    args = ["--model", "fake:det", "--limit", "6", "--concurrency", "2"]
    _run(*args, "--name", "fake-a")
    calls_first = len(read_fake_log(log))
    _run(*args, "--name", "fake-b")
    # the second run asked the model only for the items that failed (answers are cached)
    assert len(read_fake_log(log)) - calls_first == 2
    assert _export("fake-a", "--deterministic") == _export("fake-b", "--deterministic")
    a = {r["item_id"]: r for r in _rows(_export("fake-a"))}
    b = {r["item_id"]: r for r in _rows(_export("fake-b"))}
    # the full export says honestly what differs: the cache and what it saved
    assert a[ids[0]]["attempts"] == 2 and not a[ids[0]]["cache_hit"]
    assert b[ids[0]]["attempts"] == 0 and b[ids[0]]["cache_hit"]
    assert a[ids[0]]["tokens_in"] and b[ids[0]]["tokens_in"] is None
    assert not b[ids[1]]["cache_hit"] and b[ids[1]]["error_kind"] == "schema"
    det = {r["item_id"]: r for r in _rows(_export("fake-b", "--deterministic"))}
    assert det[ids[1]]["error"] == a[ids[1]]["error"]  # failures are results: kept
    assert det[ids[2]]["categories"] == a[ids[2]]["categories"]


# --- taxonomy in exports and runs show --category -------------------------------------------


def test_exports_carry_categories_taxonomy_and_trace_columns() -> None:
    _run("--name", "tax")
    rows = {r["item_id"]: r for r in _rows(_export("tax"))}
    assert {"categories", "taxonomy", "trace_id", "trace_url"} <= set(rows["sample-036"])
    assert rows["sample-036"]["categories"] == {"missed": 1, "wrong_type": 1}
    wrong = [t for t in rows["sample-036"]["taxonomy"] if t["category"] == "wrong_type"]
    assert wrong and wrong[0]["side"] == "pred" and wrong[0]["kind"] == "entity"
    assert rows["sample-001"]["categories"] == {} and rows["sample-001"]["taxonomy"] == []
    assert "failure_category" not in rows["sample-036"]["scores"]  # it is `categories`
    table = list(csv.DictReader(io.StringIO(_export("tax", "--format", "csv"))))
    by_id = {r["item_id"]: r for r in table}
    assert json.loads(by_id["sample-036"]["categories"]) == {"missed": 1, "wrong_type": 1}
    assert "trace_url" in table[0]


def test_runs_show_category_lists_only_items_with_that_category() -> None:
    _run("--name", "cat")
    rows = _rows(_export("cat"))
    expected = sorted(r["item_id"] for r in rows if "wrong_type" in r["categories"])
    others = sorted(r["item_id"] for r in rows if "wrong_type" not in r["categories"])
    assert expected and others
    code, out, err = _invoke("runs", "show", "cat", "--category", "wrong_type")
    assert code == 0, err
    assert f"of {len(expected)} with category wrong_type" in out
    assert all(i in out for i in expected) and not any(i in out for i in others)
    code, out, err = _invoke("runs", "show", "cat", "--category", "missed")
    assert code == 0 and all(i in out for i in expected)


def test_runs_show_unknown_category_is_one_line_listing_the_known_ones() -> None:
    _run("--name", "cat2", "--limit", "2")
    code, out, err = _invoke("runs", "show", "cat2", "--category", "hallucinated")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    flat = " ".join(err.split())
    assert "unknown --category 'hallucinated'" in flat
    assert all(c in flat for c in CATEGORIES)


# --- point 7: 80 columns ---------------------------------------------------------------------


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> Console:
    """Every command module prints on one recorded 80-column console."""
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    for module in ("runs", "compare", "datasets", "run"):
        monkeypatch.setattr(f"extraction_eval.commands.{module}.console", console)
    return console


def _assert_whole(text: str, names: list[str]) -> None:
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80
    words = {w.strip("'\"(),:;[]") for w in text.split()}
    missing = [n for n in names if n not in words]
    assert not missing, f"not whole on one line: {missing}\n{text}"


def test_run_summary_runs_list_show_and_compare_fit_80_columns(narrow: Console) -> None:
    _run("--name", "baseline-v1")
    summary = narrow.export_text()
    store = LocalStore()
    run = store.get_run("baseline-v1")
    assert run is not None and run.summary is not None
    _assert_whole(summary, ["baseline-v1", *run.summary["score_means"]])
    _run("--name", LONG)

    assert _invoke("runs", "list")[0] == 0
    _assert_whole(narrow.export_text(), ["baseline-v1", LONG, "extraction-eval"])

    assert _invoke("runs", "show", LONG)[0] == 0
    shown = narrow.export_text()
    ids = [i.id for i in store.get_items("extraction-eval")]
    _assert_whole(shown, [*ids, "wrong_type", "missed"])

    assert _invoke("compare", "baseline-v1", LONG)[0] == 0
    compared = narrow.export_text()
    metrics = [n for n in run.summary["values"] if not n.endswith(("_ci_low", "_ci_high"))]
    _assert_whole(compared, ["baseline-v1", LONG, *metrics])
    # the paired CI of Δ on the metric's row: the same offline model twice, so Δ is 0
    assert any(
        line.split()[:1] == ["entity_f1"] and "[+0.000, +0.000]" in line and "n.s." in line
        for line in compared.splitlines()
    ), compared


def test_a_table_that_cannot_fit_is_transposed_not_cut(narrow: Console) -> None:
    huge = "a-run-name-so-long-that-no-table-row-of-eighty-columns-could-hold-it-whole"
    _run("--name", huge, "--limit", "3")
    narrow.export_text()
    assert _invoke("runs", "list")[0] == 0
    text = narrow.export_text()
    _assert_whole(text, [huge])
    assert "entity F1" in text and "items / errored" in text  # headers become row labels


def test_datasets_list_and_show_fit_80_columns(narrow: Console, tmp_path: Path) -> None:
    long_name = "conll04-test-with-negatives-and-a-long-name"
    data = tmp_path / "d.jsonl"
    text = " ".join(["word"] * 400)
    data.write_text(
        json.dumps({"id": "an-item-id-that-is-fairly-long-0001", "text": text, "entities": []})
        + "\n"
    )
    code, _, err = _invoke(
        "datasets", "upload", long_name, str(data), "--description", "a long description " * 8
    )
    assert code == 0, err
    narrow.export_text()
    assert _invoke("datasets", "list")[0] == 0
    _assert_whole(narrow.export_text(), [long_name, "extraction-eval", "description"])
    assert _invoke("datasets", "show", long_name)[0] == 0
    shown = narrow.export_text()
    _assert_whole(shown, ["an-item-id-that-is-fairly-long-0001", long_name])
    assert "chars]" in shown  # a long text says how much of it is not shown
    assert _invoke("datasets", "show", "extraction-eval", "--limit", "0")[0] == 0
    _assert_whole(narrow.export_text(), ["sample-001", "sample-048"])


def test_score_report_fits_80_columns(tmp_path: Path) -> None:
    gold, pred = example_paths()
    report = score_files(gold, pred, ScoringConfig()).report
    console = Console(width=80, record=True, file=io.StringIO(), color_system=None)
    render_report(report, console, title="score")
    types = [t for kind in ("entities", "relationships") for t in report["per_type"][kind]]
    _assert_whole(console.export_text(), ["entities", "relationships", *types[:3]])
    # snake_case spellings of Wikidata relation names (Re-DocRED) are long single words
    place, rel = (
        "geopolitical_administrative_area",
        "located_in_the_administrative_territorial_entity",
    )
    ents = [{"name": "Port Ansel", "type": place}, {"name": "Veldmark County", "type": place}]
    line = {"id": "d1", "text": "Port Ansel is in Veldmark County.", "entities": ents}
    rels = [{"source": "Port Ansel", "type": rel, "target": "Veldmark County"}]
    (tmp_path / "g.jsonl").write_text(json.dumps({**line, "relationships": rels}) + "\n")
    (tmp_path / "p.jsonl").write_text(json.dumps({**line, "relationships": []}) + "\n")
    report = score_files(tmp_path / "g.jsonl", tmp_path / "p.jsonl", ScoringConfig()).report
    render_report(report, console, title="score")
    _assert_whole(console.export_text(), [place, rel, "support"])


def test_a_run_summary_points_to_a_place_that_has_every_type(tmp_path: Path) -> None:
    """``run`` has no ``--format`` flag: the note under a per-type table cut at six rows names
    the HTML report (which charts every type), not a flag the command does not have."""
    types = [f"kind{n}" for n in range(9)]
    ents = [{"name": f"Name{n}", "type": t, "evidence": f"Name{n}"} for n, t in enumerate(types)]
    text = " ".join(e["name"] for e in ents) + "."
    data = tmp_path / "many-types.jsonl"
    data.write_text(json.dumps({"id": "m1", "text": text, "entities": ents}) + "\n")
    assert _invoke("datasets", "upload", "many-types", str(data))[0] == 0
    code, out, err = _invoke("run", "--dataset", "many-types", "--name", "many")
    assert code == 0, err
    assert "more types in `extraction-eval report many`" in out
    assert "--format json" not in out


def test_runs_show_config_prints_the_recorded_parameters_not_the_items() -> None:
    _run("--name", "conf", "--temperature", "0.25")
    code, out, err = _invoke("runs", "show", "conf")
    assert code == 0, err
    item_id = _rows(_export("conf"))[0]["item_id"]
    assert item_id in out  # the plain view lists items: the check below means something
    code, out, err = _invoke("runs", "show", "conf", "--config")
    assert code == 0, err
    assert "model" in out and "temperature" in out and "0.25" in out
    assert "concurrency" in out and "match" in out
    assert item_id not in out
    code, _, err = _invoke("runs", "show", "conf", "--config", "--worst")
    assert code != 0 and "--config" in err
