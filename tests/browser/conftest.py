"""Headless Chromium for the report tests, through playwright's Python API.

The browser is Debian's ``chromium`` package (``/usr/bin/chromium``; ``.ci/run`` installs it
with apt-get), or ``EXTRACTION_EVAL_CHROMIUM``; playwright's own browser download is never
used. Without a browser the suite says so in one line: it FAILS when ``CI`` is set (a browser
test that silently skips in CI is not a test) and skips otherwise.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    wanted = os.environ.get("EXTRACTION_EVAL_CHROMIUM")
    if wanted:
        return wanted if Path(wanted).is_file() else None
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A launched headless Chromium, one per test module: playwright's sync API runs an event
    loop on this thread while it is open, and tests elsewhere call ``asyncio.run``."""
    exe = chromium_path()
    if exe is None:
        _unavailable(
            "browser tests: no Chromium found (/usr/bin/chromium or EXTRACTION_EVAL_CHROMIUM);"
            " install it with: apt-get install -y chromium"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("browser tests: playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
