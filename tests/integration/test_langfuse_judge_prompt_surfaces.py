"""The LangFuse judge prompt on every command that takes ``--judge`` (real SDK, loopback fake
LangFuse): with keys set, ``score``, ``compare``, ``report`` and ``matrix`` judge with the
prompt LangFuse serves at ``--judge-prompt-label`` (created from the built-in text when
missing, read once however many runs are judged), so their judged figures carry the
identity a calibration under keys measured; a LangFuse that cannot give it is one line and
the built-in text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.judge.prompt import BUILTIN, JUDGE_PROMPT_NAME, SYSTEM
from extraction_eval.llm.fake import FakeProvider, register_fake, unregister_fake
from tests.support.judging import last_word_answers, last_word_files
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

runner = CliRunner()
DATASET = "extraction-eval"
STAGING = [
    {"role": "system", "content": "Staging judge: same entity? Answer JSON verdicts only."},
    {"role": "user", "content": "Text: {{context}}\nPairs:\n{{pairs}}"},
]
LF_IDENTITY = f"fake:judgebot prompt langfuse:{JUDGE_PROMPT_NAME}@1/{BUILTIN.content_hash}"


@pytest.fixture
def fakes() -> Iterator[None]:
    yield
    unregister_fake()


def _judge() -> FakeProvider:
    """A scripted judge: every pair it is asked is the same entity."""

    def answer(request: Any) -> dict[str, Any]:
        user = request.messages[-1].content
        pairs = [x for x in user.splitlines() if x[:1].isdigit() and " vs " in x]
        verdicts = [{"id": k, "same": True, "reason": "scripted"} for k in range(1, len(pairs) + 1)]
        return {"json": {"verdicts": verdicts}}

    return register_fake("judgebot", {"default": answer})


def _last_word(n: int) -> dict[str, Any]:
    """Outputs naming every entity by its last word: the judge has pairs to settle."""
    return last_word_answers(LocalStore().get_items(DATASET)[:n])


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """Gold and last-word predictions of three items, as ``score`` reads them."""
    return last_word_files(tmp_path, LocalStore().get_items(DATASET)[:3])


def _local_runs(*names: str) -> None:
    """Stored local runs (before any key is set) whose entities are named by a last word."""
    register_fake("lwrun", {"items": _last_word(3)})
    for name in names:
        done = runner.invoke(
            app,
            ["run", "--backend", "local", "--model", "fake:lwrun", "--limit", "3", "--name", name],
        )
        assert done.exit_code == 0, done.output


def _systems(fake: FakeProvider) -> set[str]:
    return {m.content for c in fake.calls for m in c.request.messages if m.role == "system"}


def test_score_judges_with_the_langfuse_prompt_created_from_the_builtin_text(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fakes: None
) -> None:
    gold, pred = _files(tmp_path)
    fake = _judge()
    use_langfuse(server, monkeypatch, "judge-surfaces-score")
    done = runner.invoke(
        app,
        [
            "score",
            "--gold",
            str(gold),
            "--predictions",
            str(pred),
            "--format",
            "json",
            "--judge",
            "fake:judgebot",
            "--resamples",
            "0",
        ],
    )
    assert done.exit_code == 0, done.output
    (version,) = server.prompt_versions(JUDGE_PROMPT_NAME)
    assert "production" in version["labels"]
    assert "created in LangFuse" in done.stderr
    report = json.loads(done.stdout)
    assert report["judged"]["judge"] == LF_IDENTITY
    assert fake.calls and _systems(fake) == {SYSTEM}


def test_score_reads_the_judge_prompt_at_the_label_given(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fakes: None,
    lf: Any,
) -> None:
    gold, pred = _files(tmp_path)
    fake = _judge()
    use_langfuse(server, monkeypatch, "judge-surfaces-label")
    lf.create_prompt(
        name=JUDGE_PROMPT_NAME,
        prompt=[dict(m) for m in BUILTIN.messages],
        labels=["production"],
        type="chat",
    )
    lf.create_prompt(name=JUDGE_PROMPT_NAME, prompt=STAGING, labels=["staging"], type="chat")
    done = runner.invoke(
        app,
        [
            "score",
            "--gold",
            str(gold),
            "--predictions",
            str(pred),
            "--format",
            "json",
            "--judge",
            "fake:judgebot",
            "--judge-prompt-label",
            "staging",
            "--resamples",
            "0",
        ],
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["judged"]["judge"].startswith(
        f"fake:judgebot prompt langfuse:{JUDGE_PROMPT_NAME}@2/"
    )
    assert _systems(fake) == {STAGING[0]["content"]}


def test_compare_reads_the_prompt_once_for_both_runs(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, fakes: None
) -> None:
    _local_runs("lf-a", "lf-b")
    fake = _judge()
    use_langfuse(server, monkeypatch, "judge-surfaces-compare")
    done = runner.invoke(
        app, ["compare", "lf-a", "lf-b", "--judge", "fake:judgebot", "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    assert done.stderr.count("created in LangFuse") == 1
    assert len(server.prompt_versions(JUDGE_PROMPT_NAME)) == 1
    judged = json.loads(done.stdout)["judged"]
    assert [judged[name]["judge"] for name in ("lf-a", "lf-b")] == [LF_IDENTITY] * 2
    assert fake.calls and _systems(fake) == {SYSTEM}


def test_report_with_langfuse_down_says_it_once_and_uses_the_builtin_text(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fakes: None
) -> None:
    _local_runs("down-a", "down-b")
    fake = _judge()
    use_langfuse(server, monkeypatch, "judge-surfaces-down")
    server.down()
    done = runner.invoke(
        app,
        [
            "report",
            "down-a",
            "down-b",
            "--out",
            str(tmp_path / "r.html"),
            "--judge",
            "fake:judgebot",
        ],
    )
    assert done.exit_code == 0, done.output
    assert done.stderr.count("not read from LangFuse") == 1
    assert "built-in judge-v1 is used" in done.stderr
    store = LocalStore()
    for name in ("down-a", "down-b"):
        run = store.get_run(name, DATASET)
        assert run is not None
        (kept,) = store.run_judged(run.id)
        assert kept["judge"] == f"fake:judgebot prompt {BUILTIN.ref}"
    assert fake.calls and _systems(fake) == {SYSTEM}


def test_a_langfuse_matrix_judges_every_cell_with_the_langfuse_prompt(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, fakes: None
) -> None:
    items = LocalStore().get_items(DATASET)[:2]
    upload(server, items, DATASET)
    register_fake("mxlf", {"items": _last_word(2)})
    fake = _judge()
    use_langfuse(server, monkeypatch, "judge-surfaces-matrix")
    done = runner.invoke(
        app,
        [
            "matrix",
            "--model",
            "fake:mxlf",
            "--temperature",
            "0",
            "--temperature",
            "0.5",
            "--limit",
            "2",
            "--name",
            "mxlf",
            "--judge",
            "fake:judgebot",
        ],
    )
    assert done.exit_code == 0, done.output
    assert done.stderr.count("created in LangFuse") == 1
    store = LocalStore()
    cells = [r for r in store.list_runs(DATASET) if r.name.startswith("mxlf/")]
    assert len(cells) == 2
    assert [store.run_judged(r.id)[0]["judge"] for r in cells] == [LF_IDENTITY] * 2
    assert fake.calls and _systems(fake) == {SYSTEM}


def test_the_label_needs_a_judge() -> None:
    done = runner.invoke(app, ["score", "--judge-prompt-label", "staging"])
    assert done.exit_code == 2 and "--judge-prompt-label needs --judge MODEL" in done.stderr


def test_calibrate_measures_the_judge_prompt_at_the_label_given(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fakes: None, lf: Any
) -> None:
    fake = _judge()
    use_langfuse(server, monkeypatch, "judge-surfaces-calibrate")
    lf.create_prompt(name=JUDGE_PROMPT_NAME, prompt=STAGING, labels=["staging"], type="chat")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"a": "IBM", "b": "I.B.M.", "same": True}) + "\n", "utf-8")
    done = runner.invoke(
        app,
        [
            "judge",
            "calibrate",
            "--judge",
            "fake:judgebot",
            "--pairs",
            str(pairs),
            "--judge-prompt-label",
            "staging",
            "--format",
            "json",
            "--resamples",
            "0",
        ],
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["judge"].startswith(
        f"fake:judgebot prompt langfuse:{JUDGE_PROMPT_NAME}@1/"
    )
    assert _systems(fake) == {STAGING[0]["content"]}


@pytest.mark.parametrize("command", ["run", "compare", "matrix"])
def test_the_label_needs_a_judge_everywhere(command: str) -> None:
    args = {
        "run": ["run"],
        "compare": ["compare", "x", "y"],
        "matrix": ["matrix", "--model", "offline:baseline"],
    }[command]
    done = runner.invoke(app, [*args, "--judge-prompt-label", "staging"])
    assert done.exit_code == 2 and "--judge-prompt-label needs --judge MODEL" in done.stderr


@pytest.mark.parametrize(
    "command",
    [["score"], ["compare", "x", "y"], ["run"], ["matrix", "--model", "offline:baseline"]],
)
def test_a_label_langfuse_could_not_have_is_refused_before_any_work(command: list[str]) -> None:
    done = runner.invoke(
        app, [*command, "--judge", "offline:rules", "--judge-prompt-label", "prod\nuction"]
    )
    assert done.exit_code == 2
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: --judge-prompt-label must be a LangFuse label")
