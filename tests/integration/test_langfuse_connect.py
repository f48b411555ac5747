"""Connecting and checking keys: the real SDK against the loopback LangFuse."""

from __future__ import annotations

import logging

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.backends.langfuse import (
    check_auth,
    close_client,
    connect,
    langfuse_configured,
)
from extraction_eval.commands.prompts import prompts_app
from extraction_eval.errors import BackendError, ConfigError
from tests.support.langfuse_server import FakeLangfuse


def test_good_keys_pass_the_check_with_one_projects_call(server: FakeLangfuse) -> None:
    public, secret = server.new_keys("good")
    lf = connect(public_key=public, secret_key=secret, base_url=server.base_url)
    try:
        calls = server.requests_to("/api/public/projects")
        assert [(c.method, c.status, c.public_key) for c in calls] == [("GET", 200, public)]
        assert "authorization" not in calls[0].headers  # never recorded
        assert calls[0].headers["x-langfuse-sdk-name"] == "python"
        check_auth(lf)  # still fine when asked again
    finally:
        lf.shutdown()


def test_wrong_keys_give_one_line_backend_error_without_the_secret(
    server: FakeLangfuse, caplog: pytest.LogCaptureFixture
) -> None:
    public, _ = server.new_keys("wrong")
    secret = "sk-lf-this-is-not-the-secret"
    with caplog.at_level(logging.WARNING), pytest.raises(BackendError) as err:
        connect(public_key=public, secret_key=secret, base_url=server.base_url)
    message = str(err.value)
    assert "401" in message and server.base_url in message
    assert "\n" not in message and secret not in message
    assert err.value.exit_code == 3
    assert server.requests_to("/api/public/projects")[0].status == 401
    assert all(secret not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("mode", ["refuse", "drop"])
def test_unreachable_server_is_one_line_backend_error(server: FakeLangfuse, mode: str) -> None:
    public, secret = server.new_keys(f"down-{mode}")
    server.down(mode)  # type: ignore[arg-type]
    with pytest.raises(BackendError) as err:
        connect(public_key=public, secret_key=secret, base_url=server.base_url, timeout_s=2)
    message = str(err.value)
    assert message.startswith(f"cannot reach LangFuse at {server.base_url}")
    assert "\n" not in message and secret not in message


def test_failed_connect_leaves_the_keys_usable_once_the_server_is_back(
    server: FakeLangfuse,
) -> None:
    public, secret = server.new_keys("comeback")
    trace = server.seed_trace(input="x", output="{}")
    server.down("refuse")
    with pytest.raises(BackendError):
        connect(public_key=public, secret_key=secret, base_url=server.base_url)
    server.up()
    lf = connect(
        public_key=public, secret_key=secret, base_url=server.base_url, flush_interval=0.05
    )
    try:
        lf.create_score(name="after-outage", value=1.0, trace_id=trace.trace_id)
        close_client(lf)
        assert [s["name"] for s in server.scores] == ["after-outage"]
    finally:
        lf.shutdown()


def test_server_error_on_key_check_is_retried_then_reported(server: FakeLangfuse) -> None:
    public, secret = server.new_keys("flaky")
    server.fail_next("/api/public/projects", 1, status=503)
    lf = connect(public_key=public, secret_key=secret, base_url=server.base_url)
    lf.shutdown()
    assert [c.status for c in server.requests_to("/api/public/projects")] == [503, 200]


def test_missing_keys_are_a_config_error_and_nothing_is_sent(server: FakeLangfuse) -> None:
    with pytest.raises(ConfigError, match="LANGFUSE_SECRET_KEY"):
        connect(public_key="pk-lf-x", base_url=server.base_url)
    with pytest.raises(ConfigError, match="http"):
        connect(public_key="pk-lf-x", secret_key="sk-lf-x", base_url="localhost:3000")
    assert server.requests == []


def test_langfuse_configured_needs_both_keys_and_a_server() -> None:
    keys = {"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk"}
    assert not langfuse_configured(keys)
    assert langfuse_configured({**keys, "LANGFUSE_BASE_URL": "http://127.0.0.1:1"})
    assert langfuse_configured({**keys, "LANGFUSE_HOST": "http://127.0.0.1:1"})
    assert not langfuse_configured({**keys, "LANGFUSE_SECRET_KEY": " "})
    assert not langfuse_configured()  # conftest strips the real environment


def test_command_with_wrong_keys_prints_one_line_and_exit_code(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    public, _ = server.new_keys("cli-wrong")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-wrong-secret")
    monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
    app = typer.Typer()
    app.add_typer(prompts_app, name="prompts")
    result = CliRunner().invoke(app, ["prompts", "push"])
    assert result.exit_code == BackendError.exit_code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "401" in lines[0] and "Traceback" not in result.output
    assert "sk-lf-wrong-secret" not in result.output
    assert server.requests_to("/api/public/v2/prompts", "POST") == []
