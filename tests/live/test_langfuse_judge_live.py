"""``run-experiment --judge offline:rules`` against a real LangFuse: the judged figures are
read back as LangFuse stored them, per item beside the string scores and on the experiment.
Skipped unless asked for explicitly, like the other live tests:

    EXTRACTION_EVAL_LIVE=1 LANGFUSE_PUBLIC_KEY=... LANGFUSE_SECRET_KEY=... \\
    LANGFUSE_BASE_URL=https://cloud.langfuse.com .venv/bin/pytest tests/live -m live

It writes only names starting with ``extraction-eval-live`` (a dataset, an experiment).
"""

from __future__ import annotations

import uuid

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    close_client,
    connect,
    read_back,
)
from extraction_eval.types import DatasetItem, Entity, Extraction
from tests.support.live_langfuse import BASE_URL as _BASE_URL
from tests.support.live_langfuse import PUBLIC_KEY as _PUBLIC_KEY
from tests.support.live_langfuse import SECRET_KEY as _SECRET_KEY
from tests.support.live_langfuse import api_get as _get
from tests.support.live_langfuse import live_marks

pytestmark = live_marks(300)

DATASET = "extraction-eval-live-smoke-judge"
ITEM = DatasetItem(
    id="live-judge-1",
    text="Barack Obama met Angela Merkel in Berlin.",
    expected=Extraction(
        entities=[
            Entity(name="Barack Obama", type="PER"),
            Entity(name="Angela Merkel", type="PER"),
            Entity(name="Berlin", type="LOC"),
        ]
    ),
)
# the model names people by their surname: string F1 1/3, the rules credit both
SURNAMES = {
    "entities": [
        {"name": "Obama", "type": "PER"},
        {"name": "Merkel", "type": "PER"},
        {"name": "Berlin", "type": "LOC"},
    ],
    "relationships": [],
}


def test_judged_scores_are_read_back_beside_the_string_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.cli import _run_app
    from extraction_eval.llm.fake import register_fake, unregister_fake

    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", _PUBLIC_KEY)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", _SECRET_KEY)
    monkeypatch.setenv("LANGFUSE_BASE_URL", _BASE_URL)
    lf = connect(public_key=_PUBLIC_KEY, secret_key=_SECRET_KEY, base_url=_BASE_URL, timeout_s=60)
    LangfuseDatasetBackend(lf).upload_items(DATASET, [ITEM])
    name = f"live-judge-{uuid.uuid4().hex[:8]}"
    register_fake("livejudge", {"items": {ITEM.id: SURNAMES}})
    try:
        result = CliRunner().invoke(
            _run_app,
            [
                *("--dataset", DATASET, "--name", name, "--model", "fake:livejudge"),
                *("--backend", "langfuse", "--judge", "offline:rules"),
            ],
        )
    finally:
        unregister_fake()
    assert result.exit_code == 0, result.stderr
    assert "judged scores not posted" not in result.stderr
    run = LocalStore().get_run(name, DATASET)
    assert run is not None and run.experiment_id
    (trace_id,) = [r.trace_id for r in LocalStore().iter_results(run.id)]
    assert trace_id
    judged = ["entity_f1_judged", "entity_typed_f1_judged", "relationship_f1_judged"]
    report = read_back(
        lf,
        trace_ids=[trace_id],
        score_names=["entity_f1", *judged],
        experiment_id=run.experiment_id,
        run_score_names=["entity_f1_judged", "judged_matches"],
        timeout_s=240,
        poll_s=5,
    )
    close_client(lf)
    assert report.ok, report.lines()
    # v3 returns a score's comment only with fields=details
    scores = {
        s["name"]: s
        for s in _get("v3/scores", traceId=trace_id, fields="details", limit="100")["data"]
    }
    assert scores["entity_f1"]["value"] == pytest.approx(1 / 3)  # the string score, unchanged
    assert scores["entity_f1_judged"]["value"] == pytest.approx(1.0)
    assert "judged matches=2" in scores["entity_f1_judged"]["comment"]
    assert "offline:rules" in scores["entity_f1_judged"]["comment"]
