"""A configured key inside a *valid* answer (a proxy's, a pipeline's), in a pipeline's
``warnings.warn``, and broken over two lines in an error: it must reach no output (the store's
bytes, ``runs show``, both exports, the report, the terminal, logs, what LangFuse received)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore, default_home
from extraction_eval.cli import app
from tests.support.hostile_pipelines import KEY_ENV
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import running_fake_langfuse
from tests.support.openai_server import LoopbackServer
from tests.support.tally import Tally

REPO = Path(__file__).resolve().parents[2]
DATASET = "extraction-eval"
KEYS = {
    "sk-shaped": "sk-proj-ANSWERED-4f1c9e27d3",  # the shape rule masks its first half alone
    "odd-shaped": "vq27-odd-shaped-credential-81",  # only the value rule finds it
}
MASKED = "a configured secret or token-shaped text masked as *** in:"
runner = CliRunner()


def _halves(key: str) -> tuple[str, str]:
    half = len(key) // 2
    return key[:half], key[half:]


def _found(text: str, key: str) -> int:
    """Occurrences of the key, or of either half of it (a key masked by half is found)."""
    return text.count(key) + sum(text.count(part) for part in _halves(key))


def _store_bytes() -> str:
    return b"".join(p.read_bytes() for p in default_home().glob("store.db*")).decode("latin-1")


def _outputs(run: str, tmp: Path) -> dict[str, str]:
    """Everything a run can be read back as, and the store's bytes."""
    report = tmp / f"{run}.html"
    outputs = {
        "runs show": runner.invoke(app, ["runs", "show", run, "--worst"]).output,
        "export jsonl": runner.invoke(app, ["runs", "export", run]).output,
        "export csv": runner.invoke(app, ["runs", "export", run, "--format", "csv"]).output,
        "report": runner.invoke(app, ["report", run, "--out", str(report)]).output,
    }
    outputs["report html"] = report.read_text(encoding="utf-8") if report.exists() else ""
    assert outputs["report html"], outputs["report"]
    outputs["store"] = _store_bytes()
    return outputs


def _leaks(outputs: dict[str, str], key: str, tally: Tally) -> dict[str, int]:
    leaks = {name: _found(text, key) for name, text in outputs.items() if _found(text, key)}
    tally.secrets(sum(leaks.values()))
    tally.input(held=not leaks)
    return leaks


def _answer_with(key: str) -> Callable[[dict[str, Any]], str]:
    """A proxy that puts the key into every (valid) answer: whole, and over two lines."""
    head, tail = _halves(key)
    answer = {
        "entities": [
            {"name": f"Authorization: Bearer {key}", "type": "header"},
            {"name": f"{head}\n{tail}", "type": "header"},
        ],
        "relationships": [],
    }
    return lambda _body: json.dumps(answer)


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
def test_a_key_a_proxy_puts_in_a_valid_answer_reaches_no_output(
    key: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    tally: Tally,
) -> None:
    """Before: the answer parsed, so nothing redacted it: the key was in ``output``,
    ``raw_output``, the response cache, both exports, the report and ``runs show``."""
    monkeypatch.setenv("OPENAI_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    runs = {}
    with LoopbackServer(answer=_answer_with(key)) as server:
        for name in ("leak", "leak-cached"):  # the second run answers from the cache
            runs[name] = runner.invoke(
                app,
                [
                    *("run", "--name", name, "--limit", "3", "--model", "openai:m"),
                    *("--base-url", server.url, "--concurrency", "1"),
                ],
            )
            assert runs[name].exit_code == 0, runs[name].output
        calls = len(server.chat_requests)
    assert calls >= 3  # the proxy did answer with the key (else this proves nothing)
    outputs = _outputs("leak", tmp_path) | {f"{n} output": r.output for n, r in runs.items()}
    outputs["logs"] = caplog.text
    leaks = _leaks(outputs, key, tally)
    store = LocalStore()
    for name in runs:
        run = store.get_run(name, DATASET)
        assert run is not None
        results = store.results(run.id)
        firsts = [r.output.entities[0].name for r in results if r.output and r.output.entities]
        assert len(firsts) == len(results) == 3  # the valid answers were kept, masked
        assert set(firsts) == {"Authorization: Bearer ***"}, firsts
        assert all(r.cache_hit for r in results) == (name == "leak-cached")
    # the fresh answers say they were masked (their scores count the masked text); the cached
    # ones were masked before they were cached
    fresh = store.results(store.get_run("leak", DATASET).id)  # type: ignore[union-attr]
    marks = [s.comment for r in fresh for s in r.scores if s.name == "secret_masked"]
    assert marks == [f"{MASKED} output, raw_output"] * 3, marks
    assert "3 items' answers held a configured secret" in " ".join(runs["leak"].output.split())
    assert not leaks, leaks


def test_a_key_in_a_valid_answer_never_reaches_langfuse(
    monkeypatch: pytest.MonkeyPatch, tally: Tally
) -> None:
    """Before: the generation's output and the item trace's output carried the key."""
    key = KEYS["odd-shaped"]
    with running_fake_langfuse() as lf:
        upload(lf, LocalStore().get_items(DATASET)[:2], DATASET)
        use_langfuse(lf, monkeypatch, "answer-key")
        monkeypatch.setenv("OPENAI_API_KEY", key)
        with LoopbackServer(answer=_answer_with(key)) as model:
            result = runner.invoke(
                app,
                [
                    *("run", "--name", "answer-lf", "--model", "openai:m"),
                    *("--base-url", model.url),
                ],
            )
        received = json.dumps(
            [(r.path, r.query, r.body) for r in lf.requests], default=str, ensure_ascii=False
        )
    assert result.exit_code == 0, result.output
    assert "answer-lf" in received  # what we scan is the run's real traffic
    leaks = _leaks({"langfuse": received, "run output": result.output}, key, tally)
    assert "Bearer ***" in received  # the answers did arrive, masked
    assert not leaks, leaks


def test_a_key_configured_here_is_masked_in_a_pulled_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tally: Tally
) -> None:
    """``runs pull`` stores what LangFuse holds of another machine's run; a value that is a
    key here (not there, so nothing masked it) was stored and exported as it came."""
    key = KEYS["odd-shaped"]
    with running_fake_langfuse() as lf:
        upload(lf, LocalStore().get_items(DATASET)[:2], DATASET)
        use_langfuse(lf, monkeypatch, "pull-key")
        monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "ci"))
        monkeypatch.setenv("ANSWER_TEXT", key)  # no secret's name: stored there as it is
        made = runner.invoke(
            app,
            [
                *("run", "--name", "pulled"),
                *("--pipeline", "tests.support.hostile_pipelines:text_in_answer"),
            ],
        )
        assert made.exit_code == 0, made.output
        monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "laptop"))
        monkeypatch.setenv(KEY_ENV, key)  # a key on this machine
        pulled = runner.invoke(app, ["runs", "pull", "pulled"])
        assert pulled.exit_code == 0, pulled.output
        outputs = _outputs("pulled", tmp_path) | {"pull output": pulled.output}  # reads gold
    run = LocalStore().get_run("pulled", DATASET)
    assert run is not None
    names = [e.name for r in LocalStore().results(run.id) if r.output for e in r.output.entities]
    leaks = _leaks(outputs, key, tally)
    assert names == ["***", "***"], names  # both items pulled, their answers masked
    assert not leaks, leaks


