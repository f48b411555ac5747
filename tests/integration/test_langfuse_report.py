"""``report`` on a LangFuse-mode run: the items come from LangFuse (the dataset lives there,
not in the local store), the results from the local mirror, with each item's trace URL."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.datasets.jsonl import parse_lines
from extraction_eval.errors import NotFoundError
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from tests.support import report_runs
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse
from tests.support.report_page import read_embedded

DATASET = "lf-report-set"


def test_report_of_a_langfuse_run_reads_its_items_from_langfuse(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rows = report_runs.dataset_rows()[:4]
    items, problems = parse_lines(json.dumps(r) for r in rows)
    assert not problems
    upload(server, items, DATASET)
    use_langfuse(server, monkeypatch, "report", verify_timeout=None)
    secret = os.environ["LANGFUSE_SECRET_KEY"]
    pipeline = PipelineConfig(pipeline=f"{Path(report_runs.__file__).resolve()}:run_a")
    run_experiment(RunConfig(dataset=DATASET, name="lf-a", pipeline=pipeline))
    store = LocalStore()
    with pytest.raises(NotFoundError):
        store.get_items(DATASET)  # only LangFuse has the dataset
    out = tmp_path / "lf.html"
    result = CliRunner().invoke(app, ["report", "lf-a", "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    assert secret not in html  # no key in a report
    data = read_embedded(html)  # run headers, the item table and every item's details
    assert data["runs"][0]["backend"] == "langfuse"
    assert [r["id"] for r in data["items"]] == [r["id"] for r in rows]
    first = data["items"][0]
    assert first["text"] == rows[0]["text"]
    entry = first["runs"][0]
    assert entry["url"] and entry["url"].startswith(server.base_url)
    assert {p["label"]: p["st"] for p in entry["pred"]} == {
        "Ada Lovelace": "matched",
        "London": "matched",
        "1833": "spurious",
        "Paris": "ungrounded",
    }
