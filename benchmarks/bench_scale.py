"""Wall time and peak RSS of a local run and its read-back commands at 1k, 10k and 100k items.

Measured, not asserted. Each size gets a fresh store (``EXTRACTION_EVAL_HOME`` in a temp dir)
and a synthetic dataset made by cycling the CoNLL04 sentences of the shared data with new ids.
Every command runs as its own child process through the real CLI, and its peak RSS is that
child's ``ru_maxrss`` (``os.wait4``), so the figures are per command and per size:

    datasets upload, run-experiment (offline baseline) twice (A, and B with ``--match exact``),
    runs show A, runs export A (jsonl), runs export A (csv), compare A B

A command whose memory grows with the run shows it as a peak RSS that grows with N; a
streaming one stays flat apart from what it must keep (a run: its item ids and texts).

    .venv/bin/python benchmarks/bench_scale.py [SIZES...]      # default: 1000 10000 100000
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("EXTRACTION_EVAL_SHARED_DATA", ROOT.parent / "shared" / "data"))
SOURCES = ("conll04_train.jsonl", "conll04_dev.jsonl", "conll04_test.jsonl")
BIN = Path(sys.executable).parent


def _sentences() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for name in SOURCES:
        with (DATA / name).open(encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                rows.append(
                    {
                        "text": row["text"],
                        "entities": [
                            {"name": e["name"], "type": e["type"]} for e in row["entities"]
                        ],
                        "relationships": [
                            {"source": r["source"], "type": r["type"], "target": r["target"]}
                            for r in row["relationships"]
                        ],
                    }
                )
    return rows


def write_dataset(path: Path, n: int) -> None:
    """``n`` items cycling the CoNLL04 sentences, ids ``scale-000000`` ... (new ids, same gold)."""
    sentences = _sentences()
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row = {"id": f"scale-{i:06d}", **sentences[i % len(sentences)]}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def measure(argv: list[str], env: dict[str, str], out: Path | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one child process; stdout goes to ``out`` or nowhere."""
    started = time.perf_counter()
    with open(out or os.devnull, "w", encoding="utf-8") as sink:
        proc = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv[:3])} ... exited {proc.returncode}: {tail}")
    return wall, usage.ru_maxrss / 1024  # Linux: kilobytes


def steps(n: int, data: Path, tmp: Path) -> Iterator[tuple[str, list[str], Path | None]]:
    cli, run = str(BIN / "extraction-eval"), str(BIN / "run-experiment")
    common = ["--dataset", "scale", "--concurrency", "16"]
    yield "datasets upload", [cli, "datasets", "upload", "scale", str(data)], None
    yield "run A (baseline)", [run, *common, "--name", "a"], None
    yield "run B (--match exact)", [run, *common, "--name", "b", "--match", "exact"], None
    yield "runs show A", [cli, "runs", "show", "a"], tmp / "show.txt"
    yield "runs export A jsonl", [cli, "runs", "export", "a"], tmp / "a.jsonl"
    yield "runs export A csv", [cli, "runs", "export", "a", "--format", "csv"], tmp / "a.csv"
    yield "compare A B", [cli, "compare", "a", "b"], tmp / "compare.txt"


def bench(n: int) -> list[tuple[str, float, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(tmp / "home"), "COLUMNS": "120"}
        for key in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST"):
            env.pop(key, None)  # local mode whatever the caller's shell has
        data = tmp / "scale.jsonl"
        write_dataset(data, n)
        for label, argv, out in steps(n, data, tmp):
            wall, rss = measure(argv, env, out)
            rows.append((label, wall, rss))
            print(f"{n:>7} items  {label:<22} {wall:8.2f} s  {rss:7.1f} MB", flush=True)
        lines = sum(1 for _ in (tmp / "a.jsonl").open(encoding="utf-8"))
        assert lines == n, f"export has {lines} lines for {n} items"
    return rows


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1000, 10_000, 100_000]
    print("peak RSS is each command's own child process (ru_maxrss)")
    table = {n: bench(n) for n in sizes}
    print()
    print(f"{'command':<22}" + "".join(f"{n:>20,}" for n in sizes))
    for i, (label, _, _) in enumerate(table[sizes[0]]):
        cells = "".join(f"{table[n][i][1]:>9.1f} s {table[n][i][2]:>6.0f} MB" for n in sizes)
        print(f"{label:<22}{cells}")


if __name__ == "__main__":
    main()