def test_a_key_configured_here_is_masked_in_a_merged_shard(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tally: Tally
) -> None:
    """``runs merge`` folds in another machine's rows as they are: a value that is a key
    here (not there) was stored, in outputs, score comments and taxonomy labels."""
    key = KEYS["odd-shaped"]
    monkeypatch.setenv("ANSWER_TEXT", key)  # no secret's name where shard 2 runs
    args = ["run", "--name", "m", "--limit", "6"]
    pipeline = ["--pipeline", "tests.support.hostile_pipelines:text_in_answer"]
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "ci"))
    there = runner.invoke(app, [*args, *pipeline, "--shard", "2/2"])
    assert there.exit_code == 0, there.output
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "laptop"))
    monkeypatch.setenv(KEY_ENV, key)  # a key on this machine
    here = runner.invoke(app, [*args, *pipeline, "--shard", "1/2"])
    assert here.exit_code == 0, here.output
    merged = runner.invoke(app, ["runs", "merge", "m", "--from", str(tmp_path / "ci/store.db")])
    assert merged.exit_code == 0, merged.output
    run = LocalStore().get_run("m", DATASET)
    assert run is not None
    results = LocalStore().results(run.id)
    names = {e.name for r in results if r.output for e in r.output.entities}
    outputs = _outputs("m", tmp_path) | {"merge output": merged.output}
    leaks = _leaks(outputs, key, tally)
    assert len(results) == 6 and names == {"***"}, names  # every item merged, masked
    assert not leaks, leaks


def _cli(*args: str, key: str) -> subprocess.CompletedProcess[str]:
    """The real entry point (its logging and warnings set-up), in a process of its own."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        KEY_ENV: key,
        "PYTHONWARNINGS": "default",
    }
    return subprocess.run(
        [sys.executable, "-m", "extraction_eval", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("pipeline", ["key_in_answer", "key_in_answer_text"])
def test_a_pipelines_key_in_its_answer_and_its_warnings_reaches_no_output(
    pipeline: str, tmp_path: Path, tally: Tally
) -> None:
    """Before: ``warnings.warn(key)`` went to stderr raw, and the answer was stored, exported
    and reported with the key (``output``; ``raw_output`` for an answer given as text)."""
    key = KEYS["odd-shaped"]
    ran = _cli(
        *("run", "--name", pipeline, "--limit", "2"),
        *("--pipeline", f"tests.support.hostile_pipelines:{pipeline}"),
        key=key,
    )
    assert ran.returncode == 0, ran.stderr
    run = LocalStore().get_run(pipeline, DATASET)
    assert run is not None
    results = LocalStore().results(run.id)
    assert len(results) == 2 and all(r.ok for r in results)  # the answers were kept
    outputs = _outputs(pipeline, tmp_path) | {"stdout": ran.stdout, "stderr": ran.stderr}
    leaks = _leaks(outputs, key, tally)
    if pipeline == "key_in_answer":
        assert "UserWarning: partner called with ***" in ran.stderr, ran.stderr  # it did warn
    assert not leaks, leaks


@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
def test_a_key_split_by_a_newline_in_an_error_is_masked_whole(
    key: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tally: Tally
) -> None:
    """Before: an ``sk-`` key kept its second half (the shape rule masked the first); an
    odd-shaped key was not masked at all."""
    monkeypatch.setenv(KEY_ENV, key)
    result = runner.invoke(
        app,
        [
            *("run", "--name", "split", "--limit", "2"),
            *("--pipeline", "tests.support.hostile_pipelines:key_split_in_error"),
        ],
    )
    run = LocalStore().get_run("split", DATASET)
    assert run is not None
    errors = [r.error or "" for r in LocalStore().results(run.id)]
    outputs = _outputs("split", tmp_path) | {"run output": result.output}
    leaks = _leaks(outputs, key, tally)
    assert len(errors) == 2, errors  # each item kept its row, with the error masked whole
    assert all("partner refused the key *** for this call" in e for e in errors), errors
    assert not leaks, leaks
