"""The server-version preflight's parsing and its exemption for LangFuse Cloud (no request:
Cloud runs the current server under its own version numbering)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from extraction_eval.backends.langfuse.client import check_server_version, parse_server_version
from extraction_eval.errors import ConfigError


def _client(url: str, version: str) -> Any:
    def health() -> Any:
        if "langfuse.com" in url:
            raise AssertionError("no health request for LangFuse Cloud")
        return SimpleNamespace(version=version)

    return SimpleNamespace(
        _base_url=url, api=SimpleNamespace(health=SimpleNamespace(health=health))
    )


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("4.16.0", (4, 16, 0)), ("v4.59.1-rc.1", (4, 59, 1)), ("latest", None), ("", None)],
)
def test_versions_parse(text: str, parsed: tuple[int, int, int] | None) -> None:
    assert parse_server_version(text) == parsed


def test_cloud_is_not_asked_and_never_refused() -> None:
    for url in ("https://cloud.langfuse.com", "https://us.cloud.langfuse.com"):
        assert check_server_version(_client(url, "3.0.0"), env={}) is None


def test_self_hosted_old_is_refused_new_passes_allow_old_warns() -> None:
    old = _client("http://127.0.0.1:3000", "4.16.0")
    with pytest.raises(ConfigError, match=r"v4\.16\.0; SDK 5 needs v4\.59\.0 or later"):
        check_server_version(old, env={})
    warning = check_server_version(old, env={"EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD": "1"})
    assert warning is not None and "going on" in warning
    assert check_server_version(_client("http://127.0.0.1:3000", "4.59.0"), env={}) is None
    assert "not checked" in str(check_server_version(_client("http://x", "dev"), env={}))
