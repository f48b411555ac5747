"""A URL with credentials in it (``user:password@``, ``?api_key=``) is refused at setup in one
line that does not show the secret: for the model server (flag or ``OPENAI_BASE_URL``) and for
LangFuse; the server is never called."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from extraction_eval.cli import app
from tests.support.openai_server import LoopbackServer

runner = CliRunner()
SECRET = "url-secret-7f3a9c"


def _refused(args: list[str], caplog: pytest.LogCaptureFixture) -> str:
    caplog.set_level(logging.INFO)
    result = runner.invoke(app, ["run", "--limit", "2", *args])
    text = result.output + caplog.text
    assert result.exit_code == 2, result.output
    assert SECRET not in text
    assert len(result.output.strip().splitlines()) == 1, result.output
    return result.output


@pytest.mark.parametrize(
    "url",
    [
        "http://user:{s}@{host}/v1",
        "http://{host}/v1?api_key={s}",
        "ftp://user:{s}@{host}/v1",
    ],
    ids=["userinfo", "query-key", "ftp-userinfo"],
)
def test_a_base_url_with_credentials_is_refused_without_showing_them(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with LoopbackServer() as server:
        host = f"127.0.0.1:{server.port}"
        out = _refused(
            ["--model", "openai:m", "--base-url", url.format(s=SECRET, host=host)], caplog
        )
        assert server.requests == []  # refused before any call
    assert "--base-url" in out and "***" in out


def test_openai_base_url_from_the_environment_is_held_to_the_same_rule(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with LoopbackServer() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-env")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}?api_key={SECRET}")
        out = _refused(["--model", "openai:m"], caplog)
        assert server.requests == []
    assert "OPENAI_BASE_URL" in out


@pytest.mark.parametrize(
    "url", ["http://user:{s}@127.0.0.1:9/", "ftp://user:{s}@127.0.0.1:9/"], ids=["http", "ftp"]
)
def test_a_langfuse_url_with_a_password_is_refused_without_showing_it(
    url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-test")
    monkeypatch.setenv("LANGFUSE_BASE_URL", url.format(s=SECRET))
    out = _refused([], caplog)
    assert "LangFuse base URL" in out


@pytest.mark.parametrize("name", ["LANGFUSE_BASE_URL", "LANGFUSE_HOST"])
@pytest.mark.parametrize(
    "url", ["https://u:{s}@lf.example", "https://lf.example/?key={s}"], ids=["userinfo", "query"]
)
def test_a_langfuse_url_with_credentials_is_refused_without_keys_too(
    name: str, url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without keys the URL would otherwise be ignored (a local run) and its secret with it:
    it is refused wherever it is read, as docs/security.md shows, and no run is made."""
    for key in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv(name, url.format(s=SECRET))
    out = _refused([], caplog)
    assert "LangFuse base URL must not carry" in out and "***" in out
