"""The report's item details in a real browser (headless Chromium): a judged run's panel lists
the item's judged matches (prediction ≈ gold, source, reason) as text — markup in a judge's
reason never becomes an element — and a run never judged has no such list."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.llm.fake import register_fake, unregister_fake

HOSTILE = 'same person <img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run A names every entity by its last word and is judged by a scripted model whose
    reason carries markup; run B answers the gold and is never judged."""
    tmp = tmp_path_factory.mktemp("judged")
    monkey = pytest.MonkeyPatch()
    monkey.setenv("EXTRACTION_EVAL_HOME", str(tmp / "home"))

    def verdicts(request: Any) -> dict[str, Any]:
        lines = request.messages[-1].content.splitlines()
        n = sum(1 for x in lines if x[:1].isdigit() and " vs " in x)
        rows = [{"id": k, "same": True, "reason": HOSTILE} for k in range(1, n + 1)]
        return {"json": {"verdicts": rows}}

    def build() -> Path:
        items = LocalStore().get_items("extraction-eval")[:2]
        last = {
            i.id: {"entities": [{"name": e.name.split()[-1], "type": e.type}
                                for e in i.expected.entities]}
            for i in items
        }  # fmt: skip
        register_fake("last", {"items": last})
        register_fake("gold", {"items": {i.id: i.expected.model_dump(mode="json") for i in items}})
        register_fake("judge", {"default": verdicts})
        runner = CliRunner()
        for model, name in (("last", "a"), ("gold", "b")):
            made = runner.invoke(
                app, ["run", "--model", f"fake:{model}", "--limit", "2", "--name", name]
            )
            assert made.exit_code == 0, made.output
        judged = runner.invoke(
            app, ["report", "a", "--out", str(tmp / "a.html"), "--judge", "fake:judge"]
        )
        assert judged.exit_code == 0, judged.output
        out = tmp / "report.html"
        written = runner.invoke(app, ["report", "a", "b", "--out", str(out)])
        assert written.exit_code == 0, written.output
        return out

    try:  # in a thread: playwright's sync API keeps an event loop running on this one
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(build).result()
    finally:
        unregister_fake()
        monkey.undo()


@pytest.fixture
def page(chromium: Any, report: Path) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.goto(report.as_uri())
    p.wait_for_selector("body[data-ready=true]", timeout=10_000)
    yield p
    assert errors == []
    context.close()


def test_judged_matches_show_as_text_in_the_judged_runs_panel(page: Any) -> None:
    page.click("tr.item-row[data-item='sample-001'] button.expand")
    detail = page.locator("tr.detail[data-detail='sample-001']")
    a, b = detail.locator(".panel[data-run='0']"), detail.locator(".panel[data-run='1']")
    assert "judged matches by fake:judge" in a.locator(".judged h5").inner_text()
    rows = a.locator(".judged tr.judged-match")
    assert rows.count() > 0
    cells = [rows.nth(0).locator("td").nth(k).inner_text() for k in range(6)]
    assert cells[2] == "≈" and cells[4] == "model" and cells[5] == HOSTILE
    assert detail.locator("img").count() == 0 and page.evaluate("window.__pwned") is None
    assert b.locator(".judged").count() == 0  # B was never judged
