"""Time and peak memory of scoring one item with N gold x N predicted entities, each size in a
fresh process (peak RSS is per process): what the per-item object cap
(``ScoringConfig.max_objects``, default ``limits.DEFAULT_MAX_OBJECTS``) bounds.

    python benchmarks/bench_object_cap.py 500 1000 2000
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time


def one(n: int) -> None:
    from extraction_eval.evaluators import ScoringConfig, score_item
    from extraction_eval.types import Entity, Extraction

    gold = Extraction(entities=[Entity(name=f"Entity number {i}", type="thing") for i in range(n)])
    pred = Extraction(entities=[Entity(name=f"Entity numbr {i}", type="thing") for i in range(n)])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    config = ScoringConfig(max_objects=max(n, 1))
    score_item(item_id="x", text="", gold=gold, pred=pred, config=config)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n:>6} x {n:<6} {seconds:6.1f} s  peak RSS {peak:6.0f} MB  (+{peak - before:.0f} MB)")


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--one":
        one(int(argv[1]))
        return
    from extraction_eval.limits import DEFAULT_MAX_OBJECTS

    print(f"default cap: {DEFAULT_MAX_OBJECTS:,} objects of one kind per item and side")
    for n in [int(a) for a in argv] or [500, 1000, 2000]:
        subprocess.run([sys.executable, __file__, "--one", str(n)], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
