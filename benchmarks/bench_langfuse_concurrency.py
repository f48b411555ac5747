"""LangFuse mode concurrency: N items x L seconds at concurrency C through the real SDK's
``run_experiment`` against the loopback fake LangFuse (tests/support/langfuse_server.py).

Prints, per pipeline kind: the item phase (first call start -> last call end) next to the
ideal ceil(N/C)*L and the serial N*L with the most calls seen in flight; the run without the
read-back (key check, dataset fetch, items, flush, run scores) and the read-back itself.

    .venv/bin/python benchmarks/bench_langfuse_concurrency.py \
        [--items 200] [--latency 0.05] [--concurrency 16] [--kinds sync,async,openai]

Kinds: ``sync`` (a blocking user function: runs in worker threads), ``async`` (an async user
function), ``openai`` (the LLM pipeline through the real OpenAI client against the loopback
OpenAI server, with a traced ``generation`` per item). Both fake servers run in their own
processes (loopback, no network latency: a real LangFuse adds round trips to the read-back).
Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # tests.support (fake servers, pipelines) lives in the repo
    sys.path.insert(0, str(REPO))

DATASET = "bench-langfuse"


def _max_in_flight(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def _items(n: int) -> list[Any]:
    from extraction_eval.types import DatasetItem, Entity, Extraction

    return [
        DatasetItem(
            id=f"b{i:05d}",
            text=f"Item {i}: Ada Lovelace worked with Charles Babbage in London.",
            expected=Extraction(entities=[Entity(name="Ada Lovelace", type="person")]),
        )
        for i in range(n)
    ]


_SERVER = """
import json, sys
from tests.support.langfuse_server import FakeLangfuse
server = FakeLangfuse(keys=json.loads(sys.argv[1])).start()
print(server.base_url, flush=True)
sys.stdin.read()  # serve until the benchmark closes stdin
server.stop()
"""


def _use_keys(base_url: str, public: str, secret: str) -> None:
    os.environ["LANGFUSE_PUBLIC_KEY"] = public
    os.environ["LANGFUSE_SECRET_KEY"] = secret
    os.environ["LANGFUSE_BASE_URL"] = base_url


def _run(
    kind: str,
    args: argparse.Namespace,
    base_url: str,
    keys: tuple[str, str],
    openai_url: str | None,
) -> None:
    from extraction_eval.evaluators import ScoringConfig
    from extraction_eval.experiments import langfuse_mode
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import run_experiment
    from extraction_eval.pipeline.base import PipelineConfig
    from tests.support import pipelines

    if kind == "openai":
        pipeline = PipelineConfig(model="openai:bench", base_url=openai_url, max_attempts=1)
    else:
        name = "timed_sync" if kind == "sync" else "timed_async"
        pipeline = PipelineConfig(pipeline=f"tests.support.pipelines:{name}")
    config = RunConfig(
        dataset=DATASET,
        name=f"bench-{kind}-{int(time.time())}",
        pipeline=pipeline,
        scoring=ScoringConfig(resamples=1000),
        concurrency=args.concurrency,
        backend="langfuse",
        verify=not args.no_verify,
    )
    _use_keys(base_url, *keys)  # the SDK keeps one client per public key: one pair per run
    pipelines.CALL_TIMES.clear()
    verify_s = 0.0
    verify_run = langfuse_mode.verify_run

    def timed_verify(*a: Any, **k: Any) -> Any:
        nonlocal verify_s
        t = time.perf_counter()
        try:
            return verify_run(*a, **k)
        finally:
            verify_s += time.perf_counter() - t

    langfuse_mode.verify_run = timed_verify
    try:
        started = time.perf_counter()
        outcome = run_experiment(config)
        wall = time.perf_counter() - started
    finally:
        langfuse_mode.verify_run = verify_run

    ideal = math.ceil(args.items / args.concurrency) * args.latency
    serial = args.items * args.latency
    summary = outcome.summary
    print(f"[{kind}] results={len(outcome.results)} errors={summary.errors}", end="")
    if kind == "openai":
        print(
            f" tokens in/out={summary.tokens_in}/{summary.tokens_out}"
            f" latency p50={summary.latency_p50_ms}ms p95={summary.latency_p95_ms}ms"
        )
    else:
        print()
        intervals = [(s, e) for _, s, e in pipelines.CALL_TIMES]
        window = max(e for _, e in intervals) - min(s for s, _ in intervals)
        print(
            f"[{kind}] item phase {window:.2f}s vs ideal {ideal:.2f}s ({window / ideal:.2f}x),"
            f" serial {serial:.2f}s; max in flight {_max_in_flight(intervals)}"
        )
    run_only = wall - verify_s
    print(
        f"[{kind}] run without read-back {run_only:.2f}s ({run_only / ideal:.2f}x ideal,"
        f" {serial / run_only:.1f}x faster than serial); read-back {verify_s:.2f}s;"
        f" whole {wall:.2f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--kinds", default="sync,async,openai")
    parser.add_argument("--no-verify", action="store_true", help="skip the read-back")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = set(kinds) - {"sync", "async", "openai"}
    if unknown:
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")

    os.environ["EXTRACTION_EVAL_HOME"] = tempfile.mkdtemp(prefix="bench-langfuse-")
    os.environ["E2E_DELAY"] = str(args.latency)
    os.environ.setdefault("OPENAI_API_KEY", "bench")  # the loopback server ignores it

    from extraction_eval.backends.langfuse import LangfuseDatasetBackend, close_client, connect

    keys = [(f"pk-lf-bench-{i}", f"sk-lf-bench-{i}") for i in range(len(kinds) + 1)]
    procs: list[subprocess.Popen[str]] = []
    try:
        # Both servers in their own processes: they do not compete with the run for the GIL.
        langfuse = subprocess.Popen(
            [sys.executable, "-c", _SERVER, json.dumps(dict(keys))],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(langfuse)
        assert langfuse.stdout is not None
        base_url = langfuse.stdout.readline().strip()
        openai_url = None
        if "openai" in kinds:
            openai = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.openai_server",
                    "--latency",
                    str(args.latency),
                ],
                cwd=REPO,
                stdout=subprocess.PIPE,
                text=True,
            )
            procs.append(openai)
            assert openai.stdout is not None
            openai_url = openai.stdout.readline().strip()

        t = time.perf_counter()
        lf = connect(public_key=keys[0][0], secret_key=keys[0][1], base_url=base_url)
        LangfuseDatasetBackend(lf).upload_items(DATASET, _items(args.items))
        close_client(lf)
        print(
            f"items={args.items} latency={args.latency}s concurrency={args.concurrency}"
            f" cpus={os.cpu_count()} (upload {time.perf_counter() - t:.2f}s)"
        )
        for kind, pair in zip(kinds, keys[1:], strict=True):
            _run(kind, args, base_url, pair, openai_url)
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
