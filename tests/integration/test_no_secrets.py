"""Secrets never appear in logs, the store, exports, reports, or what LangFuse receives."""

from __future__ import annotations

import json
import logging
import os

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore, default_home
from extraction_eval.cli import app
from tests.integration.test_langfuse_experiment import upload, use_langfuse
from tests.support.langfuse_server import running_fake_langfuse
from tests.support.openai_server import LoopbackServer, baseline_answer

OPENAI_SECRET = "sk-proj-DO-NOT-LEAK-4f1c9a"
runner = CliRunner()


def _assert_clean(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text


def _store_bytes() -> str:
    return b"".join(p.read_bytes() for p in default_home().glob("store.db*")).decode("latin-1")


def test_openai_key_stays_out_of_logs_store_exports_and_output(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
    caplog.set_level(logging.DEBUG)
    with LoopbackServer(answer=baseline_answer) as server:
        args = [
            "run",
            "--name",
            "s1",
            "--limit",
            "4",
            "--model",
            "openai:m",
            "--base-url",
            server.url,
        ]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        # the key did go to the model server (so the test would see it if we copied it around)
        assert any(OPENAI_SECRET in str(r.headers) for r in server.requests)
    exported = runner.invoke(app, ["runs", "export", "s1", "--format", "csv"]).stdout
    shown = runner.invoke(app, ["runs", "show", "s1"]).stdout
    run = LocalStore().get_run("s1")
    assert run is not None
    _assert_clean(result.output + exported + shown + caplog.text, OPENAI_SECRET)
    _assert_clean(json.dumps(run.config) + json.dumps(run.summary), OPENAI_SECRET)
    _assert_clean(_store_bytes(), OPENAI_SECRET)


def test_langfuse_and_openai_keys_stay_out_of_what_langfuse_receives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_fake_langfuse() as server:
        upload(server, LocalStore().get_items("extraction-eval")[:3])
        use_langfuse(server, monkeypatch, "no-secrets")
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_SECRET)
        lf_secret = os.environ["LANGFUSE_SECRET_KEY"]
        with LoopbackServer(answer=baseline_answer) as model:
            args = ["run", "--name", "s2", "--model", "openai:m", "--base-url", model.url]
            result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        received = json.dumps(
            [(r.path, r.query, r.headers, r.body) for r in server.requests], default=str
        )
    assert "s2" in received  # what we scan is the real traffic of the run
    _assert_clean(received + result.output + _store_bytes(), OPENAI_SECRET, lf_secret)
