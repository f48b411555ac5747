"""Runner throughput: N items through the real OpenAI client against a loopback server.

Prints the wall time next to the ideal N·L/C (issue 3 target: ≤ 1.10 × ideal). The server
runs in its own process so it does not compete with the client for the interpreter lock.

    .venv/bin/python benchmarks/bench_runner.py [--items 2000] [--latency 0.2] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()

    home = tempfile.mkdtemp(prefix="bench-runner-")
    os.environ["EXTRACTION_EVAL_HOME"] = home
    os.environ.setdefault("OPENAI_API_KEY", "bench")  # loopback server ignores it

    from extraction_eval.backends.local import LocalStore
    from extraction_eval.evaluators import ScoringConfig
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import arun_local
    from extraction_eval.pipeline.base import PipelineConfig
    from extraction_eval.types import DatasetItem, Entity, Extraction

    store = LocalStore(sample=False)
    items = [
        DatasetItem(
            id=f"b{i:05d}",
            text=f"Item {i}: Ada Lovelace worked with Charles Babbage in London.",
            expected=Extraction(entities=[Entity(name="Ada Lovelace", type="person")]),
        )
        for i in range(args.items)
    ]
    store.upload_items("bench", items)

    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--latency", str(args.latency)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        config = RunConfig(
            dataset="bench",
            name="bench",
            pipeline=PipelineConfig(model="openai:bench", base_url=url, max_attempts=1),
            scoring=ScoringConfig(resamples=1000),
            concurrency=args.concurrency,
            backend="local",
        )
        started = time.perf_counter()
        outcome = asyncio.run(arun_local(config, store=store))
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait()

    overhead = runner_overhead(items, args.concurrency)
    ideal = args.items * args.latency / args.concurrency
    print(f"items={args.items} latency={args.latency}s concurrency={args.concurrency}")
    print(f"results={len(outcome.results)} errors={outcome.summary.errors}")
    print(f"wall={wall:.2f}s ideal={ideal:.2f}s ratio={wall / ideal:.2f}x (target <= 1.10x)")
    print(f"latency p50={outcome.summary.latency_p50_ms}ms p95={outcome.summary.latency_p95_ms}ms")
    print(
        "our own overhead (instant pipeline, same items: scoring + store + loop): "
        f"{overhead:.2f}s = {overhead / args.items * 1000:.2f} ms/item"
    )


def runner_overhead(items: list[Any], concurrency: int) -> float:
    """Wall time of the same run with a pipeline that answers at once: what is ours."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.evaluators import ContextIndex, ScoringConfig
    from extraction_eval.experiments.runner import ItemRunner, finalize, run_bounded
    from extraction_eval.pipeline.base import PipelineOutput
    from extraction_eval.types import DatasetItem

    class Instant:
        async def extract(self, item: DatasetItem) -> PipelineOutput:
            return PipelineOutput(extraction=item.expected, raw="{}")

    store = LocalStore(sample=False)
    run = store.create_run(name="overhead", dataset="bench", dataset_version=1, config={})
    runner = ItemRunner(
        pipeline=Instant(),
        scoring=ScoringConfig(resamples=1000),
        context_texts=ContextIndex({i.id: i.text for i in items}),
    )
    started = time.perf_counter()
    asyncio.run(
        run_bounded(
            items,
            runner.run_item,
            concurrency=concurrency,
            on_result=lambda r: store.record_result(run.id, r),
        )
    )
    finalize(store, run, items, runner)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
