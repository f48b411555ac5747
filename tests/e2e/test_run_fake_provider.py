"""End to end through the CLI with the scripted fake provider: retries, schema failures,
provider errors, the response cache — every item a row, every failure counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.fake_log import read_fake_log

runner = CliRunner()


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    items = LocalStore().get_items("extraction-eval")[:6]
    ids = [i.id for i in items]
    gold0 = items[0].expected.model_dump(mode="json")
    script = {
        "default": {"entities": [], "relationships": []},
        "rules": [
            {"item": ids[0], "responses": [{"error": 429, "retry_after": 0}, {"json": gold0}]},
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


def _rows(name: str) -> dict[str, dict]:
    result = runner.invoke(app, ["runs", "export", name])
    assert result.exit_code == 0, result.stderr
    return {json.loads(x)["item_id"]: json.loads(x) for x in result.stdout.splitlines()}


def test_fake_provider_run_records_retries_failures_and_caches(
    scripted: tuple[list[str], Path],
) -> None:
    ids, log = scripted
    args = ["run", "--model", "fake:e2e", "--limit", "6", "--concurrency", "3"]
    result = runner.invoke(app, [*args, "--name", "fake-1"])
    assert result.exit_code == 0, result.stderr
    assert "2 (1 schema failures)" in result.stdout
    rows = _rows("fake-1")
    assert sorted(rows) == sorted(ids)
    assert rows[ids[0]]["attempts"] == 2 and rows[ids[0]]["error"] is None
    assert rows[ids[0]]["scores"]["entity_f1"] == 1.0
    assert rows[ids[1]]["error_kind"] == "schema"
    assert rows[ids[1]]["scores"]["extraction_error"] is True
    assert rows[ids[2]]["error_kind"] == "provider" and rows[ids[2]]["attempts"] == 1
    assert "bad key" in rows[ids[2]]["error"]
    run = LocalStore().get_run("fake-1", "extraction-eval")
    assert run is not None and run.summary is not None
    assert run.summary["values"]["schema_failure_rate"] == pytest.approx(1 / 6)
    assert run.summary["errors"] == 2
    calls_first = len(read_fake_log(log))
    assert calls_first == 7  # 6 items + one retry after the 429

    # Same config under a new name: successful answers come from the cache, failures re-run.
    result = runner.invoke(app, [*args, "--name", "fake-2"])
    assert result.exit_code == 0, result.stderr
    rows2 = _rows("fake-2")
    assert len(rows2) == 6
    new_calls = read_fake_log(log)[calls_first:]
    assert sorted(c["item_id"] for c in new_calls) == sorted([ids[1], ids[2]])
    assert rows2[ids[0]]["cache_hit"] is True and rows2[ids[0]]["attempts"] == 0
