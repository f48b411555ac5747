"""Wall time and peak RSS of ``runs show --worst`` (and ``--by-category``) next to the full
``runs show``, on a local run of N synthetic items (CoNLL04 sentences cycled, offline
baseline). Measured, not asserted: ``--worst`` keeps a heap of ``--limit`` rows, so its peak
RSS should stay flat as N grows.

    .venv/bin/python benchmarks/bench_worst.py [SIZES...]      # default: 1000 10000
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import BIN, measure, write_dataset


def bench(n: int) -> list[tuple[str, float, float]]:
    cli, run = str(BIN / "extraction-eval"), str(BIN / "run-experiment")
    rows = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(tmp / "home"), "COLUMNS": "120"}
        for key in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST"):
            env.pop(key, None)
        data = tmp / "scale.jsonl"
        write_dataset(data, n)
        steps = [
            ("datasets upload", [cli, "datasets", "upload", "scale", str(data)]),
            ("run (baseline)", [run, "--dataset", "scale", "--name", "a", "--concurrency", "16"]),
            ("runs show", [cli, "runs", "show", "a", "--dataset", "scale"]),
            ("runs show --worst", [cli, "runs", "show", "a", "--worst", "--limit", "20"]),
            ("--worst --by-category", [cli, "runs", "show", "a", "--worst", "--by-category"]),
        ]
        for label, argv in steps:
            wall, rss = measure(argv, env, tmp / "out.txt")
            rows.append((label, wall, rss))
            print(f"{n:>7} items  {label:<22} {wall:8.2f} s  {rss:7.1f} MB", flush=True)
    return rows


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 10_000]
    print("peak RSS is each command's own child process (ru_maxrss)")
    for n in sizes:
        bench(n)


if __name__ == "__main__":
    main()
