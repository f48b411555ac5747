"""A hostile store (a merged shard from elsewhere) cannot make the report run script: a
``javascript:`` trace URL is not a link, and the page's CSP stops inline event handlers even
if markup with one ever got into the page."""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from extraction_eval.analysis.html_report.data import build_report_data
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.reports.html import write_report
from extraction_eval.types import DatasetItem, Entity, Extraction
from tests.support.browser import expanded_item

HOSTILE_URL = "javascript:document.body.dataset.pwned='link'"
INJECTED = '<button id="injected" onclick="document.body.dataset.pwned=\'handler\'">x</button>'


def _build(tmp: Path) -> Path:
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import arun_local
    from extraction_eval.pipeline.base import PipelineConfig

    db = tmp / "store.db"
    store = LocalStore(db)
    gold = Extraction(entities=[Entity(name="Ada", type="person", evidence="Ada")])
    store.upload_items("hostile", [DatasetItem(id="h-1", text="Ada met Bob.", expected=gold)])
    support = Path(__file__).resolve().parents[1] / "support" / "report_runs.py"
    config = RunConfig(
        dataset="hostile", name="hostile", pipeline=PipelineConfig(pipeline=f"{support}:run_a")
    )
    asyncio.run(arun_local(config, store=store))
    store.close()
    with sqlite3.connect(db) as conn:  # what a hostile shard store merged in would hold
        conn.execute("UPDATE results SET trace_url = ?", (HOSTILE_URL,))
    store = LocalStore(db)
    out = tmp / "report.html"
    write_report(build_report_data(store, [get_run(store, "hostile")]), out)
    store.close()
    # an escaping bug that let markup in is simulated by writing it into the page
    html = out.read_text(encoding="utf-8")
    out.write_text(html.replace("</main>", INJECTED + "</main>", 1), encoding="utf-8")
    return out


def test_a_javascript_trace_url_is_no_link_and_inline_handlers_do_not_run(
    chromium: Any, tmp_path: Path
) -> None:
    with ThreadPoolExecutor(1) as pool:  # playwright's sync API keeps a loop on this thread
        out = pool.submit(_build, tmp_path).result()
    with expanded_item(chromium, out, "h-1") as page:
        hrefs = page.locator("tr.detail a").evaluate_all(
            "links => links.map(a => a.getAttribute('href'))"
        )
        page.click("#injected")
        page.wait_for_timeout(200)
        pwned = page.evaluate("document.body.dataset.pwned || null")
    assert not any(h and h.lower().startswith("javascript:") for h in hrefs), hrefs
    assert pwned is None
    assert HOSTILE_URL not in out.read_text(encoding="utf-8")  # not even as data
