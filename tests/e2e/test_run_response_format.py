"""``--response-format`` end to end: run-experiment against a loopback server that refuses
json_schema the way llama-cpp-python's does, and matrix sharing the option."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.openai_server import (
    LoopbackServer,
    baseline_answer,
    llama_cpp_python_formats,
    sent_format,
)

runner = CliRunner()


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_auto_is_the_default_and_the_summary_says_what_was_chosen() -> None:
    with LoopbackServer(answer=baseline_answer, formats=llama_cpp_python_formats()) as server:
        result = runner.invoke(
            _run_app,
            ["--backend", "local", "--limit", "3", "--name", "cli-auto",
             "--model", "openai:smollm2", "--base-url", server.url],
        )  # fmt: skip
        sent = [sent_format(r.body) for r in server.chat_requests]
    assert result.exit_code == 0, result.stderr
    assert sent == ["json_schema"] + ["json_object_schema"] * 4
    assert "json_object_schema (llamacpp form) (auto: the server refused json_schema)" in (
        " ".join(result.stdout.split())
    )
    run = LocalStore().get_run("cli-auto")
    assert run is not None and run.config["response_format"] == "json_object_schema"
    assert run.summary is not None and run.summary["errors"] == 0


def test_a_pinned_format_and_a_bad_one() -> None:
    with LoopbackServer(answer=baseline_answer) as server:
        result = runner.invoke(
            _run_app,
            ["--backend", "local", "--limit", "2", "--name", "cli-pinned",
             "--model", "openai:m", "--base-url", server.url, "--response-format", "json_object"],
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        assert [sent_format(r.body) for r in server.chat_requests] == ["json_object"] * 2
        bad = runner.invoke(
            _run_app,
            ["--backend", "local", "--model", "openai:m", "--base-url", server.url,
             "--response-format", "xml"],
        )  # fmt: skip
    assert bad.exit_code == 2
    assert "--response-format must be one of auto, json_schema" in " ".join(bad.stderr.split())


def test_matrix_shares_the_option_and_probes_once_per_model() -> None:
    with LoopbackServer(answer=baseline_answer, formats=llama_cpp_python_formats()) as server:
        result = runner.invoke(
            app,
            ["matrix", "--backend", "local", "--limit", "2", "--name", "mx",
             "--model", "openai:smollm2", "--temperature", "0", "--temperature", "0.5",
             "--base-url", server.url],
        )  # fmt: skip
        sent = [sent_format(r.body) for r in server.chat_requests]
    assert result.exit_code == 0, result.stderr
    # one model, two cells: probed once (json_schema refused, json_object_schema taken)
    assert sent == ["json_schema", "json_object_schema"] + ["json_object_schema"] * 4
    cells = [r for r in LocalStore().list_runs() if r.name.startswith("mx/")]
    assert len(cells) == 2
    assert all(r.config["response_format"] == "json_object_schema" for r in cells)
