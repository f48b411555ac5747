"""Pointing the tool at a fake LangFuse server, and seeding it, the way the integration tests
do: fresh keys each time (the SDK keeps one client per public key per process)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from extraction_eval.backends.langfuse import (
    VERIFY_TIMEOUT_ENV,
    LangfuseDatasetBackend,
    close_client,
)
from extraction_eval.types import DatasetItem
from tests.support.langfuse_server import FakeLangfuse, client_for


def use_langfuse(
    server: FakeLangfuse,
    monkeypatch: pytest.MonkeyPatch,
    label: str,
    verify_timeout: float | None = 5,
) -> None:
    """Point the tool at ``server`` with fresh keys; ``verify_timeout`` None keeps the
    read-back's default wait."""
    public, secret = server.new_keys(label)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)
    monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
    if verify_timeout is not None:
        monkeypatch.setenv(VERIFY_TIMEOUT_ENV, str(verify_timeout))


def upload(server: FakeLangfuse, items: Sequence[DatasetItem], dataset: str) -> str:
    """Upload ``items`` through our backend (its own client); returns the dataset's id."""
    lf = client_for(server, "upload")
    try:
        LangfuseDatasetBackend(lf).upload_items(dataset, list(items))
    finally:
        close_client(lf)
    return str(server.datasets[dataset]["id"])
