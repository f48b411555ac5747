"""Highlights in a text with characters outside the BMP (emoji, flags): the report's spans are
Python string offsets (code points), JavaScript strings count UTF-16 units."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from extraction_eval.analysis.report_data import build_report_data
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.reports.html import write_report
from extraction_eval.types import DatasetItem, Entity, Extraction

TEXT = "😀😀 Ada met Bob in 🇫🇷 Paris 👋."


def _build(tmp: Path) -> Path:
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import arun_local
    from extraction_eval.pipeline.base import PipelineConfig

    store = LocalStore(tmp / "store.db")
    gold = Extraction(
        entities=[
            Entity(name="Ada", type="person", evidence="Ada"),
            Entity(name="Paris", type="location", evidence="Paris 👋"),
        ]
    )
    store.upload_items("emoji", [DatasetItem(id="e-1", text=TEXT, expected=gold)])
    support = Path(__file__).resolve().parents[1] / "support" / "report_runs.py"
    config = RunConfig(
        dataset="emoji", name="emo", pipeline=PipelineConfig(pipeline=f"{support}:run_a")
    )
    asyncio.run(arun_local(config, store=store))
    out = tmp / "report.html"
    write_report(build_report_data(store, [get_run(store, "emo")]), out)
    store.close()
    return out


def test_highlights_are_right_after_characters_outside_the_bmp(
    chromium: Any, tmp_path: Path
) -> None:
    with ThreadPoolExecutor(1) as pool:  # playwright's sync API keeps a loop on this thread
        out = pool.submit(_build, tmp_path).result()
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(out.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=10_000)
        page.click("tr.item-row[data-item='e-1'] button.expand")
        page.wait_for_selector("tr.detail[data-detail='e-1']")
        marks = page.locator("tr.detail .panel[data-run='0'] .text mark").all_inner_texts()
        text = page.locator("tr.detail .panel[data-run='0'] .text").inner_text()
    finally:
        context.close()
    assert text == TEXT
    assert sorted(marks) == ["Ada", "Paris 👋"]
