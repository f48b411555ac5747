"""``extraction-eval report``: the data behind the highlights, the escaping of untrusted text,
a self-contained file, and the command's errors. (The page itself runs in a real browser in
tests/browser.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.analysis.html_report.data import build_report_data
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.reports.html import render_report, script_json
from tests.support.report_page import read_embedded
from tests.support.report_runs import FILLERS, HOSTILE, make_runs

runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    s = LocalStore()
    make_runs(s, tmp_path)
    return s


def _data(store: LocalStore, *names: str):  # type: ignore[no-untyped-def]
    return build_report_data(store, [get_run(store, n) for n in names])


def _embedded(html: str) -> dict:  # what the page's script reads: run headers, table, chunks
    return read_embedded(html)


def data_chunks(html: str) -> list[str]:
    return re.findall(
        r'<script type="application/octet-stream" id="chunk-\d+">([^<]*)</script>', html
    )


def test_script_json_cannot_close_the_script_element() -> None:
    value = {"t": "</script><script>alert(1)</script> <!-- & \u2028"}
    text = script_json(value)
    assert "</" not in text and "<!--" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == value


def test_item_rows_carry_each_status_with_the_spans_of_its_evidence(store: LocalStore) -> None:
    data = _data(store, "rep-a", "rep-b")
    assert len(data.items) == 3 + FILLERS
    row = next(r for r in data.items if r["id"] == "r-001")
    text = row["text"]
    a, b = row["runs"]

    def quoted(obj: dict) -> str:
        return "".join(text[s:e] for s, e in obj["sp"])

    # every gold object is located by its evidence, and the span is that quote in the text
    assert [g["via"] for g in row["gold"]] == ["evidence"] * 4
    assert all(quoted(g) == g["ev"] for g in row["gold"])
    # A: Ada, London matched; Charles Babbage and the relationship missed
    assert a["gst"] == ["matched", "missed", "matched", "missed"]
    status = {p["label"]: (p["st"], p["g"]) for p in a["pred"]}
    assert status == {
        "Ada Lovelace": ("matched", 0),
        "London": ("matched", 2),
        "1833": ("spurious", None),
        "Paris": ("ungrounded", None),
    }
    by_label = {p["label"]: p for p in a["pred"]}
    assert quoted(by_label["London"]) == "in London"
    assert by_label["Paris"]["sp"] is None  # "born in Paris" is nowhere in the text
    # B: everything but London, and the relationship (gold index 3 = after the 3 entities)
    assert b["gst"] == ["matched", "matched", "missed", "matched"]
    assert [p["g"] for p in b["pred"]] == [0, 1, 3]
    assert row["chg"] is True


def test_a_failed_item_is_a_row_with_its_error(store: LocalStore) -> None:
    data = _data(store, "rep-a", "rep-b")
    row = next(r for r in data.items if r["id"] == "r-002")
    a, b = row["runs"]
    assert a["err"] is None and a["fail"] is False
    assert b["err"] is not None and "scripted failure on r-002" in b["err"]
    assert b["fail"] is True and b["pred"] == [] and b["gst"] == ["missed"]
    assert b["cats"] == {"missed": 1}
    empty = next(r for r in data.items if r["id"] == "r-003")
    assert empty["runs"][1]["cats"] == {"hallucinated_on_empty": 1}


def test_untrusted_text_never_becomes_markup(store: LocalStore) -> None:
    html = render_report(_data(store, "rep-a", "rep-b"))
    # only the page's own script elements (its code, the run headers, the item table and one
    # block per details chunk), whatever the item texts hold
    assert len(re.findall(r"<script\b", html)) == 3 + len(data_chunks(html))
    assert "window.__pwned" in html  # the text is there, as escaped JSON ...
    assert "<script>window.__pwned" not in html and "<b>bold</b>" not in html
    assert "<img src=x onerror" not in html
    data = _embedded(html)
    assert next(r for r in data["items"] if r["id"] == "r-002")["text"] == HOSTILE


def test_run_names_and_configs_are_escaped(store: LocalStore, tmp_path: Path) -> None:
    run = get_run(store, "rep-a")
    data = build_report_data(store, [run])
    data.runs[0]["name"] = '<img src=x onerror="alert(1)">'
    html = render_report(data)
    assert "<img src=x" not in html and "&lt;img src=x" in html


def test_the_file_is_self_contained(store: LocalStore) -> None:
    html = render_report(_data(store, "rep-a", "rep-b"))
    # nothing to fetch: every src / href is inline data or a link inside the page
    for attr in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert attr.startswith(("data:", "#")), attr
    assert "default-src 'none'" in html  # and the page forbids fetching anything else
    assert "<link" not in html and "@import" not in html
    # the charts are SVG images rendered at build time (one per figure)
    assert len(re.findall(r'<img src="data:image/svg\+xml;base64,', html)) == 5


def test_report_command_end_to_end(store: LocalStore, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", "rep-a", "rep-b", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert f"{3 + FILLERS} items" in result.stdout
    data = _embedded(out.read_text(encoding="utf-8"))
    assert [r["name"] for r in data["runs"]] == ["rep-a", "rep-b"]
    assert len(data["items"]) == 3 + FILLERS


def test_report_command_errors_are_one_line(store: LocalStore, tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", "rep-a", "nope", "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no run named 'nope'")
    result = runner.invoke(app, ["report", "rep-a", "--out", str(tmp_path / "no" / "r.html")])
    assert result.exit_code == 2 and "--out" in result.stderr and "does not exist" in result.stderr
    assert not (tmp_path / "no").exists()


def test_two_runs_get_the_paired_table_and_the_per_item_diff(store: LocalStore) -> None:
    runs = [get_run(store, "rep-a"), get_run(store, "rep-b")]
    data = build_report_data(store, runs)
    comparison = data.comparison
    assert comparison is not None
    rows = {r["metric"]: r for r in comparison["rows"]}
    # A and B are each run's own summary figures; Δ and its CI from the paired bootstrap
    for name in ("entity_f1", "entity_precision", "relationship_f1", "zero_fp_pass_rate"):
        for side, run in (("a", runs[0]), ("b", runs[1])):
            assert rows[name][side] == f"{run.summary['values'][name]:.4f}"  # type: ignore[index]
    # B hallucinates on the one gold-empty item: its zero-FP pass rate falls from 1 to 0 on
    # every resample where it is defined, a zero-width CI resting on that ONE item: no verdict
    assert rows["zero_fp_pass_rate"]["verdict"] == "insufficient"
    assert rows["entity_f1"]["verdict"] == "no significant change"
    # the very figures `compare A B --format json` prints
    cli = runner.invoke(app, ["compare", "rep-a", "rep-b", "--format", "json"])
    assert cli.exit_code == 0, cli.stderr
    printed = json.loads(cli.stdout)
    for key in ("metrics", "mcnemar", "per_type", "bootstrap", "items"):
        assert comparison["json"][key] == printed[key], key
    json_metrics = comparison["json"]["metrics"]
    assert json_metrics["entity_f1"]["verdict"] == "no significant change"
    assert comparison["json"]["mcnemar"]["b10"] == 2  # r-001 and r-002 right in A only
    assert comparison["json"]["items"] == 3 + FILLERS
    diffs = {r["id"]: r.get("diff") for r in data.items}
    assert diffs["r-001"] == {
        "fixed": ["Charles Babbage", "(Ada Lovelace, met, Charles Babbage)"],
        "broken": ["London"],
        "gone false positives": ["1833", "Paris"],
    }
    assert diffs["r-002"] == {"broken": ["Bob"], "error": ["B errored"]}
    assert diffs["r-003"] == {"new false positives": ["Nothing"]}
    assert all(diffs[f"r-{n:03d}"] is None for n in range(4, 4 + FILLERS))
    # the diff's counts over every paired item, by type (as compare's)
    diff = comparison["diff"]
    assert diff["items"] == 3 + FILLERS and diff["changed_items"] == 3
    totals = dict(zip(diff["columns"], diff["totals"], strict=True))
    assert totals == {
        "fixed": 2,  # Charles Babbage, the met relationship
        "broken": 2,  # London, and Bob (B errored on r-002)
        "retyped": 0,
        "flipped": 0,
        "evidence grounded": 0,
        "evidence ungrounded": 0,
        "new false positives": 1,  # "Nothing" on the gold-empty item
        "gone false positives": 2,  # 1833 and Paris
    }
    by_type = {(r["kind"], r["type"]): r["counts"][:2] for r in diff["rows"]}
    assert by_type[("entity", "person")] == [1, 1] and by_type[("entity", "location")] == [0, 1]
    assert by_type[("relationship", "met")] == [1, 0]
    assert [r["chg"] for r in data.items[3:]] == [False] * FILLERS
    html = render_report(data)
    assert (
        'id="paired-table"' in html and html.count(">insufficient<") == 2
    )  # both gold-empty rates
    assert 'id="diff-table"' in html
    # the sentence above the diff table names the counts, never a Python repr
    assert f"3 of {3 + FILLERS} paired items changed" in html and "built-in method" not in html


def test_one_run_has_no_paired_section(store: LocalStore) -> None:
    data = _data(store, "rep-b")
    assert data.comparison is None and all("chg" not in r for r in data.items)
    html = render_report(data)
    assert 'id="paired"' not in html and 'id="f-changed"' not in html
    assert _embedded(html)["runs"][0]["name"] == "rep-b"


def test_runs_on_different_datasets_are_refused(store: LocalStore, tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", "--name", "other", "--limit", "2"])
    assert result.exit_code == 0, result.stderr
    result = runner.invoke(app, ["report", "rep-a", "other", "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: RUN names runs on different datasets (extraction-eval, report-set);"
        " a report compares runs on one dataset"
    )


def test_a_limited_run_reports_only_the_items_it_ran_and_says_so(tmp_path: Path) -> None:
    """A ``--limit 6`` run on the 48 bundled items: 6 rows (none "no result"), and the
    report (page and command) says 6 of 48 were run."""
    result = runner.invoke(app, ["run", "--name", "six", "--limit", "6"])
    assert result.exit_code == 0, result.stderr
    store = LocalStore()
    run = get_run(store, "six")
    total = len(store.item_ids(run.dataset, version=run.dataset_version))
    ran = store.result_ids(run.id)
    assert len(ran) == 6 < total
    data = build_report_data(store, [run])
    assert sorted(data.table["id"]) == sorted(ran)
    assert all(st != 0 for st in data.table["runs"][0]["st"])  # no "no result" row
    assert data.dataset_items == total
    line = f"6 of {total} dataset items were run; the report lists only those"
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", "six", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "6 items" in result.stdout and line in " ".join(result.stdout.split())
    html = out.read_text(encoding="utf-8")
    assert line in html
    # the two names of docs/reference.md, as in every view: errored items, items with mistakes
    assert "errored items" in html and "errored or with mistakes only" in html
    assert "failing only" not in html
    embedded = _embedded(html)
    assert len(embedded["items"]) == 6 and embedded["dataset_items"] == total


def test_a_full_run_has_no_coverage_line(store: LocalStore) -> None:
    data = _data(store, "rep-a", "rep-b")
    assert data.coverage() is None and "dataset items were run" not in render_report(data)
