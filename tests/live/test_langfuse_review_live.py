"""The review-queue loop against a real LangFuse (v4.16+ has the annotation-queue API). Skipped
unless asked for explicitly, like ``test_langfuse_live``:

    EXTRACTION_EVAL_LIVE=1 LANGFUSE_PUBLIC_KEY=... LANGFUSE_SECRET_KEY=... \\
    LANGFUSE_BASE_URL=http://localhost:3000 .venv/bin/pytest tests/live -m live

Writes a dataset and an annotation queue named ``extraction-eval-live-review-<random>`` (a
queue keeps its items, so each session makes its own), a run's traces, and ``gold_verdict``
scores standing in for a reviewer (posted through the API with the queue's id; the items are
then marked completed, as the UI does).
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.langfuse import LangfuseDatasetBackend, close_client, connect
from extraction_eval.backends.langfuse.queues import find_queue, queue_items
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.conll_review import six_documents, spurious_entities

_ENV = {
    k: os.environ.get(k, "")
    for k in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL")
}
_ENABLED = os.environ.get("EXTRACTION_EVAL_LIVE") == "1" and all(_ENV.values())

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not _ENABLED,
        reason="live LangFuse test: set EXTRACTION_EVAL_LIVE=1 and the three LANGFUSE_* vars",
    ),
    pytest.mark.timeout(600),
]

runner = CliRunner()


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_review_loop_against_a_real_langfuse(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langfuse.api import AnnotationQueueStatus
    from langfuse.api.scores import CreateScoreRequest

    for key, value in _ENV.items():
        monkeypatch.setenv(key, value)
    name = f"extraction-eval-live-review-{uuid.uuid4().hex[:8]}"
    docs = six_documents(shared_data)
    backend = LangfuseDatasetBackend.from_env()
    try:
        backend.upload_items(name, [item for item, _ in docs])
    finally:
        backend.close()
    code, _, err = cli("run", "--dataset", name, "--name", "live-before")
    assert code == 0, err
    assert spurious_entities("live-before") == 6

    code, out, err = cli("gold", "triage", "live-before", "--queue", name)
    assert code == 0, err
    assert "sent 6 to LangFuse annotation queue" in " ".join(out.split())
    lf = connect()
    try:
        queue = find_queue(lf, name)
        assert queue is not None
        items = list(queue_items(lf, str(queue.id)))
        assert len(items) == 6 and {i.object_type for i in items} == {"TRACE"}
        config_id = queue.score_config_ids[0]
        for item in items:  # what a reviewer does in the UI
            lf.api.scores.create(
                request=[
                    CreateScoreRequest(
                        trace_id=item.object_id,
                        name="gold_verdict",
                        value="add_to_gold",
                        data_type="CATEGORICAL",
                        config_id=config_id,
                        queue_id=str(queue.id),
                        comment="named in the sentence",
                    )
                ]
            )
            lf.api.annotation_queues.update_queue_item(
                str(queue.id), item.id, status=AnnotationQueueStatus.COMPLETED
            )
    finally:
        close_client(lf)

    # Scores are ingested asynchronously: a pass may see only some of the six verdicts and
    # apply those (a dataset version each pass); the verdicts applied add up to six.
    code, out, err, applied, outs = 0, "", "", 0, []
    for _ in range(30):
        code, out, err = cli("gold", "apply-reviews", "--queue", name)
        assert code == 0, out + err
        outs.append(out)
        found = re.search(r"applied (\d+) add_to_gold", " ".join(out.split()))
        applied += int(found.group(1)) if found else 0
        if applied >= 6:
            break
        time.sleep(2)
    assert applied == 6, "\n".join(outs) + err
    code, _, err = cli("run", "--dataset", name, "--name", "live-after")
    assert code == 0, err
    assert spurious_entities("live-after") == spurious_entities("live-before") - 6
    run = LocalStore().get_run("live-after")
    assert run is not None and run.backend == "langfuse"
