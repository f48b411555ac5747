"""``runs show NAME --worst``: a real local run with the scripted fake provider and known
failures, read back through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.analysis.stored import get_run
from extraction_eval.analysis.worst import run_worst_by_category, run_worst_items
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.evaluators.taxonomy import CATEGORIES

runner = CliRunner()

# What the script below makes of the first 7 bundled items (gold entities / relationships):
# 001 (3/2) provider error 401 -> errored, 5 objects missed
# 002 (2/1) unparseable answer -> errored (schema), 3 missed
# 003 (3/1) its gold -> clean, not listed
# 004 (4/3) gold entities only -> entity F1 1, relationship F1 0: mean 0.5, 3 missed
# 005 (3/3) gold + an entity not in the text -> entity F1 6/7, relationship F1 1, 1 ungrounded
# 006 (0/0) gold-empty, empty answer -> clean
# 007 (3/1) empty answer (the default) -> F1 0, 4 missed
WORST_ORDER = ["sample-001", "sample-002", "sample-007", "sample-004", "sample-005"]


@pytest.fixture
def failing_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    items = {i.id: i for i in LocalStore().get_items("extraction-eval")[:7]}

    def gold(item_id: str) -> dict[str, object]:
        return items[item_id].expected.model_dump(mode="json")

    with_extra = gold("sample-005")
    with_extra["entities"].append({"name": "Nobody Atall", "type": "person"})  # type: ignore[attr-defined]
    ents_only = {"entities": gold("sample-004")["entities"], "relationships": []}
    script = {
        "default": {"entities": [], "relationships": []},
        "items": {
            "sample-001": {"error": 401, "message": "bad key"},
            "sample-002": {"text": "{not json"},
            "sample-003": {"json": gold("sample-003")},
            "sample-004": {"json": ents_only},
            "sample-005": {"json": with_extra},
        },
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(path))
    result = runner.invoke(_run_app, ["--model", "fake:worst", "--limit", "7", "--name", "worst-1"])
    assert result.exit_code == 0, result.stderr
    return "worst-1"


def _show(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["runs", "show", *args])
    return result.exit_code, result.stdout, result.stderr


def _order(text: str, ids: list[str]) -> list[str]:
    found = [i for i in ids if i in text]
    return sorted(found, key=text.index)


ALL_IDS = [f"sample-00{i}" for i in range(1, 8)]


def test_worst_lists_failing_items_most_severe_first_with_categories(failing_run: str) -> None:
    code, out, err = _show(failing_run, "--worst")
    assert code == 0, err
    assert _order(out, ALL_IDS) == WORST_ORDER  # clean 003 and 006 are not listed
    assert "5 worst items" in out
    assert "ungrounded" in out and "missed ×5" in out and "bad key" in out
    # the library function (what a notebook calls) gives the same rows
    store = LocalStore()
    rows = run_worst_items(store, get_run(store, failing_run), limit=10)
    assert [w.item_id for w in rows] == WORST_ORDER
    assert [w.wrong_objects for w in rows] == [5, 3, 4, 3, 1]
    assert rows[3].combined_f1 == pytest.approx(0.5)
    assert rows[4].entity_f1 == pytest.approx(6 / 7)


def test_worst_limit_and_category(failing_run: str) -> None:
    code, out, err = _show(failing_run, "--worst", "--limit", "2")
    assert code == 0, err
    assert _order(out, ALL_IDS) == WORST_ORDER[:2]
    code, out, err = _show(failing_run, "--worst", "--category", "ungrounded")
    assert code == 0, err
    assert _order(out, ALL_IDS) == ["sample-005"]
    code, out, err = _show(failing_run, "--worst", "--category", "truncated")
    assert code == 0, err
    assert "no errored items and no items with mistakes with category truncated" in " ".join(
        out.split()
    )


def test_by_category_prints_each_categorys_worst_item(failing_run: str) -> None:
    code, out, err = _show(failing_run, "--worst", "--by-category")
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()]
    lines = {r[0]: r[1] for r in rows if len(r) > 1 and r[0] in CATEGORIES}
    assert set(lines) == {"missed", "ungrounded"}
    assert lines["missed"] == "sample-001"
    assert lines["ungrounded"] == "sample-005"
    store = LocalStore()
    got = run_worst_by_category(store, get_run(store, failing_run))
    assert {c: w.item_id for c, w in got.items()} == {
        "missed": "sample-001",
        "ungrounded": "sample-005",
    }


def test_by_category_without_worst_is_refused(failing_run: str) -> None:
    code, out, err = _show(failing_run, "--by-category")
    assert code == 2 and "needs --worst" in err and out == ""


def test_show_pages_items_most_severe_first_with_the_run_summary(failing_run: str) -> None:
    """Without options: the summary and one page, in the severity order --worst uses (clean
    items last); --limit sizes the page, --page moves it, --all prints every item."""
    code, out, err = _show(failing_run, "--limit", "3")
    assert code == 0, err
    assert "items with mistakes" in out and "entities" in out and "relationships" in out
    assert "items 1–3 of 7, most severe first (page 1 of 3)" in out
    assert _order(out, ALL_IDS) == WORST_ORDER[:3]
    assert "--page 2 for the next 3" in out
    code, out, err = _show(failing_run, "--limit", "3", "--page", "2")
    assert code == 0, err
    assert _order(out, ALL_IDS) == [*WORST_ORDER[3:5], "sample-003"]
    assert "items 4–6 of 7" in out
    code, out, err = _show(failing_run, "--all")
    assert code == 0, err
    assert _order(out, ALL_IDS) == [*WORST_ORDER, "sample-003", "sample-006"]
    code, out, err = _show(failing_run, "--worst", "--limit", "2", "--page", "2")
    assert code == 0, err
    assert _order(out, ALL_IDS) == WORST_ORDER[2:4]


def test_show_reads_only_its_page_from_the_store(
    failing_run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page is ordered and cut in SQL: only the page's rows are turned into results."""
    from extraction_eval.backends.local import runs as runs_table

    built: list[str] = []
    original = runs_table.item_result  # the stored row decoder (backends/local/rows.py)

    def counting(row, scores, tags):  # type: ignore[no-untyped-def]
        built.append(row["item_id"])
        return original(row, scores, tags)

    monkeypatch.setattr(runs_table, "item_result", counting)
    code, _, err = _show(failing_run, "--limit", "2")
    assert code == 0, err
    assert built == WORST_ORDER[:2]
    built.clear()
    code, _, err = _show(failing_run, "--worst", "--limit", "1")
    assert code == 0, err
    assert built == WORST_ORDER[:1]


def test_errored_items_and_items_with_mistakes_are_named_alike_in_every_view(
    failing_run: str,
) -> None:
    """Two names, one meaning each, in the run summary, runs show and runs list: 2 errored
    items (001, 002: no output) and 3 items with mistakes (007, 004, 005: an output below
    perfect); "failures" / "failing" names neither."""
    code, out, err = _show(failing_run, "--limit", "3")
    assert code == 0, err
    header = " ".join(out.split())
    assert "7 of 7; 2 errored" in header
    assert "items with mistakes 3 (an output scored below perfect)" in header
    args = ["--model", "fake:worst", "--limit", "7", "--resume", "--name", failing_run]
    result = runner.invoke(_run_app, args)  # a finished run: its summary again
    summary = " ".join((result.stdout + result.stderr).split())
    assert "errored items 2 (1 schema failures) of 7 items" in summary
    listed = runner.invoke(app, ["runs", "list"]).stdout
    assert "items / errored" in listed
    for text in (out, summary, listed):
        assert "failing" not in text and "failures " not in text.replace("schema failures", "")
