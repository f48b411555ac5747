"""The HTML report in a real browser (headless Chromium): it opens with no console error and
no request, shows every item, filters, sorts and pages, highlights exactly the stored evidence,
shows a hostile text as text, and looks right (a screenshot is saved)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.analysis.html_report.data import ReportData, build_report_data
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore
from extraction_eval.reports.html import write_report
from tests.support.report_runs import FILLERS, HOSTILE, make_runs

N_ITEMS = 3 + FILLERS


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ReportData]:
    tmp = tmp_path_factory.mktemp("report")

    def build() -> tuple[Path, ReportData]:
        store = LocalStore(tmp / "store.db")
        make_runs(store, tmp)
        data = build_report_data(store, [get_run(store, "rep-a"), get_run(store, "rep-b")])
        out = tmp / "report.html"
        write_report(data, out)
        return out, data

    # in a thread: playwright's sync API keeps an event loop running on this one
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(build).result()


class Page:
    """One opened report: the playwright page, its console errors and every request."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))

    def count(self) -> tuple[int, int]:
        el = self.page.locator("#item-count")
        return int(el.get_attribute("data-shown")), int(el.get_attribute("data-total"))

    def shown_ids(self) -> list[str]:
        return self.page.locator("tr.item-row").evaluate_all(
            "rows => rows.map(r => r.getAttribute('data-item'))"
        )


@pytest.fixture
def opened(chromium: Any, report: tuple[Path, ReportData]) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = Page(context.new_page())
    page.page.goto(report[0].as_uri())
    page.page.wait_for_selector("body[data-ready=true]", timeout=10_000)
    yield page
    context.close()


def _failing(data: ReportData) -> list[str]:
    return [r["id"] for r in data.items if any(x is None or x["fail"] for x in r["runs"])]


def test_opens_offline_with_every_item_and_no_console_error(
    opened: Page, report: tuple[Path, ReportData]
) -> None:
    assert opened.count() == (N_ITEMS, N_ITEMS)
    assert len(opened.shown_ids()) == 50  # the first page only: the table is paged
    assert opened.page.locator("#page-label").inner_text() == "page 1 of 2"
    assert opened.page.locator("section#metrics img").count() == 1
    # every chart image decoded (an SVG that failed to render has no natural width)
    widths = opened.page.locator("img").evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
    assert widths and all(w > 0 for w in widths)
    assert opened.errors == []
    assert all(u.startswith(("file:", "data:")) for u in opened.requests), opened.requests
    assert opened.page.evaluate("window.__pwned") is None


def test_filters_narrow_the_table(opened: Page, report: tuple[Path, ReportData]) -> None:
    page, data = opened.page, report[1]
    page.check("#f-failing")
    failing = _failing(data)
    assert 0 < len(failing) < N_ITEMS
    assert opened.count() == (len(failing), N_ITEMS)
    assert opened.shown_ids() == failing
    page.uncheck("#f-failing")
    page.select_option("#f-category", "ungrounded")
    assert opened.shown_ids() == ["r-001"]
    page.select_option("#f-category", "")
    page.select_option("#f-type", "thing")  # only B's hallucination on the gold-empty item
    assert opened.shown_ids() == ["r-003"]
    page.select_option("#f-type", "")
    page.check("#f-changed")
    assert (
        opened.shown_ids()
        == [r["id"] for r in data.items if r["chg"]]
        == [
            "r-001",
            "r-002",
            "r-003",
        ]
    )
    page.uncheck("#f-changed")
    page.fill("#f-q", "town61")
    assert opened.shown_ids() == ["r-061"]
    assert opened.errors == []


def test_sorting_and_paging(opened: Page) -> None:
    page = opened.page
    page.click("th[data-sort='ef1:1']")  # B entity F1, ascending: the errored item first
    assert opened.shown_ids()[0] == "r-002"
    page.click("th[data-sort='ef1:1']")
    assert page.locator("th[data-sort='ef1:1']").get_attribute("aria-sort") == "descending"
    page.click("th[data-sort='id']")
    page.click("#next")
    assert page.locator("#page-label").inner_text() == "page 2 of 2"
    assert opened.shown_ids() == [f"r-{n:03d}" for n in range(51, N_ITEMS + 1)]
    assert opened.errors == []


