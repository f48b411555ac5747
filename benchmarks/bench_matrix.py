"""A matrix of 8 cells x N items against one run of 8 x N items, same total concurrency.

  (single) ``run_experiment``: one run of 8·N items at concurrency C (local mode);
  (matrix) ``run_matrix``: 2 models x 2 prompt labels x 2 temperatures, N items per cell,
           concurrency C shared by all cells (one worker pool over every cell's items).

Both send the same request shape to the loopback OpenAI-compatible server
(tests/support/openai_server.py, ``--answer baseline``: real extractions to score), which runs
in its own process and answers after ``--latency`` seconds. Model names carry a fresh stamp,
so the response cache never answers. Each measurement runs in a fresh interpreter (import time
excluded), one at a time, with its own store; only 127.0.0.1 is used. Wall time includes every
cell's finalize (10,000-resample bootstrap CIs, summary) and, for the matrix, its
table (per-cell rows, best cells). The script prints figures; it is not a pass/fail test.

    .venv/bin/python benchmarks/bench_matrix.py                 # 8 x 500 vs 4,000, C = 32
    .venv/bin/python benchmarks/bench_matrix.py --items 100 --concurrency 16 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # tests.support (the model server) lives in the repo
    sys.path.insert(0, str(REPO))

# the timing helpers and the server launcher of the peers benchmark, so both measure alike
from bench_vs_peers import Timed, spawn_server, time_calls  # noqa: E402

CELL_DATASET, SINGLE_DATASET = "bench-matrix-cell", "bench-matrix-single"
CELLS = 8  # 2 models x 2 labels x 2 temperatures


def make_items(n: int, prefix: str) -> list[Any]:
    from extraction_eval.types import DatasetItem, Entity, Extraction

    return [
        DatasetItem(
            id=f"{prefix}{i:05d}",
            text=f"Item {i}: Ada Lovelace worked with Charles Babbage in London.",
            expected=Extraction(entities=[Entity(name="Ada Lovelace", type="person")]),
        )
        for i in range(n)
    ]


def setup_store(home: str, n: int) -> None:
    """Both datasets (N items per cell; 8·N for the single run) and prompt labels x, y."""
    os.environ["EXTRACTION_EVAL_HOME"] = home
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.prompts.template import load_local_prompt

    store = LocalStore(sample=False)
    store.upload_items(CELL_DATASET, make_items(n, "c"))
    store.upload_items(SINGLE_DATASET, make_items(CELLS * n, "s"))
    bundled = load_local_prompt()
    for label, note in (("x", ""), ("y", "\nAnswer with JSON only.")):
        messages = [
            {"role": m["role"], "content": m["content"] + (note if m["role"] == "system" else "")}
            for m in bundled.messages
        ]
        store.push_prompt("extraction", messages, labels=[label])


def worker(args: argparse.Namespace) -> None:
    """One measurement in this fresh process; prints ``RESULT {json}``."""
    import logging

    import openai  # noqa: F401  (imported before timing: import time is not compared)

    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments import driver, local_mode
    from extraction_eval.experiments import matrix as matrix_module
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.matrix import run_matrix
    from extraction_eval.experiments.matrix_config import MatrixConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig

    logging.basicConfig(level=logging.ERROR)
    finalize = time_calls(driver, "finalize")  # bootstrap CIs, summary: per run
    prepare = time_calls(matrix_module if args.worker == "matrix" else local_mode, "prepare")
    table = time_calls(matrix_module, "matrix_table")  # the matrix's table (paired CIs)
    store = LocalStore(sample=False)
    stamp = args.stamp
    pipeline = PipelineConfig(base_url=args.openai_url, price_in=0.0, price_out=0.0)
    if args.worker == "single":
        config = RunConfig(
            dataset=SINGLE_DATASET,
            name=f"single-{stamp}",
            pipeline=PipelineConfig(
                model=f"openai:single-{stamp}",
                base_url=args.openai_url,
                price_in=0.0,
                price_out=0.0,
            ),
            concurrency=args.concurrency,
            backend="local",
        )
        with Timed() as t:
            outcome = run_experiment(config, store=store)
        figures = {"results": outcome.summary.items, "errors": outcome.summary.errors}
        figures["cache_hits"] = outcome.summary.cache_hits
    else:
        matrix = MatrixConfig(
            models=(f"openai:m1-{stamp}", f"openai:m2-{stamp}"),
            prompt_labels=("x", "y"),
            temperatures=(0.0, 0.7),
            name=f"matrix-{stamp}",
            base=RunConfig(
                dataset=CELL_DATASET,
                pipeline=pipeline,
                concurrency=args.concurrency,
                backend="local",
            ),
        )
        with Timed() as t:
            outcome = run_matrix(matrix, store=store)
        summaries = [c.summary for c in outcome.cells]
        figures = {
            "results": sum(s.get("items", 0) for s in summaries),
            "errors": sum(s.get("errors", 0) for s in summaries),
            "cache_hits": sum(s.get("cache_hits", 0) for s in summaries),
            "cells": len(outcome.cells),
        }
    figures.update(wall=t.wall, cpu=t.cpu, finalize=finalize[0], prepare=prepare[0])
    figures["table"] = table[0]
    print("RESULT " + json.dumps(figures), flush=True)


def measure(kind: str, args: argparse.Namespace, ctx: dict[str, Any], run: int) -> dict[str, Any]:
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        kind,
        "--concurrency",
        str(args.concurrency),
        "--openai-url",
        ctx["openai_url"],
        "--stamp",
        f"{ctx['stamp']}-{run}",
    ]
    env = {**os.environ, "EXTRACTION_EVAL_HOME": ctx["home"], "OPENAI_API_KEY": "bench"}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{kind} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return figures


def orchestrate(args: argparse.Namespace) -> None:
    n, c, latency = args.items, args.concurrency, args.latency
    home = tempfile.mkdtemp(prefix="bench-matrix-")
    setup_store(home, n)
    server_argv = ["-m", "tests.support.openai_server", "--latency", str(latency)]
    server, openai_url = spawn_server([sys.executable, *server_argv, "--answer", "baseline"])
    try:
        ctx = {
            "home": home,
            "openai_url": openai_url,
            "stamp": datetime.now(UTC).strftime("%H%M%S"),
        }
        print(
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.platform()}  "
            f"python {platform.python_version()}  cpus={os.cpu_count()}  "
            f"load={os.getloadavg()[0]:.2f}"
        )
        ideal = CELLS * n * latency / c
        print(
            f"{CELLS} cells x {n} items vs one run of {CELLS * n} items; concurrency {c} in"
            f" total; server latency {latency}s (ideal wall {ideal:.2f}s); repeat={args.repeat}"
        )
        walls: dict[str, list[float]] = {"single": [], "matrix": []}
        cpus: dict[str, list[float]] = {"single": [], "matrix": []}
        for run in range(args.repeat):
            # alternate the order, so a load change on the shared machine hits both alike
            for kind in ("single", "matrix") if run % 2 == 0 else ("matrix", "single"):
                f = measure(kind, args, ctx, run)
                walls[kind].append(f["wall"])
                cpus[kind].append(f["cpu"])
                extra = f"  cells={f['cells']}" if "cells" in f else ""
                print(
                    f"{kind:<6} wall {f['wall']:6.2f}s ({f['wall'] / ideal:.2f}x ideal)"
                    f"  cpu {f['cpu']:6.2f}s  results={f['results']} errors={f['errors']}"
                    f" cache_hits={f['cache_hits']}{extra}; of the wall: setup"
                    f" {f['prepare']:.2f}s, finalize {f['finalize']:.2f}s"
                    + (f", table {f['table']:.2f}s" if kind == "matrix" else "")
                    + f"  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        ratios = [m / s for m, s in zip(walls["matrix"], walls["single"], strict=True)]
        print(
            "matrix / single wall: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f" (per repetition); median {statistics.median(ratios):.2f};"
            f" best of each {min(walls['matrix']) / min(walls['single']):.2f} (target <= 1.2)"
        )
        cpu_ratio = statistics.median(cpus["matrix"]) / statistics.median(cpus["single"])
        print(f"matrix / single cpu (median): {cpu_ratio:.2f}")
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=500, help="items per cell (default 500)")
    parser.add_argument("--concurrency", type=int, default=32, help="total, shared by all cells")
    parser.add_argument("--latency", type=float, default=0.2, help="server seconds per call")
    parser.add_argument("--repeat", type=int, default=1, help="measure each this often")
    parser.add_argument("--worker", choices=("single", "matrix"), help=argparse.SUPPRESS)
    parser.add_argument("--openai-url", help=argparse.SUPPRESS)
    parser.add_argument("--stamp", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
