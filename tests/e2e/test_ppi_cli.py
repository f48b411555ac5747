"""``--ppi --human FILE`` on compare and run-experiment: PPI-corrected P/R/F1, end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app

runner = CliRunner()


def _human_file(tmp_path: Path, n: int) -> Path:
    """The first ``n`` items' gold as a person "verified" it: one more entity each, which the
    runs never find (so human recall is below model-gold recall)."""
    path = tmp_path / "human.jsonl"
    lines = []
    for item in LocalStore().get_items("extraction-eval")[:n]:
        entities = [
            e.model_dump(mode="json", exclude_defaults=True) for e in item.expected.entities
        ]
        entities.append({"name": "Zyxwv Qqq", "type": "person"})
        rels = [
            r.model_dump(mode="json", exclude_defaults=True) for r in item.expected.relationships
        ]
        lines.append(json.dumps({"id": item.id, "text": item.text, "entities": entities,
                                 "relationships": rels}))  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_compare_reports_ppi_for_both_runs(tmp_path: Path) -> None:
    for name in ("a", "b"):
        result = runner.invoke(_run_app, ["--name", name])
        assert result.exit_code == 0, result.stderr
    human = _human_file(tmp_path, 20)
    out = runner.invoke(
        app, ["compare", "a", "b", "--ppi", "--human", str(human), "--format", "json"]
    )
    assert out.exit_code == 0, out.stderr
    ppi = json.loads(out.stdout)["ppi"]
    recall = ppi["a"]["metrics"]["entity_recall"]
    assert (recall["verified"], recall["unverified"]) == (20, 28)
    # the verified items show the model gold misses a person per item: PPI pulls recall down
    assert recall["ppi"]["value"] < recall["naive"]["value"]
    assert recall["ppi"]["low"] < recall["ppi"]["value"] < recall["ppi"]["high"]
    # precision's denominator does not depend on the gold; the extra entity is never found,
    # so tp does not change either: no correction
    precision = ppi["a"]["metrics"]["entity_precision"]
    assert precision["ppi"]["value"] == precision["naive"]["value"]
    text = runner.invoke(app, ["compare", "a", "b", "--ppi", "--human", str(human)])
    assert "PPI-corrected scores (95% CI), 20 verified of 48 items" in text.stdout
    bad = runner.invoke(app, ["compare", "a", "b", "--ppi"])
    assert bad.exit_code == 2 and "--ppi needs --human FILE" in bad.stderr
    run = runner.invoke(_run_app, ["--name", "c", "--ppi", "--human", str(human)])
    assert run.exit_code == 0, run.stderr
    assert "run 'c': PPI-corrected scores" in run.stdout


def test_a_verified_file_needs_no_text(tmp_path: Path) -> None:
    """The keys docs/statistics.md lists (id, entities, relationships) are enough: the text is
    the dataset item's (a file with ``text`` still reads; it was required and every line of
    a file without it was skipped, so ``--human`` refused the file)."""
    from extraction_eval.analysis.compare.ppi import read_human_gold

    path = tmp_path / "verified.jsonl"
    path.write_text(
        '{"id": "sample-001", "entities": [{"name": "Mara Velloso", "type": "person"}],'
        ' "relationships": []}\n{"id": "sample-002", "text": "x", "entities": []}\n',
        encoding="utf-8",
    )
    verified, warnings = read_human_gold(path)
    assert sorted(verified) == ["sample-001", "sample-002"] and warnings == []
    assert [e.name for e in verified["sample-001"].entities] == ["Mara Velloso"]


def test_run_experiment_with_ppi_closes_the_store_it_opens_for_ppi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    human = _human_file(tmp_path, 5)
    opened: list[LocalStore] = []  # by the command itself (the runner's are its own)
    init = LocalStore.__init__

    def recording_init(self: LocalStore, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if sys._getframe(1).f_code.co_filename.endswith(str(Path("commands", "run.py"))):
            opened.append(self)

    monkeypatch.setattr(LocalStore, "__init__", recording_init)
    run = runner.invoke(_run_app, ["--name", "closed", "--ppi", "--human", str(human)])
    assert run.exit_code == 0, run.stderr
    assert opened and [s for s in opened if s._conn is not None] == []