def _marked(page: Any, run: int) -> dict[str, str]:
    """Per object id, the text of the marks that carry it in run ``run``'s panel."""
    return page.locator(f"tr.detail .panel[data-run='{run}'] .text mark").evaluate_all(
        """marks => {
            const out = {};
            for (const m of marks) for (const id of m.getAttribute('data-o').split(' '))
                out[id] = (out[id] || '') + m.textContent;
            return out;
        }"""
    )


def test_expanded_item_highlights_exactly_the_stored_evidence(
    opened: Page, report: tuple[Path, ReportData], tmp_path: Path
) -> None:
    page, data = opened.page, report[1]
    row = next(r for r in data.items if r["id"] == "r-001")
    page.click("tr.item-row[data-item='r-001'] button.expand")
    page.wait_for_selector("tr.detail[data-detail='r-001']")
    for run in (0, 1):
        entry = row["runs"][run]
        expected = {f"g{j}": g for j, g in enumerate(row["gold"])}
        expected.update({f"p{j}": p for j, p in enumerate(entry["pred"])})
        want = {
            key: "".join(row["text"][s:e] for s, e in obj["sp"])
            for key, obj in expected.items()
            if obj["sp"]
        }
        assert _marked(page, run) == want
        # and each of those is the evidence quote as stored with the object
        assert all(want[k] == expected[k]["ev"] for k in want)
    panel = page.locator("tr.detail .panel[data-run='0']")
    # the four styles: A matched Ada, missed Charles Babbage, spurious 1833, ungrounded Paris
    assert panel.locator("mark.st-matched").count() > 0
    assert "Charles Babbage" in panel.locator("mark.st-missed").all_inner_texts()
    assert panel.locator("mark.st-spurious").all_inner_texts() == ["1833"]
    assert panel.locator("table.objects tr[data-obj='p3'] .st-ungrounded").inner_text() == "Paris"
    styles = page.evaluate(
        """() => ['st-matched', 'st-missed', 'st-spurious', 'st-ungrounded'].map(c => {
            const s = getComputedStyle(document.querySelector('.legend .' + c));
            return [s.backgroundColor, s.outlineStyle, s.textDecorationStyle, s.borderTopStyle]
                .join('|');
        })"""
    )
    assert len(set(styles)) == 4  # four distinct looks
    diff = page.locator("tr.detail .diff")
    assert "fixed (2)" in diff.locator("[data-diff='fixed']").inner_text()
    assert "broken (1)" in diff.locator("[data-diff='broken']").inner_text()
    shot = tmp_path / "report-expanded.png"
    page.locator("tr.detail").scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    assert opened.errors == []


def test_paired_table_and_the_diff_of_a_gold_empty_item(opened: Page) -> None:
    page = opened.page
    verdicts = page.locator("#paired-table tbody tr td:last-child").all_inner_texts()
    # the two gold-empty rates rest on the one gold-empty item: too little for a verdict
    assert verdicts.count("insufficient") == 2 and "no significant change" in verdicts
    page.check("#f-changed")
    assert opened.count()[0] == 3
    page.click("tr.item-row[data-item='r-003'] button.expand")
    diff = page.locator("tr.detail[data-detail='r-003'] .diff")
    assert diff.locator("[data-diff='new false positives']").inner_text() == (
        "new false positives (1): Nothing"
    )
    assert opened.errors == []


def test_a_hostile_text_renders_as_text(opened: Page) -> None:
    page = opened.page
    page.click("tr.item-row[data-item='r-002'] button.expand")
    panel = page.locator("tr.detail .panel[data-run='0']")
    assert panel.locator(".text").inner_text() == HOSTILE
    row = page.locator("tr.item-row[data-item='r-002']")
    assert row.locator("td.preview").text_content() == HOSTILE[:160]
    # nothing in the item table came from the text's markup, and none of it ran
    assert page.locator("#item-table b, #item-table img, #item-table script").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert (
        "scripted failure on r-002"
        in page.locator("tr.detail .panel[data-run='1'] .error-box").inner_text()
    )
    assert opened.errors == []


def test_full_page_screenshot(opened: Page, tmp_path: Path) -> None:
    """A picture of the whole report for a human to look at (kept in the test's tmp dir)."""
    shot = tmp_path / "report.png"
    opened.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000
    print(f"screenshot: {shot}")
