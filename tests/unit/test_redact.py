"""The one redaction: configured secret values and token-shaped strings become ``***`` in
every error message and one-line error text."""

from __future__ import annotations

import pytest

from extraction_eval.errors import BackendError, ProviderError, SchemaFailure, one_line
from extraction_eval.redact import redact, register_secret, safe_url


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
