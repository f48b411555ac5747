"""Local prompt management end to end: push a labelled prompt, run with it through the fake
model, and see it sent, recorded, and refused when it does not exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.fake_log import read_fake_log

runner = CliRunner()
MARK = "MARK-STAGING"


@pytest.fixture
def fake_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake answers by rule 0 exactly when the user message it received has MARK."""
    script = {
        "default": {"entities": [], "relationships": []},
        "rules": [{"contains": MARK, "response": {"entities": [], "relationships": []}}],
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_SCRIPT", str(path))
    monkeypatch.setenv("EXTRACTION_EVAL_FAKE_LOG", str(log))
    return log


def _push(tmp_path: Path, user: str, *labels: str) -> str:
    system, user_file = tmp_path / "s.txt", tmp_path / "u.txt"
    system.write_text("Extract {{entity_types}} and {{relationship_types}} as JSON.\n")
    user_file.write_text(user)
    args = ["prompts", "push", "--system", str(system), "--user", str(user_file)]
    for label in labels:
        args += ["--label", label]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["run", "--model", "fake:e2e", "--limit", "3", *args])
    return result.exit_code, result.stdout, result.stderr


def test_labelled_local_prompt_is_what_the_model_receives_and_is_recorded(
    tmp_path: Path, fake_log: Path
) -> None:
    out = _push(tmp_path, f"{MARK}\n<text>{{{{text}}}}</text>\n", "staging")
    assert "new version 1" in out and "local store" in out

    code, stdout, stderr = _run("--name", "staged", "--prompt-label", "staging")
    assert code == 0, stderr
    calls = read_fake_log(fake_log)
    assert len(calls) == 3 and all(c["rule"] == 0 for c in calls)  # the pushed text was sent
    assert "extraction v1 label=staging (local-store" in stdout

    run = LocalStore().get_run("staged", "extraction-eval")
    assert run is not None
    assert run.config["prompt"] == {
        "name": "extraction",
        "label": "staging",
        "version": 1,
        "source": "local-store",
    }
    shown = runner.invoke(app, ["runs", "show", "staged"])
    assert "prompt: extraction v1 label=staging (local-store" in shown.stdout

    # Without a label the bundled template runs: the model is called again (another prompt
    # hash, so no cache hit) and does not get the marker.
    code, stdout, stderr = _run("--name", "bundled")
    assert code == 0, stderr
    later = read_fake_log(fake_log)[3:]
    assert len(later) == 3 and all(c["rule"] is None for c in later)
    bundled = LocalStore().get_run("bundled", "extraction-eval")
    assert bundled is not None and bundled.config["prompt"]["source"] == "bundled"
    assert bundled.config["prompt_hash"] != run.config["prompt_hash"]

    # --prompt-version picks a version without a label
    code, _, stderr = _run("--name", "by-version", "--prompt-version", "1")
    assert code == 0, stderr
    by_version = LocalStore().get_run("by-version", "extraction-eval")
    assert by_version is not None
    assert (by_version.config["prompt"]["version"], by_version.config["prompt"]["label"]) == (
        1,
        None,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prompt-label", "nope"], "error: prompt 'extraction' has no label 'nope'"),
        (["--prompt-version", "9"], "error: prompt 'extraction' has no version 9"),
        (["--prompt-name", "other", "--prompt-label", "staging"], "error: prompt 'other' not"),
        (
            ["--model", "offline:baseline", "--prompt-label", "staging"],
            "error: --prompt-label has no effect: offline:baseline sends no prompt",
        ),
    ],
)
def test_unknown_prompt_stops_before_the_run_with_one_line(
    tmp_path: Path, fake_log: Path, args: list[str], message: str
) -> None:
    _push(tmp_path, "<text>{{text}}</text>", "staging")
    code, _, stderr = _run("--name", "never", *args)
    assert code == 2
    assert stderr.strip().startswith(message) and len(stderr.strip().splitlines()) == 1
    assert LocalStore().list_runs() == [] and read_fake_log(fake_log) == []


def test_resume_refuses_a_label_moved_to_other_words(tmp_path: Path, fake_log: Path) -> None:
    _push(tmp_path, "<text>{{text}}</text>", "staging")
    assert _run("--name", "r", "--prompt-label", "staging")[0] == 0
    code, _, stderr = _run("--name", "r", "--prompt-label", "staging", "--resume")
    assert code == 0, stderr  # unchanged prompt: resumes
    out = _push(tmp_path, f"{MARK} <text>{{{{text}}}}</text>", "staging")
    assert "new version 2" in out
    code, _, stderr = _run("--name", "r", "--prompt-label", "staging", "--resume")
    assert code == 2 and "prompt_hash differ" in stderr
    assert not any(c["rule"] == 0 for c in read_fake_log(fake_log))  # v2 never sent


def test_prompts_list_and_show_read_the_local_store(tmp_path: Path) -> None:
    _push(tmp_path, "<text>{{text}}</text>", "staging", "production")
    _push(tmp_path, "Text: {{text}}", "staging")
    listed = runner.invoke(app, ["prompts", "list"])
    assert listed.exit_code == 0, listed.stderr
    assert "latest=2, production=1, staging=2" in listed.stdout
    versions = runner.invoke(app, ["prompts", "list", "--name", "extraction"])
    assert "latest, staging" in versions.stdout
    shown = runner.invoke(app, ["prompts", "show", "--label", "production"])
    assert shown.exit_code == 0, shown.stderr
    assert "source=local-store version=1 label=production" in shown.stdout
    assert "<text>{{text}}</text>" in shown.stdout
    bundled = runner.invoke(app, ["prompts", "show"])
    assert "source=bundled version=None" in bundled.stdout
    missing = runner.invoke(app, ["prompts", "show", "--label", "nope"])
    assert missing.exit_code == 2 and "has no label 'nope'" in missing.stderr
