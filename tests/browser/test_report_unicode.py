"""Highlights in a text with characters outside the BMP (emoji, flags): the report's spans are
Python string offsets (code points), JavaScript strings count UTF-16 units."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from extraction_eval.analysis.html_report.data import build_report_data
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.reports.html import write_report
from extraction_eval.types import DatasetItem, Entity, Extraction
from tests.support.browser import expanded_item

TEXT = "😀😀 Ada met Bob in 🇫🇷 Paris 👋."


def _build(tmp: Path, item: DatasetItem | None = None) -> Path:
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
    store.upload_items("emoji", [item or DatasetItem(id="e-1", text=TEXT, expected=gold)])
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
    with expanded_item(chromium, out, "e-1") as page:
        marks = page.locator("tr.detail .panel[data-run='0'] .text mark:not(.ev)").all_inner_texts()
        quiet = page.locator("tr.detail .panel[data-run='0'] .text mark.ev").all_inner_texts()
        text = page.locator("tr.detail .panel[data-run='0'] .text").inner_text()
    assert text == TEXT
    # the mention is marked inside its evidence "Paris 👋"; the rest of the quote quietly
    assert sorted(marks) == ["Ada", "Paris"]
    assert quiet == [" 👋"]


SENTENCE = "In 1843 the countess Ada Lovelace published her notes on the engine."


def test_a_sentence_long_quote_marks_the_mention_inside_it(chromium: Any, tmp_path: Path) -> None:
    """The quote is the whole sentence: the name is marked in full, the rest quietly, so the
    highlight still says where the entity is."""
    gold = Extraction(entities=[Entity(name="ada lovelace", type="person", evidence=SENTENCE)])
    item = DatasetItem(id="e-1", text=f"Notes. {SENTENCE} Later.", expected=gold)
    with ThreadPoolExecutor(1) as pool:
        out = pool.submit(_build, tmp_path, item).result()
    with expanded_item(chromium, out, "e-1") as page:
        text = "tr.detail .panel[data-run='0'] .text"
        marks = page.locator(f"{text} mark:not(.ev)").all_inner_texts()
        quiet = page.locator(f"{text} mark.ev").all_inner_texts()
    assert set(marks) == {"Ada Lovelace"}  # found case-insensitively, shown as written
    assert "".join(quiet) == SENTENCE.replace("Ada Lovelace", "")
