"""Peak memory of a run with ``--workers N``: the run's process and its worker processes
together (issue 30's target: < 500 MB in total at 100k items, ``--workers 2``). Local mode by
default; ``--langfuse`` runs it in LangFuse mode against the loopback fake LangFuse server
(``tests/support/langfuse_server.py``, its own process, not counted; the dataset uploaded
first, not timed; the read-back included).

``wait4``'s ``ru_maxrss`` is the largest process's peak, not the sum, so this samples the RSS
of the run's process and of each of its children from ``/proc`` every 0.2 s and keeps the
largest sum (a peak shorter than a sample can be missed; the per-process ``ru_maxrss`` peaks
are printed beside it). The dataset cycles the CoNLL04 sentences (``bench_scale``); the model
is the offline baseline (no server), so the figure is our own per-item state, not a client's.

    .venv/bin/python benchmarks/bench_workers_memory.py [SIZES...] [--workers N] [--langfuse]
"""

from __future__ import annotations

import argparse
import json
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


_LANGFUSE_SERVER = """
import json, sys
from tests.support.langfuse_server import FakeLangfuse
server = FakeLangfuse(keys=json.loads(sys.argv[1])).start()
print(server.base_url, flush=True)
sys.stdin.read()  # serve until the benchmark closes stdin
server.stop()
"""
_KEYS = ("pk-lf-bench-memory", "sk-lf-bench-memory")


def _fake_langfuse(env: dict[str, str]) -> subprocess.Popen[str]:
    """The fake server in its own process; ``env`` then points the CLI at it."""
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", _LANGFUSE_SERVER, json.dumps(dict([_KEYS]))],
        cwd=repo,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONPATH": str(repo)},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    env.update(LANGFUSE_PUBLIC_KEY=_KEYS[0], LANGFUSE_SECRET_KEY=_KEYS[1], LANGFUSE_BASE_URL=url)
    env["EXTRACTION_EVAL_LANGFUSE_ALLOW_OLD"] = "1"
    return proc


def measure(n: int, workers: int, langfuse: bool = False) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-workers-mem-"))
    server: subprocess.Popen[str] | None = None
    try:
        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(tmp / "home"), "COLUMNS": "120"}
        for key in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST"):
            env.pop(key, None)
        if langfuse:
            server = _fake_langfuse(env)
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
            f"{n:>7} items  {'LangFuse' if langfuse else 'local'} mode  --workers {workers}"
            f"  wall {wall:8.1f} s  peak RSS total"
            f" {peak / 1024:6.1f} MB (sampled; run's process alone {peak_main / 1024:.0f} MB,"
            f" workers {each or '-'} MB)  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    finally:
        if server is not None:
            if server.stdin is not None:
                server.stdin.close()
            server.terminate()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("sizes", nargs="*", type=int, default=[100_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--langfuse", action="store_true", help="LangFuse mode (a fake server)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}  cpus={os.cpu_count()}", flush=True)
    for n in args.sizes:
        measure(n, args.workers, args.langfuse)


if __name__ == "__main__":
    main()
