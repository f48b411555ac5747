"""``runs pull``: an experiment made on another machine comes into the local mirror from
LangFuse's public API (experiments, experiment-items, v3 scores), so ``runs show``,
``compare`` and ``report`` work on it; ``compare`` pulls by itself when a run is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.integration.test_langfuse_experiment import DATASET, PIPE, upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

cli = CliRunner()


def _snapshot(name: str) -> dict[str, tuple[bool, dict[str, float | str | bool]]]:
    store = LocalStore()
    run = store.get_run(name, DATASET)
    assert run is not None
    return {
        r.item_id: (r.ok, {s.name: s.value for s in r.scores if s.name != "failure_category"})
        for r in store.results(run.id)
    }


def test_pull_brings_another_machines_experiment_into_the_mirror(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    items = LocalStore().get_items(DATASET)[:6]
    upload(server, items)
    use_langfuse(server, monkeypatch, "pull")
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "ci"))
    monkeypatch.setenv("E2E_FAIL", items[2].id)
    made = cli.invoke(_run_app, ["--name", "ci-run", "--pipeline", PIPE])
    assert made.exit_code == 0, made.stderr
    monkeypatch.delenv("E2E_FAIL")
    other = cli.invoke(_run_app, ["--name", "ci-base"])
    assert other.exit_code == 0, other.stderr
    there = _snapshot("ci-run")
    summary_there = LocalStore().get_run("ci-run", DATASET).summary  # type: ignore[union-attr]

    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "laptop"))  # another machine
    assert LocalStore().list_runs() == []
    result = cli.invoke(app, ["runs", "pull", "ci-run"])
    assert result.exit_code == 0, result.stderr
    assert "6 items, 1 errored" in result.stdout
    assert server.requests_to("/api/public/experiments", "GET")
    assert server.requests_to("/api/public/experiment-items", "GET")
    here = _snapshot("ci-run")
    assert here == there  # every item, its outcome and its scores as LangFuse has them
    run = LocalStore().get_run("ci-run", DATASET)
    assert run is not None and run.backend == "langfuse" and summary_there is not None
    assert run.summary is not None
    for name in ("entity_f1", "entity_recall", "error_rate"):
        assert run.summary["values"][name] == pytest.approx(summary_there["values"][name])

    worst = cli.invoke(app, ["runs", "show", "ci-run", "--worst", "--limit", "1"])
    assert worst.exit_code == 0 and items[2].id in worst.stdout

    # compare pulls the run it does not have, and diffs the items
    compared = cli.invoke(
        app, ["compare", "ci-run", "ci-base", "--format", "json", "--resamples", "200"]
    )
    assert compared.exit_code == 0, compared.stderr
    data = json.loads(compared.stdout)
    assert data["items"] == 6 and data["diff"]["counts"]["items"] == 6
    assert LocalStore().get_run("ci-base", DATASET) is not None

    # report pulls too (a third machine, an empty store)
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "reviewer"))
    out = tmp_path / "report.html"
    reported = cli.invoke(app, ["report", "ci-run", "--out", str(out)])
    assert reported.exit_code == 0, reported.stderr
    assert out.exists() and LocalStore().get_run("ci-run", DATASET) is not None

    # a name LangFuse does not know: one line, exit 2
    missing = cli.invoke(app, ["runs", "pull", "no-such-run"])
    assert missing.exit_code == 2
    assert len(missing.stderr.strip().splitlines()) == 1 and "no-such-run" in missing.stderr
