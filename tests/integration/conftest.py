"""Fixtures for the LangFuse integration tests: a fake server per test, and a real SDK client
on it with keys of its own (SDK 5 keeps one client per public key for the whole process)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.langfuse_server import FakeLangfuse, client_for, running_fake_langfuse


@pytest.fixture
def server() -> Iterator[FakeLangfuse]:
    with running_fake_langfuse() as fake:
        yield fake


@pytest.fixture
def lf(server: FakeLangfuse, request: pytest.FixtureRequest) -> Iterator[Any]:
    label = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_langfuse_")
    client = client_for(server, label)
    yield client
    client.shutdown()
