"""What LangFuse mode's per-item traffic costs in the SDK alone: CPU per item of

  spans   the SDK's ``run_experiment`` (its run and task spans, input, output, metadata)
          around a task that opens our ``generation`` span (``LangfuseTracer``) with the
          request and answer ``bench_vs_peers.py`` uses, as LangFuse mode does; no model
          call, no scoring, no store;
  scores  the same plus the item's scores as LangFuse mode posts them (``post_score``,
          deterministic ids, score configs): the 14 scores one benchmark item gets;
  cached-hints  ``scores`` with the SDK's generated serializer (``langfuse.api.core.
          serialization``) given a cached ``get_type_hints``, **in this benchmark only**:
          SDK 5.0.4 resolves the type hints of the score model again for every score of
          every batch; the row shows what that costs (not shipped: it patches SDK internals).

Each variant runs in a fresh interpreter against a fresh fake LangFuse server (its own
process, tests/support/langfuse_server.py), after the dataset upload; CPU is user + system
of the measuring process, all threads (the SDK's span and score threads included), until
``flush()`` returned. The difference of the two rows is what the scores cost; the rows of
``bench_vs_peers.py`` mode (b) minus mode (a) is LangFuse mode's whole extra. Only
127.0.0.1 is used; the script prints figures, it is not a pass/fail test.

    .venv/bin/python benchmarks/bench_langfuse_sdk_cost.py            # 1,000 items, 3 repeats
    .venv/bin/python benchmarks/bench_langfuse_sdk_cost.py --items 400 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

VARIANTS = ("spans", "scores", "cached-hints")


def _measure(variant: str, items: int, keys: tuple[str, str], url: str) -> dict[str, Any]:
    import benchmarks.bench_vs_peers as peers
    from extraction_eval.backends.langfuse import (
        LangfuseDatasetBackend,
        LangfuseTracer,
        connect,
        item_score_id,
        post_score,
    )
    from extraction_eval.backends.langfuse.score_configs import ensure_score_configs
    from extraction_eval.experiments.langfuse_mode import RUN_FLUSH_AT, RUN_TIMEOUT_S
    from extraction_eval.prompts.template import load_local_prompt
    from extraction_eval.types import Extraction

    # a fresh process: this is the SDK's one client for these keys, with the run's settings
    lf = connect(
        public_key=keys[0],
        secret_key=keys[1],
        base_url=url,
        flush_at=RUN_FLUSH_AT,
        timeout_s=RUN_TIMEOUT_S,
    )
    dataset = LangfuseDatasetBackend(lf).load_for_run(peers.DATASET)
    config_ids = ensure_score_configs(lf)
    prompt = load_local_prompt()
    tracer = LangfuseTracer(lf, error_level="WARNING")
    if variant == "cached-hints":
        _cache_sdk_type_hints()
    answer = Extraction.model_validate(peers.ANSWER)
    scores = _item_scores(answer, peers.make_items(1)[0]) if variant != "spans" else []
    output = answer.model_dump(mode="json")

    async def task(*, item: Any, **_: Any) -> Any:
        messages = [
            {"role": m.role, "content": m.content} for m in prompt.compile(item.input["text"], None)
        ]
        with tracer.generation(
            name="extract",
            model=peers.DATASET,
            model_parameters={"temperature": 0.0},
            input=messages,
            metadata={"item_id": str(item.id), "provider": "openai"},
        ) as generation:
            generation.update(
                output=answer.model_dump(),
                usage_details={"input": 700, "output": 200},
                cost_details={"total": 0.0},
                metadata={"attempts": 1},
            )
        trace_id, observation_id = lf.get_current_trace_id(), lf.get_current_observation_id()
        for score in scores:
            post_score(
                lf,
                score,
                trace_id=trace_id,
                observation_id=observation_id,
                score_id=item_score_id(trace_id, score) if trace_id else None,
                config_id=config_ids.get(score.name),
            )
        return output

    data = list(dataset.raw_by_id.values())
    wall0, cpu0 = time.perf_counter(), time.process_time()
    lf.run_experiment(
        name=f"cost-{variant}",
        run_name=f"cost-{variant}",
        data=data,
        task=task,
        max_concurrency=16,
        metadata={"model": "bench", "prompt_name": "local"},
    )
    lf.flush()
    return {
        "wall": time.perf_counter() - wall0,
        "cpu": time.process_time() - cpu0,
        "scores_per_item": len(scores),
    }


def _cache_sdk_type_hints() -> None:
    """Benchmark only: the SDK serializer's ``typing_extensions.get_type_hints``, cached."""
    import functools
    import types

    import typing_extensions
    from langfuse.api.core import serialization

    cached = functools.cache(typing_extensions.get_type_hints)
    proxy = types.SimpleNamespace(
        **{k: getattr(typing_extensions, k) for k in dir(typing_extensions) if k[:2] != "__"}
    )
    proxy.get_type_hints = lambda t, include_extras=False: cached(t, include_extras=include_extras)
    serialization.typing_extensions = proxy  # type: ignore[assignment]


def _keys(variant: str, run: int) -> tuple[str, str]:
    return f"pk-lf-cost-{variant}-{run}", f"sk-lf-cost-{variant}-{run}"


def _item_scores(answer: Any, item: Any) -> list[Any]:
    """The scores our runner gives the benchmark's answer (what LangFuse mode posts)."""
    import asyncio

    from extraction_eval.evaluators.config import ScoringConfig
    from extraction_eval.experiments.runner import ItemRunner
    from extraction_eval.pipeline.base import PipelineOutput

    class Fixed:
        async def extract(self, item: Any) -> PipelineOutput:
            return PipelineOutput(extraction=answer)

    result = asyncio.run(ItemRunner(pipeline=Fixed(), scoring=ScoringConfig()).run_item(item))
    return list(result.scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--run", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import logging

        logging.basicConfig(level=logging.ERROR)
        keys = _keys(args.worker, args.run)
        figures = _measure(args.worker, args.items, keys, args.url)
        print("RESULT " + json.dumps(figures), flush=True)
        return
    import benchmarks.bench_vs_peers as peers

    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.platform()}  python"
        f" {platform.python_version()}  cpus={os.cpu_count()}  load before="
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print(f"items={args.items} repeat={args.repeat} concurrency=16; one fresh process per run")
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for run in range(args.repeat):
        for variant in VARIANTS:
            # a fresh fake server holding the dataset, uploaded from this process (not timed)
            ctx: dict[str, Any] = {"items": args.items}
            keys = _keys(variant, run)  # fresh keys: a fresh SDK client for this server
            server = peers._langfuse_server(ctx, keys)
            try:
                done = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        variant,
                        "--items",
                        str(args.items),
                        "--url",
                        ctx["langfuse_url"],
                        "--run",
                        str(run),
                    ],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                )
            finally:
                peers._stop(server)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
            if done.returncode != 0 or not lines:
                raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
            f = json.loads(lines[-1][len("RESULT ") :])
            cpu[variant].append(f["cpu"])
            print(
                f"{variant:<12} wall {f['wall']:6.2f}s  cpu {f['cpu']:5.2f}s"
                f" = {f['cpu'] / args.items * 1000:.2f} ms/item"
                f"  ({f['scores_per_item']} scores per item)"
            )
    spans, both, cached = (median(cpu[v]) / args.items * 1000 for v in VARIANTS)
    print(
        f"medians: spans {spans:.2f} ms/item, spans + scores {both:.2f} ms/item"
        f" (the scores {both - spans:.2f}); with the SDK's type hints cached {cached:.2f}"
        f" (the scores {cached - spans:.2f})"
    )


if __name__ == "__main__":
    main()
