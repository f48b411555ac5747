"""Time, CPU time, peak memory and size of the HTML report of one run and of two runs side by
side, and the time to open it in headless Chromium until the item table is shown. Printed, not
asserted.

The runs are real local runs of the offline baseline on a synthetic dataset cycling the
CoNLL04 sentences of the shared data (new ids, gold with character offsets), in a store under
a temporary directory (or ``--store DIR``, kept and reused: making two 100,000-item runs takes
minutes). Runs: A, the offline baseline; C, the baseline with its answer changed on 30 % of the
items (an entity dropped, one retyped), scored alike: two models compared (the usual report);
B, the baseline scored with ``--match exact`` (each item of B is scored again with A's
settings for the paired comparison, as ``compare`` does). Each report is built by the real
command (``extraction-eval report``) in a child process, so its peak RSS and CPU time are the
report's own (``os.wait4``), not the runs'; the peak RSS is the sum of the command's and of
its worker process's (a large report is built in two processes). On a shared machine wall
time includes waiting for a core: CPU time (user + system) is printed beside it.

    .venv/bin/python benchmarks/bench_report.py [N] [--store DIR]    # default N: 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from peaks import wrapper  # benchmarks/ is on sys.path: this script's own folder

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("EXTRACTION_EVAL_SHARED_DATA", ROOT.parent / "shared" / "data"))
if not DATA.is_dir():  # a git worktree: the shared data sits beside the main checkout
    DATA = Path("/work/shared/data")
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


def changed_baseline(*, item: Any, **_: Any) -> dict[str, Any]:
    """Run C's pipeline: the baseline, changed on 30 % of the items (by a hash of the id)."""
    from extraction_eval.pipeline.baseline import extract_baseline

    out = extract_baseline(item.text, item.schema_).model_dump(mode="json")
    if zlib.crc32(item.id.encode()) % 10 < 3 and out["entities"]:
        out["entities"] = out["entities"][:-1]
        if out["entities"]:
            out["entities"][0]["type"] = "Other"
    return out


RUNS = {
    "bench-a": {},
    "bench-c": {"pipeline": "changed_baseline"},
    "bench-b": {"match": "exact"},
}


def make_runs(home: Path, n: int, wanted: list[str]) -> None:
    """Dataset ``bench`` of ``n`` items and the runs of ``RUNS``, those not already there."""
    os.environ["EXTRACTION_EVAL_HOME"] = str(home)
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.datasets.jsonl import read_items
    from extraction_eval.evaluators import ScoringConfig
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import arun_local
    from extraction_eval.pipeline.base import PipelineConfig

    store = LocalStore()
    have = {r.name for r in store.list_runs("bench") if r.status == "finished"}
    if any(d.name == "bench" for d in store.list_datasets()):
        if len(store.item_ids("bench")) != n:
            raise SystemExit(f"{home} holds another bench dataset: use an empty --store")
        print(f"store {home}: reusing {', '.join(sorted(have))} ({n} items)")
    else:
        home.mkdir(parents=True, exist_ok=True)
        write_dataset(home / "data.jsonl", n)
        items, _ = read_items(home / "data.jsonl")
        store.upload_items("bench", items)
        del items
    for name, spec in RUNS.items():
        if name in have or name not in wanted:
            continue
        pipeline = PipelineConfig()
        if "pipeline" in spec:
            pipeline = PipelineConfig(pipeline=f"{Path(__file__).resolve()}:{spec['pipeline']}")
        config = RunConfig(
            dataset="bench",
            name=name,
            scoring=ScoringConfig(match=spec.get("match", "fuzzy")),
            pipeline=pipeline,
            concurrency=64,
        )
        started = time.perf_counter()
        asyncio.run(arun_local(config, store=store))
        print(f"run {name} ({n} items, offline baseline): {time.perf_counter() - started:.1f} s")
    store.close()


# Runs ``python -m extraction_eval`` and, at exit, writes its own peak RSS and its waited-for
# children's (a large report's worker process) to $BENCH_PEAKS_FILE: wait4's ru_maxrss is the
# larger of the two, not their sum.
_PEAKS = wrapper(
    """
sys.argv = ["extraction_eval", *sys.argv[1:]]
runpy.run_module("extraction_eval", run_name="__main__", alter_sys=True)
"""
)


