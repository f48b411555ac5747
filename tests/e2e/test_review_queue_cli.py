"""Gold that gets better, locally: six CoNLL04 documents whose gold lacks one entity the offline
baseline finds; ``gold triage`` sends six candidates to a review file, six ``add_to_gold``
verdicts come back through ``gold apply-reviews`` as a new dataset version holding the six
entities, and the next run counts six fewer spurious entities. Bad input: a line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.conll_review import six_documents, spurious_entities

runner = CliRunner()
SECRET = "sk-proj-reviewqueue0123456789abcdef"


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_six_add_to_gold_verdicts_make_a_version_with_six_fewer_spurious_entities(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = six_documents(shared_data)
    with LocalStore() as store:
        store.upload_items("c6", [item for item, _ in docs])
    code, _, err = cli("run", "--dataset", "c6", "--name", "before")
    assert code == 0, err
    assert spurious_entities("before") == 6

    review = tmp_path / "q6.jsonl"
    code, out, err = cli("gold", "triage", "before", "--queue", "q6", "--file", str(review))
    assert code == 0, err
    assert f"sent 6 to review file {review}" in _flat(out) and "6 grounded_fp" in out
    assert _flat(out).count("misses?") == 6  # the terminal shows each question
    lines = [json.loads(x) for x in review.read_text(encoding="utf-8").splitlines()]
    assert sorted(x["object"]["name"] for x in lines) == sorted(n for _, n in docs)
    assert all(x["verdict"] is None and x["kind"] == "grounded_fp" for x in lines)
    assert "an entity the gold misses?" in lines[0]["question"]

    # triage again: nothing is added twice, the file is as it was
    code, out, err = cli("gold", "triage", "before", "--queue", "q6", "--file", str(review))
    assert code == 0, err
    assert "sent 0 to review file" in _flat(out) and "6 already in the queue" in _flat(out)
    assert len(review.read_text(encoding="utf-8").splitlines()) == 6

    # the reviewer says add_to_gold to all six; one comment carries an escape and a secret
    for x in lines:
        x.update(verdict="add_to_gold", reviewer="ann", comment="named in the text")
    lines[0]["comment"] = f"in the text\x1b[2J\nsee {SECRET}"
    review.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    code, out, err = cli("gold", "apply-reviews", "--queue", "q6", "--file", str(review))
    assert code == 0, err
    flat = _flat(out)
    assert "applied 6 add_to_gold -> dataset 'c6' version 2 (human-verified)" in flat
    assert "control characters replaced" in err and "a secret-looking value masked" in err
    assert SECRET not in out + err

    store = LocalStore()
    old = {i.id: i for i in store.get_items("c6", version=1)}
    new = {i.id: i for i in store.get_items("c6", version=2)}
    assert {i: x.expected for i, x in old.items()} == {x.id: x.expected for x, _ in docs}
    for item, removed in docs:
        names = [e.name for e in new[item.id].expected.entities]
        assert names == [e.name for e in item.expected.entities] + [removed]
        assert new[item.id].metadata["review"]["human_verified"] is True
    reasons = json.dumps([x.metadata for x in new.values()])
    assert SECRET not in reasons and "\\u001b" not in reasons and "by ann" in reasons

    # the terminal review shows each candidate and what became of it
    code, out, err = cli("gold", "review", "c6", "--queue", "q6", "--format", "json")
    assert code == 0, err
    states = {x["object"]["name"]: x["state"] for x in json.loads(out)}
    assert states == {n: "add_to_gold by ann (version 2)" for _, n in docs}

    # applied again: nothing new, no new version
    code, out, err = cli("gold", "apply-reviews", "--queue", "q6", "--file", str(review))
    assert code == 0, err
    assert "applied none" in out and "6 already applied" in _flat(out)
    assert store.get_dataset("c6").version == 2

    # the loop closes: the next run is scored on version 2
    code, _, err = cli("run", "--dataset", "c6", "--name", "after")
    assert code == 0, err
    assert spurious_entities("after") == spurious_entities("before") - 6

    # how much of the change is gold: the old run rescored on version 2, then compared
    code, out, err = cli("runs", "rescore", "before", "--dataset-version", "2")
    assert code == 0, err
    assert "the table above is what the gold change did; compare before@v2" in _flat(out)
    assert spurious_entities("before@v2") == spurious_entities("after")
    old_run = store.get_run("before")
    assert old_run is not None and old_run.dataset_version == 1  # the old run is untouched
    assert spurious_entities("before") == 6
    table = [ln.split() for ln in out.splitlines()]
    assert ["spurious", "objects", "6", "0", "-6"] in table  # the gold's doing, not the model's
    precision = next(row for row in table if row and row[0] == "entity_precision")
    assert precision[2] == "1.0000" and float(precision[3]) > 0
    code, out, err = cli("compare", "before@v2", "after", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["metrics"]["entity_precision"]["delta"] == 0  # same model

    # a reviewer changes a verdict after it was applied: one line, nothing changed
    lines[1]["verdict"] = "prediction_wrong"
    review.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    code, out, err = cli("gold", "apply-reviews", "--queue", "q6", "--file", str(review))
    assert code == 0, err
    changed = [ln for ln in err.splitlines() if "verdict changed" in ln]
    assert len(changed) == 1 and "after add_to_gold was applied in version 2" in changed[0]
    assert store.get_dataset("c6").version == 2


def test_bad_review_lines_and_unknown_candidates_are_a_line_each(
    shared_data: Path, tmp_path: Path
) -> None:
    docs = six_documents(shared_data)[:3]
    with LocalStore() as store:
        store.upload_items("c2", [item for item, _ in docs])
    assert cli("run", "--dataset", "c2", "--name", "r2")[0] == 0
    review = tmp_path / "q2.jsonl"
    assert cli("gold", "triage", "r2", "--queue", "q2", "--file", str(review))[0] == 0
    lines = [json.loads(x) for x in review.read_text(encoding="utf-8").splitlines()]
    lines[0]["verdict"] = "looks fine"  # not a verdict
    lines[1]["verdict"] = "unsure"
    lines[2]["verdict"] = "add_to_gold"  # on an item archived since
    gone = next(item for item, _ in docs if item.id == lines[2]["item_id"])
    with LocalStore() as store:
        store.upload_items("c2", [gone.model_copy(update={"status": "ARCHIVED"})])
    extra = {"key": "not-a-candidate", "verdict": "add_to_gold"}
    review.write_text(
        "{broken\n" + "".join(json.dumps(x) + "\n" for x in [*lines, extra]), encoding="utf-8"
    )
    code, out, err = cli("gold", "apply-reviews", "--queue", "q2", "--file", str(review))
    assert code == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 4, err
    assert f"dataset 'c2' has no item {gone.id!r} any more: 1 verdict(s) on it not applied" in err
    assert "q2.jsonl:1:" in warnings[0] and "skipped" in warnings[0]
    assert "'looks fine' is not one of add_to_gold" in err
    assert "no candidate 'not-a-candidate' was sent to this queue" in err
    assert "applied none" in out and "1 unsure" in out
    assert LocalStore().get_dataset("c2").version == 2  # the archiving; nothing applied


def test_a_judged_paraphrase_is_a_judge_disagreement_candidate(tmp_path: Path) -> None:
    """A run judged with --judge keeps its judged matches; triage asks about each one (string
    matching said no, the judge said yes) as a ``judge_disagreement``."""
    item = {
        "id": "j1",
        "text": "International Business Machines hired Ann.",
        "entities": [{"name": "International Business Machines", "type": "ORG"}],
        "relationships": [],
    }
    data = tmp_path / "j.jsonl"
    data.write_text(json.dumps(item) + "\n", encoding="utf-8")
    assert cli("datasets", "upload", "judged-triage", str(data))[0] == 0
    # a pipeline that answers "IBM": no string match, the rules judge accepts it
    pipe = tmp_path / "ibm_pipe.py"
    pipe.write_text(
        "def run(**_):\n"
        "    return {'entities': [{'name': 'IBM', 'type': 'ORG'}], 'relationships': []}\n",
        encoding="utf-8",
    )
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        code, _, err = cli(
            "run", "--dataset", "judged-triage", "--name", "jt", "--pipeline", "ibm_pipe:run",
            "--judge", "offline:rules",
        )  # fmt: skip
    finally:
        sys.path.remove(str(tmp_path))
    assert code == 0, err
    review = tmp_path / "jq.jsonl"
    code, _, err = cli(
        "gold", "triage", "jt", "--queue", "jq",
        "--kinds", "judge_disagreement", "--file", str(review),
    )  # fmt: skip
    assert code == 0, err
    lines = [json.loads(x) for x in review.read_text(encoding="utf-8").splitlines() if x]
    kinds = {(c.get("kind"), (c.get("object") or {}).get("name")) for c in lines}
    assert ("judge_disagreement", "IBM") in kinds, lines
