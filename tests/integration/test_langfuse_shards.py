"""LangFuse-mode shards through the real SDK and the loopback fake server: N shard runs write
one experiment (each item's trace linked once), post no run-level scores of their own, and
``runs finalize`` on the merged store posts the run's scores once, equal to a one-process
run's."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    close_client,
    langfuse_item_id,
)
from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.partition import Shard
from extraction_eval.experiments.run import run_experiment
from extraction_eval.experiments.shards import finalize_run, merge_runs
from extraction_eval.pipeline.base import PipelineConfig
from tests.support.langfuse_env import use_langfuse
from tests.support.langfuse_server import FakeLangfuse, client_for

DATASET = "extraction-eval"
PIPE = "tests.support.pipelines:neighbour_entity"


def experiment_id_for(server: FakeLangfuse, dataset_id: str, run_name: str) -> str:
    """LangFuse's stable derivation (SDK ``_create_experiment_id``)."""
    payload = json.dumps(
        ["langfuse-experiment-v1", server.project_id, dataset_id, run_name],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def run_scores_posted(server: FakeLangfuse, experiment_id: str) -> list[dict[str, Any]]:
    return [s for s in server.posted_scores if s.get("datasetRunId") == experiment_id]


def test_shards_write_one_experiment_and_finalize_posts_the_run_scores_once(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    items = LocalStore().get_items(DATASET)[:12]
    lf = client_for(server, "upload")
    try:
        LangfuseDatasetBackend(lf).upload_items(DATASET, items)
    finally:
        close_client(lf)
    dataset_id = str(server.datasets[DATASET]["id"])
    monkeypatch.setenv("E2E_FAIL", items[4].id)  # one failed item, in whichever shard
    pipeline = PipelineConfig(pipeline=PIPE)

    shard_stores = []
    for index in (1, 2, 3):  # three "machines": own keys, own local store
        use_langfuse(server, monkeypatch, f"shard-{index}")
        store = LocalStore(tmp_path / f"shard-{index}" / "store.db")
        config = RunConfig(dataset=DATASET, name="wide", pipeline=pipeline, shard=Shard(index, 3))
        outcome = run_experiment(config, store=store)
        assert outcome.summary.items == len(Shard(index, 3).select(items))  # the shard's own
        shard_stores.append(store)
    wide = experiment_id_for(server, dataset_id, "wide")
    assert {s.get_run("wide", DATASET).experiment_id for s in shard_stores} == {wide}  # type: ignore[union-attr]
    assert run_scores_posted(server, wide) == []  # no shard posts the run's scores

    # each item's trace linked exactly once, all in the one experiment
    roots = [s for s in server.spans_named("experiment-item-run")]
    assert {s["attributes"]["langfuse.experiment.id"] for s in roots} == {wide}
    linked = Counter(s["attributes"]["langfuse.experiment.item.id"] for s in roots)
    assert linked == Counter(langfuse_item_id(DATASET, i.id) for i in items)

    target = shard_stores[0]
    merge_runs(target, "wide", [shard_stores[1].path, shard_stores[2].path])
    use_langfuse(server, monkeypatch, "finalize")
    final = finalize_run(target, "wide")
    assert final.summary.items == 12 and final.summary.errors == 1
    run = target.get_run("wide", DATASET)
    assert run is not None and run.status == "finished" and run.backend == "langfuse"
    assert {r.trace_id for r in target.results(run.id)} == {s["trace_id"] for s in roots}

    posted = run_scores_posted(server, wide)
    assert Counter(s["name"] for s in posted) == Counter(s.name for s in final.summary.run_scores)
    assert {s["name"]: s["value"] for s in posted} == {
        s.name: float(s.value) for s in final.summary.run_scores
    }
    assert server.requests_to("/api/public/v3/scores", "GET")  # finalize read them back

    # the same items in one process: the same run scores on its own experiment
    use_langfuse(server, monkeypatch, "single")
    single = run_experiment(
        RunConfig(dataset=DATASET, name="single", pipeline=pipeline),
        store=LocalStore(tmp_path / "single" / "store.db"),
    )
    one = run_scores_posted(server, experiment_id_for(server, dataset_id, "single"))
    assert {s["name"]: s["value"] for s in one} == {s["name"]: s["value"] for s in posted}
    assert single.summary.values == final.summary.values
    assert single.summary.report["taxonomy"]["context_bleed"] > 0


def test_finalize_of_a_langfuse_run_without_experiment_id_is_refused(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A run mirrored without an experiment (no item ever finished) cannot post run scores:
    finalize says so in one line instead of pretending."""
    from extraction_eval.errors import UsageError

    items = LocalStore().get_items(DATASET)[:2]
    lf = client_for(server, "upload-2")
    try:
        LangfuseDatasetBackend(lf).upload_items(DATASET, items)
    finally:
        close_client(lf)
    store = LocalStore(tmp_path / "x" / "store.db")
    use_langfuse(server, monkeypatch, "noexp")
    run_experiment(
        RunConfig(dataset=DATASET, name="n", pipeline=PipelineConfig(pipeline=PIPE)), store=store
    )
    run = store.get_run("n", DATASET)
    assert run is not None
    with store._tx(write=True) as conn:  # as if no item had reported its experiment
        conn.execute("UPDATE runs SET experiment_id = NULL WHERE id = ?", (run.id,))
    with pytest.raises(UsageError, match="no LangFuse experiment id"):
        finalize_run(store, "n")
