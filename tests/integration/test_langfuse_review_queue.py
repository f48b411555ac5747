"""Review queues in LangFuse, through the real SDK 5 against the loopback fake server: ``gold
triage`` makes the queue (with the categorical ``gold_verdict`` config), one item per candidate
on the item's trace and a one-line comment stating the question; reviewers' verdicts come back
through ``gold apply-reviews`` as a new version of the LangFuse dataset. Bad input (a huge
queue, a verdict on a trace we never sent, two verdicts on one object, a deleted queue item):
one line each, nothing lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.conll_review import six_documents, spurious_entities
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

runner = CliRunner()
DATASET = "c6-lf"


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _flat(text: str) -> str:
    return " ".join(text.split())


def _lf_items(server: FakeLangfuse) -> dict[str, dict[str, object]]:
    return {i["metadata"]["extraction_eval"]["item_id"]: i for i in server.dataset_items(DATASET)}


def test_triage_fills_a_langfuse_queue_and_verdicts_come_back_as_a_dataset_version(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    docs = six_documents(shared_data)
    upload(server, [item for item, _ in docs], DATASET)
    use_langfuse(server, monkeypatch, "review")
    code, _, err = cli("run", "--dataset", DATASET, "--name", "lf-before")
    assert code == 0, err
    assert spurious_entities("lf-before") == 6
    store = LocalStore()
    run = store.get_run("lf-before")
    assert run is not None and run.backend == "langfuse"
    traces = {r.item_id: r.trace_id for r in store.results(run.id)}

    code, out, err = cli("gold", "triage", "lf-before", "--queue", "gold-gaps")
    assert code == 0, err
    assert "sent 6 to LangFuse annotation queue 'gold-gaps' (created" in _flat(out)

    # what the server received: the config, the queue with it, six items, six comments
    configs = [c for c in server.score_configs.values() if c["name"] == "gold_verdict"]
    assert len(configs) == 1 and configs[0]["dataType"] == "CATEGORICAL"
    labels = [c["label"] for c in configs[0]["categories"]]
    assert labels == ["add_to_gold", "prediction_wrong", "remove_from_gold", "unsure"]
    (queue,) = server.annotation_queues()
    assert queue["name"] == "gold-gaps" and queue["scoreConfigIds"] == [configs[0]["id"]]
    items = server.queue_items(queue["id"])
    assert sorted(i["objectId"] for i in items) == sorted(traces[i.id] for i, _ in docs)
    assert {i["objectType"] for i in items} == {"TRACE"} and len(items) == 6
    comments = {c["objectId"]: c["content"] for c in server.comments()}
    for item, removed in docs:
        text = comments[traces[item.id]]
        assert "\n" not in text and f"is '{removed}' (" in text
        assert text.endswith("an entity the gold misses?")

    # triage again: nothing added twice
    code, out, err = cli("gold", "triage", "lf-before", "--queue", "gold-gaps")
    assert code == 0, err
    assert "sent 0" in out and "6 already in the queue" in _flat(out)
    assert len(server.queue_items(queue["id"])) == 6 and len(server.comments()) == 6

    # nothing reviewed yet: nothing applied, six awaiting
    code, out, err = cli("gold", "apply-reviews", "--queue", "gold-gaps")
    assert code == 0, err
    assert "applied none" in out and "6 awaiting a verdict" in _flat(out)

    before = _lf_items(server)
    given = [
        server.review(i["id"], "add_to_gold", comment="it is named in the sentence") for i in items
    ]
    code, out, err = cli("gold", "apply-reviews", "--queue", "gold-gaps")
    assert code == 0, err
    assert "applied 6 add_to_gold -> dataset 'c6-lf' version" in _flat(out)
    version = _flat(out).split("dataset 'c6-lf' version ", 1)[1].split()[0]
    after = _lf_items(server)
    for item, removed in docs:
        names = [e["name"] for e in after[item.id]["expectedOutput"]["entities"]]  # type: ignore[index]
        assert names == [e.name for e in item.expected.entities] + [removed]
        meta = after[item.id]["metadata"]
        assert meta["review"]["human_verified"] is True  # type: ignore[index]
        assert "by reviewer-1: it is named in the sentence" in str(meta)
    # the run's own version (its dataset_version) still reads as it was
    from extraction_eval.analysis.stored import run_gold

    old = run_gold(store, run)
    assert {i: x.expected for i, x in old.items()} == {x.id: x.expected for x, _ in docs}
    assert before.keys() == after.keys()

    # idempotent
    code, out, err = cli("gold", "apply-reviews", "--queue", "gold-gaps")
    assert code == 0, err
    assert "applied none" in out and "6 already applied" in _flat(out)

    # a reviewer changes a verdict after it was applied: one line, the gold stays
    server.change_review(given[0]["id"], "prediction_wrong")
    code, out, err = cli("gold", "apply-reviews", "--queue", "gold-gaps")
    assert code == 0, err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert (
        f"verdict changed to prediction_wrong after add_to_gold was applied in version {version}"
        in _flat(line)
    )
    assert "5 already applied" in _flat(out) and _lf_items(server) == after

    # the loop closes: the next LangFuse run is scored on the new version
    code, _, err = cli("run", "--dataset", DATASET, "--name", "lf-after")
    assert code == 0, err
    assert spurious_entities("lf-after") == spurious_entities("lf-before") - 6

    # the old run's outputs on the new LangFuse version: the six are the gold's doing
    code, out, err = cli("runs", "rescore", "lf-before", "--dataset-version", version)
    assert code == 0, err
    assert ["spurious", "objects", "6", "0", "-6"] in [ln.split() for ln in out.splitlines()]


def test_conflicting_unknown_and_lost_verdicts_are_a_line_each_in_a_huge_queue(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    docs = six_documents(shared_data)[:3]
    upload(server, [item for item, _ in docs], DATASET)
    use_langfuse(server, monkeypatch, "review-bad")
    assert cli("run", "--dataset", DATASET, "--name", "lf-bad")[0] == 0
    # a queue of that name already holds 10,000 items of someone else's
    assert cli("gold", "triage", "lf-bad", "--queue", "big", "--limit", "1")[0] == 0
    (queue,) = server.annotation_queues()
    server.seed_queue_items(queue["id"], [f"other-{n}" for n in range(10_000)])
    server.fail_next("/api/public/comments", 1, status=400, method="POST")
    code, out, err = cli("gold", "triage", "lf-bad", "--queue", "big")
    assert code == 0, err
    assert "sent 2" in out and "1 already in the queue" in _flat(out)
    # a comment LangFuse refused: the item is queued (and known), the question said here
    (line,) = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert "queued, but its question could not be added as a comment" in line
    assert line.endswith("an entity the gold misses?")
    assert "note: queue 'big' also holds 10,000 items this tool did not send" in _flat(err)
    ours = [i for i in server.queue_items(queue["id"]) if not i["objectId"].startswith("other")]
    assert len(ours) == 3

    server.review(ours[0]["id"], "add_to_gold", author="ann")
    server.review(ours[0]["id"], "prediction_wrong", author="bob")  # two different verdicts
    server.review(ours[1]["id"], "remove_from_gold", author="ann")  # not in gold: a line
    others = [i for i in server.queue_items(queue["id"]) if i["objectId"] == "other-7"]
    server.review(others[0]["id"], "add_to_gold")  # a verdict on a trace we never sent
    server.remove_queue_item(ours[2]["id"])  # deleted in the UI
    code, out, err = cli("gold", "apply-reviews", "--queue", "big")
    assert code == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 4, err
    assert any(
        "reviewed twice with different verdicts (add_to_gold, prediction_wrong)" in w
        for w in warnings
    )
    assert any("on trace other-7: no candidate of this tool was sent" in w for w in warnings)
    assert any("is gone from the queue" in w for w in warnings)
    assert any("remove_from_gold on" in w and "not in the gold" in w for w in warnings)
    assert "applied none" in out
    assert (
        len(server.requests_to(f"/api/public/annotation-queues/{queue['id']}/items", "GET")) > 100
    )
