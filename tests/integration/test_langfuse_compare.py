"""``compare`` of two LangFuse-mode runs: the gold is read from the LangFuse dataset (through
the real SDK, against the loopback fake server), not from the local store, by the paired
comparison and the item diff alike; without keys it is refused in one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

DATASET = "lf-only-compare"  # exists in LangFuse only: the local store has no such dataset
PIPE = "tests.support.pipelines:first_entity"
cli = CliRunner()


def test_compare_two_langfuse_runs_reads_the_gold_from_langfuse(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = LocalStore().get_items("extraction-eval")[:8]
    upload(server, items, DATASET)
    use_langfuse(server, monkeypatch, "compare")
    for name, extra in (("lf-first", ["--pipeline", PIPE]), ("lf-base", [])):
        result = cli.invoke(_run_app, ["--dataset", DATASET, "--name", name, *extra])
        assert result.exit_code == 0, result.stderr
    store = LocalStore()
    runs = {name: store.get_run(name, DATASET) for name in ("lf-first", "lf-base")}
    assert all(r is not None and r.backend == "langfuse" for r in runs.values())
    assert DATASET not in {d.name for d in store.list_datasets()}

    before = len(server.requests_to("/api/public/v2/datasets/*", "GET")) + len(
        server.requests_to("/api/public/datasets/*", "GET")
    )
    result = cli.invoke(
        app, ["compare", "lf-first", "lf-base", "--format", "json", "--resamples", "500"]
    )
    assert result.exit_code == 0, result.stderr
    after = len(server.requests_to("/api/public/v2/datasets/*", "GET")) + len(
        server.requests_to("/api/public/datasets/*", "GET")
    )
    assert after > before  # the gold came from the server
    data = json.loads(result.stdout)
    assert data["items"] == 8 and data["a"]["backend"] == "langfuse"
    for side, name in (("a", "lf-first"), ("b", "lf-base")):
        run = runs[name]
        assert run is not None and run.summary is not None
        assert data["metrics"]["entity_f1"][side] == pytest.approx(
            run.summary["values"]["entity_f1"]
        )
    assert data["metrics"]["entity_recall"]["delta"] > 0  # first entity only -> baseline
    # the item diff reads the same gold as the paired part (not the local store, which has
    # no such dataset): every paired item is diffed, the changed ones are listed
    diff = data["diff"]
    assert diff["gold_missing"] is None and diff["no_gold"] == []
    assert diff["counts"]["items"] == 8 and diff["items"]

    # without keys: one line naming what is needed, exit 2, nothing else done
    for var in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL"):
        monkeypatch.delenv(var)
    result = cli.invoke(app, ["compare", "lf-first", "lf-base"])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "LangFuse mode" in lines[0] and "LANGFUSE_PUBLIC_KEY" in lines[0]