def build(home: Path, names: list[str], out: Path) -> tuple[float, float, float, str]:
    """Run ``extraction-eval report`` in a child: (wall s, CPU s of it and its worker, peak
    RSS MB: its own plus its worker's, its output)."""
    with tempfile.NamedTemporaryFile("r", suffix=".peaks") as peaks:
        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(home), "BENCH_PEAKS_FILE": peaks.name}
        cmd = [sys.executable, "-c", _PEAKS, "report", *names, "--out", str(out)]
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        printed = proc.stdout.read().decode("utf-8", "replace")
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"report {names} failed ({proc.returncode}):\n{printed}")
        own, kids = (int(x) / 1024 for x in peaks.read().split())  # Linux: kilobytes
    return wall, usage.ru_utime + usage.ru_stime, own + kids, printed.strip()


def open_in_chromium(path: Path) -> tuple[float, float, float]:
    """(seconds until the table's first row is shown, until the script said ready, until the
    first item was expanded) — the page loaded fresh in a new browser context, the browser
    already started; best of 3."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            best: tuple[float, float, float] | None = None
            for _ in range(3):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = context.new_page()
                started = time.perf_counter()
                page.goto(path.as_uri(), wait_until="commit")
                page.wait_for_selector("tr.item-row", state="visible", timeout=120_000)
                shown = time.perf_counter() - started
                page.wait_for_selector("body[data-ready=true]", timeout=120_000)
                ready = time.perf_counter() - started
                page.click("tr.item-row button.expand")
                page.wait_for_selector("tr.detail .text", timeout=120_000)
                expanded = time.perf_counter() - started - ready
                context.close()
                got = (shown, ready, expanded)
                best = got if best is None or shown < best[0] else best
            assert best is not None
            return best
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=10_000)
    parser.add_argument("--store", type=Path, help="keep the store here (reused when present)")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument(
        "--runs", default="a,c,b", help="which of A, C, B to make and report (default a,c,b)"
    )
    parser.add_argument("--make-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    wanted = [f"bench-{x.strip()}" for x in args.runs.split(",")]
    if args.make_only:  # the child that makes the runs (see below)
        make_runs(args.store, args.n, wanted)
        return
    print(f"cores: {os.cpu_count()}, load average: {' '.join(map(str, os.getloadavg()))}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        home = args.store.resolve() if args.store else tmp / "home"
        # The runs are made in a child process: a report's child forked from a parent that
        # held the runs' items would report the parent's peak RSS as its own (Linux keeps the
        # high-water mark across exec), e.g. 652 MB for a 246 MB report.
        make = [sys.executable, __file__, str(args.n), "--store", str(home), "--runs", args.runs]
        subprocess.run([*make, "--make-only"], check=True)
        reports = (["bench-a"], ["bench-a", "bench-c"], ["bench-a", "bench-b"])
        for names in [r for r in reports if set(r) <= set(wanted)]:
            out = tmp / f"report-{'-'.join(names)}.html"
            wall, cpu, rss, printed = build(home, names, out)
            label = " + ".join(names)
            size = out.stat().st_size
            print(
                f"report {label} ({args.n} items): build {wall:.1f} s wall, {cpu:.1f} s CPU,"
                f" peak RSS {rss:.0f} MB, file {size / 1e6:.1f} MB"
            )
            print(f"  (the command printed: {printed})")
            if args.no_browser:
                continue
            if Path("/usr/bin/chromium").is_file():
                shown, ready, expanded = open_in_chromium(out)
                print(
                    f"report {label}: open in Chromium until the table is shown {shown:.2f} s"
                    f" (script done {ready:.2f} s; first item expanded in {expanded:.2f} s;"
                    " best of 3)"
                )
            else:
                print("no /usr/bin/chromium: open time not measured (apt-get install chromium)")
        print(f"load average after: {' '.join(map(str, os.getloadavg()))}")


if __name__ == "__main__":
    main()
