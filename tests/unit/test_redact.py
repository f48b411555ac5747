"""The one redaction: configured secret values and token-shaped strings become ``***`` in
every error message and one-line error text."""

from __future__ import annotations

import os
from typing import Any

import pytest

from extraction_eval.errors import BackendError, ProviderError, SchemaFailure, one_line
from extraction_eval.redact import configured_secrets, redact, register_secret, safe_url


def test_configured_keys_and_url_passwords_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaGeminiValue123")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "lf-secret-value-77")
    monkeypatch.setenv("MY_PROXY_TOKEN", "proxy-token-value")
    monkeypatch.setenv("LANGFUSE_BASE_URL", "https://bob:lf-url-pass@lf.example")
    text = "AIzaGeminiValue123 lf-secret-value-77 proxy-token-value lf-url-pass"
    assert redact(text) == "*** *** *** ***"


def test_token_shapes_are_masked_whatever_their_source() -> None:
    text = (
        "Authorization: Bearer abc.def-ghi sk-proj-AAAABBBBCCCC sk-lf-1234-abcd"
        " pk-lf-9999-zz http://user:pw@host/v1"
    )
    assert redact(text) == ("Authorization: Bearer *** *** *** *** http://***@host/v1")


def test_ordinary_text_is_left_alone() -> None:
    text = "basic information about the risk-free rate at http://host/v1?x=1"
    assert redact(text) == text


def test_a_registered_url_masks_its_password_and_query_key() -> None:
    register_secret("http://u:reg-pass-123@h/v1?api_key=reg-query-key")
    assert redact("reg-pass-123 / reg-query-key") == "*** / ***"
    assert safe_url("http://u:reg-pass-123@h/v1?api_key=reg-query-key") == "http://***@h/v1?***"


def test_errors_are_redacted_where_they_are_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "odd-key-value-42")
    assert "odd-key-value-42" not in str(ProviderError("echo: odd-key-value-42"))
    assert "odd-key-value-42" not in str(BackendError("LangFuse said odd-key-value-42"))
    failure = SchemaFailure("bad", raw='{"echo": "odd-key-value-42"}')
    assert failure.raw == '{"echo": "***"}'
    # any exception's one line (a user pipeline's, an SDK's) too
    assert one_line(RuntimeError("odd-key-value-42 leaked")) == "*** leaked"


def test_log_records_are_redacted_by_the_cli_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from extraction_eval.cli import RedactingFilter

    monkeypatch.setenv("OPENAI_API_KEY", "odd-key-value-43")
    record = logging.LogRecord(
        "httpx", logging.DEBUG, __file__, 1, "sent %s with %s", ("odd-key-value-43", "x"), None
    )
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "sent *** with x"


def test_a_configured_key_broken_by_whitespace_or_an_escape_is_masked_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error body wrapped at 80 columns, or quoting JSON: before, an ``sk-`` key kept its
    second half and an odd-shaped one was not masked at all."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-SPLIT-7d2e41c0aa")
    monkeypatch.setenv("PARTNER_API_KEY", "odd-split-value-9931")
    assert redact("key sk-proj-SPLIT-7d2e\n41c0aa end") == "key *** end"
    assert redact('{"echo": "odd-split-\\nvalue-9931"}') == '{"echo": "***"}'
    assert redact("odd-split-val  ue-9931 and odd-split-value-9931") == "*** and ***"
    assert one_line(RuntimeError("odd-split-\nvalue-9931 refused")) == "*** refused"
    assert redact("odd split value") == "odd split value"  # a part alone is left


def test_a_parsed_answer_is_masked_string_by_string(monkeypatch: pytest.MonkeyPatch) -> None:
    from extraction_eval.redact import redact_value

    monkeypatch.setenv("PARTNER_API_KEY", "odd-answer-value-55")
    answer = {"entities": [{"name": "got odd-answer-value-55", "n": 1}], "x": ["ok"]}
    masked = {"entities": [{"name": "got ***", "n": 1}], "x": ["ok"]}
    assert redact_value(answer) == (masked, True)
    assert redact_value(masked) == (masked, False)


def test_an_unchanged_environment_is_read_once_and_a_change_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every item asks for the configured secrets several times: the environment is read
    (every variable decoded) again only when it changed, or a secret was registered."""
    reads = []
    environ_type = type(os.environ)
    real_iter = environ_type.__iter__

    def counted(self: Any) -> Any:
        reads.append(1)
        return real_iter(self)

    monkeypatch.setenv("MY_PROXY_API_KEY", "first-secret-value")
    monkeypatch.setattr(environ_type, "__iter__", counted)
    for _ in range(5):
        assert "first-secret-value" in configured_secrets()
    assert len(reads) <= 1
    monkeypatch.setenv("MY_PROXY_API_KEY", "second-secret-value")
    assert "second-secret-value" in configured_secrets()
    assert "first-secret-value" not in configured_secrets()
    register_secret("a-registered-one")
    assert "a-registered-one" in configured_secrets()
    assert redact("x second-secret-value y") == "x *** y"
