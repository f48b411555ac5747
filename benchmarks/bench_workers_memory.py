"""Peak memory of a local run with ``--workers N``: the run's process and its worker
processes together (issue 30's target: < 500 MB in total at 100k items, ``--workers 2``).

``wait4``'s ``ru_maxrss`` is the largest process's peak, not the sum, so this samples the RSS
of the run's process and of each of its children from ``/proc`` every 0.2 s and keeps the
largest sum (a peak shorter than a sample can be missed; the per-process ``ru_maxrss`` peaks
are printed beside it). The dataset cycles the CoNLL04 sentences (``bench_scale``); the model
is the offline baseline (no server), so the figure is our own per-item state, not a client's.

    .venv/bin/python benchmarks/bench_workers_memory.py [SIZES...] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_scale import BIN, write_dataset  # benchmarks/ is on sys.path: this script's folder


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def measure(n: int, workers: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-workers-mem-"))
    try:
        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(tmp / "home"), "COLUMNS": "120"}
        for key in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST"):
            env.pop(key, None)
        data = tmp / "scale.jsonl"
        write_dataset(data, n)
        cli, run = str(BIN / "extraction-eval"), str(BIN / "run-experiment")
        subprocess.run([cli, "datasets", "upload", "scale", str(data)], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        argv = [run, "--dataset", "scale", "--concurrency", "16", "--name", "a"]
        argv += ["--workers", str(workers)]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = peak_main = 0
        peak_kids: dict[int, int] = {}
        while proc.poll() is None:
            main = _rss_kb(proc.pid)
            kids = {k: _rss_kb(k) for k in _children(proc.pid)}
            peak = max(peak, main + sum(kids.values()))
            peak_main = max(peak_main, main)
            for k, v in kids.items():
                peak_kids[k] = max(peak_kids.get(k, 0), v)
            time.sleep(0.2)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"run exited {proc.returncode}: {err.strip().splitlines()[-3:]}")
        each = " + ".join(f"{v / 1024:.0f}" for v in peak_kids.values())
        print(
            f"{n:>7} items  --workers {workers}  wall {wall:8.1f} s  peak RSS total"
            f" {peak / 1024:6.1f} MB (sampled; run's process alone {peak_main / 1024:.0f} MB,"
            f" workers {each or '-'} MB)  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("sizes", nargs="*", type=int, default=[100_000])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}  cpus={os.cpu_count()}", flush=True)
    for n in args.sizes:
        measure(n, args.workers)


if __name__ == "__main__":
    main()
