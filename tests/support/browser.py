"""Opening a written report in the browser tests' Chromium, one item expanded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def expanded_item(chromium: Any, report: Path, item_id: str) -> Iterator[Any]:
    """The report in a fresh browser context, once its script has run, with one item's
    details expanded; yields the page."""
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(report.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=10_000)
        page.click(f"tr.item-row[data-item='{item_id}'] button.expand")
        page.wait_for_selector(f"tr.detail[data-detail='{item_id}']")
        yield page
    finally:
        context.close()
