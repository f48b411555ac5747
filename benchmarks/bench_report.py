"""Time to build the HTML report of a 10,000-item run (and of two runs side by side), and
time to open it in headless Chromium until the item table is shown. Printed, not asserted.

The runs are real local runs of the offline baseline on a synthetic dataset cycling the
CoNLL04 sentences of the shared data (new ids, gold with character offsets), in a temporary
store; B is the same model scored with ``--match exact``.

    .venv/bin/python benchmarks/bench_report.py [N]          # default: 10000
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("EXTRACTION_EVAL_SHARED_DATA", ROOT.parent / "shared" / "data"))
SOURCES = ("conll04_train.jsonl", "conll04_dev.jsonl", "conll04_test.jsonl")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def write_dataset(path: Path, n: int) -> None:
    rows = []
    for name in SOURCES:
        with (DATA / name).open(encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row = rows[i % len(rows)]
            out = {
                "id": f"bench-{i:06d}",
                "text": row["text"],
                "entities": [
                    {k: e[k] for k in ("name", "type", "start", "end")} for e in row["entities"]
                ],
                "relationships": [
                    {k: r[k] for k in ("source", "type", "target")} for r in row["relationships"]
                ],
            }
            fh.write(json.dumps(out, ensure_ascii=False) + "\n")


def open_in_chromium(path: Path) -> tuple[float, float]:
    """(seconds until the table's first row is shown, until the script said ready) — the
    page loaded fresh in a new browser context, the browser already started."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            best: tuple[float, float] | None = None
            for _ in range(3):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                started = time.perf_counter()
                page.goto(path.as_uri(), wait_until="commit")
                page.wait_for_selector("tr.item-row", state="visible", timeout=60_000)
                shown = time.perf_counter() - started
                page.wait_for_selector("body[data-ready=true]", timeout=60_000)
                ready = time.perf_counter() - started
                context.close()
                best = (shown, ready) if best is None or shown < best[0] else best
            assert best is not None
            return best
        finally:
            browser.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.environ["EXTRACTION_EVAL_HOME"] = str(tmp / "home")
        from extraction_eval.analysis.report_data import build_report_data
        from extraction_eval.analysis.stored import get_run
        from extraction_eval.backends.local import LocalStore
        from extraction_eval.datasets.jsonl import read_items
        from extraction_eval.evaluators import ScoringConfig
        from extraction_eval.experiments.config import RunConfig
        from extraction_eval.experiments.run import arun_local
        from extraction_eval.reports.html import write_report

        store = LocalStore()
        write_dataset(tmp / "data.jsonl", n)
        items, _ = read_items(tmp / "data.jsonl")
        store.upload_items("bench", items)
        for name, match in (("bench-a", "fuzzy"), ("bench-b", "exact")):
            config = RunConfig(
                dataset="bench", name=name, scoring=ScoringConfig(match=match), concurrency=64
            )
            started = time.perf_counter()
            asyncio.run(arun_local(config, store=store))
            print(
                f"run {name} ({n} items, offline baseline): {time.perf_counter() - started:.1f} s"
            )
        for names in (["bench-a"], ["bench-a", "bench-b"]):
            runs = [get_run(store, x) for x in names]
            out = tmp / f"report-{len(names)}.html"
            started = time.perf_counter()
            data = build_report_data(store, runs)
            gathered = time.perf_counter() - started
            size = write_report(data, out)
            built = time.perf_counter() - started
            label = " + ".join(names)
            print(
                f"report {label}: build {built:.2f} s (reading + re-scoring {gathered:.2f} s,"
                f" charts + HTML {built - gathered:.2f} s), {size / 1e6:.1f} MB"
            )
            if Path("/usr/bin/chromium").is_file():
                shown, ready = open_in_chromium(out)
                print(
                    f"report {label}: open in Chromium until the table is shown {shown:.2f} s"
                    f" (script done {ready:.2f} s; best of 3)"
                )
            else:
                print("no /usr/bin/chromium: open time not measured (apt-get install chromium)")


if __name__ == "__main__":
    main()
