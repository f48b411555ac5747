"""The report's item details in a real browser (headless Chromium): a repaired reply's raw text
and repairs, and a failed one's, are shown as text — markup in a model's reply never becomes
an element, a control character is written as its escape — with no console error."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.openai_server import LoopbackServer, baseline_answer, input_text

HOSTILE = 'Sure!\x1b[31m <img src=x onerror="window.__pwned=1"> here:'


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A run of three items (bare, prose with markup and ESC, ten blocks) and its report."""
    tmp = tmp_path_factory.mktemp("raw-reply")
    monkey = pytest.MonkeyPatch()
    monkey.setenv("EXTRACTION_EVAL_HOME", str(tmp / "home"))
    monkey.delenv("OPENAI_API_KEY", raising=False)
    monkey.delenv("OPENAI_BASE_URL", raising=False)

    def build() -> tuple[Path, list[str]]:
        ids = [i.id for i in LocalStore().get_items("extraction-eval")[:3]]
        texts = {i.text: n for n, i in enumerate(LocalStore().get_items("extraction-eval")[:3])}

        def answer(body: dict[str, Any]) -> str:
            bare = baseline_answer(body)
            n = texts.get(input_text(body))
            if n == 1:
                return f"{HOSTILE}\n{bare}\nDone."
            if n == 2:
                return "\n".join(f"```json\n{bare}\n```" for _ in range(10))
            return bare

        with LoopbackServer(answer=answer) as server:
            made = CliRunner().invoke(
                _run_app,
                ["--backend", "local", "--limit", "3", "--name", "raw",
                 "--model", "openai:small", "--base-url", server.url],
            )  # fmt: skip
        assert made.exit_code == 0, made.stderr
        out = tmp / "report.html"
        written = CliRunner().invoke(app, ["report", "raw", "--out", str(out)])
        assert written.exit_code == 0, written.stderr
        return out, ids

    try:  # in a thread: playwright's sync API keeps an event loop running on this one
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(build).result()
    finally:
        monkey.undo()


@pytest.fixture
def page(chromium: Any, report: tuple[Path, list[str]]) -> Iterator[tuple[Any, list[str]]]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.goto(report[0].as_uri())
    p.wait_for_selector("body[data-ready=true]", timeout=10_000)
    yield p, errors
    assert errors == []
    context.close()


def test_raw_replies_show_as_text_with_their_repairs(
    page: tuple[Any, list[str]], report: tuple[Path, list[str]]
) -> None:
    p, _ = page
    clean, prose, ten = report[1]
    p.click(f"tr.item-row[data-item='{prose}'] button.expand")
    detail = p.locator(f"tr.detail[data-detail='{prose}']")
    assert detail.locator(".repairs").inner_text() == "answer repaired: prose"
    detail.locator("details.raw-reply summary").click()
    raw = detail.locator("details.raw-reply pre").inner_text()
    assert raw.startswith('Sure!\\x1b[31m <img src=x onerror="window.__pwned=1"> here:')
    assert p.locator("#item-table img").count() == 0 and p.evaluate("window.__pwned") is None
    p.click(f"tr.item-row[data-item='{ten}'] button.expand")
    failed = p.locator(f"tr.detail[data-detail='{ten}']")
    assert "10 JSON objects, not one" in failed.locator(".error-box").inner_text()
    assert failed.locator("details.raw-reply pre").text_content().count("```json") == 10
    p.click(f"tr.item-row[data-item='{clean}'] button.expand")
    assert p.locator(f"tr.detail[data-detail='{clean}'] details.raw-reply").count() == 0
