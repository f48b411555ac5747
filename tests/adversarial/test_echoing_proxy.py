"""An OpenAI-compatible proxy that echoes the ``Authorization`` header and the key in its error
bodies: the key must appear in no output (store bytes, ``runs show``, exports, the report,
logs, and with LangFuse what LangFuse received)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore, default_home
from extraction_eval.cli import app
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import running_fake_langfuse
from tests.support.openai_server import LoopbackServer, baseline_answer, echo_auth
from tests.support.tally import Tally

SECRET = "sk-proj-ECHOED-9b7d2e41c0"  # shaped like a real key: the pattern rule applies too
ODD_SECRET = "zq81-odd-shaped-credential-55"  # no known shape: only the value rule finds it
runner = CliRunner()


def _store_bytes() -> str:
    return b"".join(p.read_bytes() for p in default_home().glob("store.db*")).decode("latin-1")


def _found(text: str, *secrets: str) -> int:
    return sum(text.count(s) for s in secrets)


def _outputs(run: str, tmp: Path) -> dict[str, str]:
    report = tmp / f"{run}.html"
    outputs = {
        "runs show": runner.invoke(app, ["runs", "show", run]).output,
        "export jsonl": runner.invoke(app, ["runs", "export", run]).output,
        "export csv": runner.invoke(app, ["runs", "export", run, "--format", "csv"]).output,
        "report": runner.invoke(app, ["report", run, "--out", str(report)]).output,
    }
    outputs["report html"] = report.read_text(encoding="utf-8") if report.exists() else ""
    assert outputs["report html"], outputs["report"]
    outputs["store"] = _store_bytes()
    return outputs


@pytest.mark.parametrize("key", [SECRET, ODD_SECRET], ids=["sk-shaped", "odd-shaped"])
def test_a_key_echoed_in_error_bodies_reaches_no_output(
    key: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    tally: Tally,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    with LoopbackServer(answer=baseline_answer) as server:
        server.inject(echo_auth(401, times=2), echo_auth(500, times=2))
        result = runner.invoke(
            app,
            [
                *("run", "--name", "echo", "--limit", "4", "--model", "openai:m"),
                *("--base-url", server.url, "--max-attempts", "2", "--concurrency", "1"),
            ],
        )
        echoed = [r for r in server.requests if r.status in (401, 500)]
    # the proxy did echo the key back (else this test would prove nothing)
    assert len(echoed) == 4
    run = LocalStore().get_run("echo")
    assert run is not None
    results = LocalStore().results(run.id)
    errors = [r.error for r in results if r.error]
    assert errors and all("***" in e for e in errors), errors
    outputs = _outputs("echo", tmp_path)
    outputs["run output"] = result.output
    outputs["logs"] = caplog.text
    leaks = {name: _found(text, key) for name, text in outputs.items() if _found(text, key)}
    tally.secrets(sum(leaks.values()))
    tally.input(held=not leaks)
    assert not leaks, leaks


def test_a_key_echoed_in_error_bodies_never_reaches_langfuse(
    monkeypatch: pytest.MonkeyPatch, tally: Tally
) -> None:
    with running_fake_langfuse() as lf:
        upload(lf, LocalStore().get_items("extraction-eval")[:3], "extraction-eval")
        use_langfuse(lf, monkeypatch, "echo-proxy")
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        lf_secret = os.environ["LANGFUSE_SECRET_KEY"]
        with LoopbackServer(answer=baseline_answer) as model:
            model.inject(echo_auth(401, times=3))
            result = runner.invoke(
                app,
                [
                    *("run", "--name", "echo-lf", "--model", "openai:m"),
                    *("--base-url", model.url, "--max-attempts", "1"),
                ],
            )
            assert len([r for r in model.requests if r.status == 401]) == 3
        received = json.dumps(
            [(r.path, r.query, r.body) for r in lf.requests], default=str, ensure_ascii=False
        )
    assert "echo-lf" in received, result.output  # what we scan is the run's real traffic
    assert "***" in received  # the error did arrive, redacted
    found = _found(received + result.output, SECRET)
    tally.secrets(found)
    tally.input(held=found == 0)
    assert found == 0
    # the LangFuse secret key travels only in the Authorization header (the recorder drops
    # it); the public key is LangFuse's own, sent by the SDK in every span's scope
    assert _found(received, lf_secret) == 0
