"""What the live LangFuse tests share: the server and keys from the environment, and the marks
that skip them unless asked for explicitly (they write to a real server)."""

from __future__ import annotations

import os
from typing import Any

import pytest

PUBLIC_KEY = os.environ.get("LANGFUSE_PUBLIC_KEY", "")
SECRET_KEY = os.environ.get("LANGFUSE_SECRET_KEY", "")
BASE_URL = os.environ.get("LANGFUSE_BASE_URL") or os.environ.get("LANGFUSE_HOST", "")
ENABLED = os.environ.get("EXTRACTION_EVAL_LIVE") == "1" and all((PUBLIC_KEY, SECRET_KEY, BASE_URL))


def live_marks(timeout_s: int) -> list[pytest.MarkDecorator]:
    """A live test module's ``pytestmark``."""
    return [
        pytest.mark.live,
        pytest.mark.skipif(
            not ENABLED,
            reason="live LangFuse test: set EXTRACTION_EVAL_LIVE=1 and the three LANGFUSE_* vars",
        ),
        pytest.mark.timeout(timeout_s),
    ]


def api_get(path: str, **params: str | None) -> Any:
    """GET a public API route of the live server as plain JSON."""
    import httpx

    response = httpx.get(
        f"{BASE_URL.rstrip('/')}/api/public/{path}",
        params=params,
        auth=(PUBLIC_KEY, SECRET_KEY),
        timeout=60,
    )
    response.raise_for_status()
    return response.json()
