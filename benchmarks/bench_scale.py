"""Wall time, CPU time and peak RSS of a local run and every view a person runs next, at 1k,
10k and 100k items (measured, not asserted).

Each size gets a fresh store (``EXTRACTION_EVAL_HOME`` in a temp dir, removed afterwards
unless ``--keep``) and a synthetic dataset made by cycling the CoNLL04 sentences of the shared
data (``$EXTRACTION_EVAL_SHARED_DATA`` or ``../shared/data``) with new ids. Every command runs
as its own child process through the real CLI; its figures are that child's own (``os.wait4``):

* wall: seconds from start to exit (on a shared machine this grows with the other load);
* cpu: user + system seconds of the child and of its own children (the report's worker
  process): what the command itself cost; read this one when the load average printed beside
  the table is above the number of CPUs);
* peak RSS: the child's own ``ru_maxrss`` plus its children's (the report's worker), both
  written by the child at exit (a small wrapper runs the console script): ``wait4``'s figure
  is the larger of the two, not their sum.

The commands, in order, with the targets of issue 20 (``runs show`` and ``--worst`` < 2 s,
``compare`` < 5 s at 100k items; the report's own targets are the re-shelving issue's):

    datasets upload, run-experiment (offline baseline) twice (A, and B with ``--match exact``),
    runs show A (summary + first page), runs show A --worst, runs show A --category missed,
    runs export A (jsonl), runs export A (csv), compare A B (10,000 resamples),
    report A, report A B (HTML)

    .venv/bin/python benchmarks/bench_scale.py [SIZES...] [--only STEP,...] [--keep DIR]

``--keep DIR`` keeps (or reuses, when DIR already holds the store of the same size) the store
and dataset in DIR, so the views can be timed again without re-running A and B.
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
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from peaks import wrapper  # benchmarks/ is on sys.path: this script's own folder

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("EXTRACTION_EVAL_SHARED_DATA", ROOT.parent / "shared" / "data"))
SOURCES = ("conll04_train.jsonl", "conll04_dev.jsonl", "conll04_test.jsonl")
BIN = Path(sys.executable).parent
# the targets of issue 20 at 100k items (wall seconds on a quiet machine)
TARGETS = {"runs show A": 2.0, "runs show A --worst": 2.0, "compare A B": 5.0}
SETUP = ("datasets upload", "run A (baseline)", "run B (--match exact)")


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


# Runs a console script in this interpreter and, at exit, writes its own peak RSS and the
# largest of its waited-for children's (the report's worker process) to $BENCH_PEAKS_FILE.
# wait4's ru_maxrss alone is the max of the process and its children, not the sum.
_PEAKS = wrapper(
    """
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
)


def measure(
    argv: list[str], env: dict[str, str], out: Path | None = None
) -> tuple[float, float, float, float]:
    """(wall s, CPU s (user + system), peak RSS MB, its children's peak RSS MB) of one child
    process (CPU includes its children's); its stdout goes to ``out`` or nowhere."""
    started = time.perf_counter()
    with (
        open(out or os.devnull, "w", encoding="utf-8") as sink,
        tempfile.NamedTemporaryFile("r", suffix=".peaks") as peaks,
    ):
        env = {**env, "BENCH_PEAKS_FILE": peaks.name}
        wrapped = [sys.executable, "-c", _PEAKS, *argv]
        proc = subprocess.Popen(wrapped, env=env, stdout=sink, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        own, kids = (int(x) / 1024 for x in peaks.read().split())  # Linux: kilobytes
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv[:3])} ... exited {proc.returncode}: {tail}")
    assert abs(usage.ru_maxrss / 1024 - max(own, kids)) < 1, "wait4 disagrees with the peaks"
    return wall, usage.ru_utime + usage.ru_stime, own, kids


def steps(data: Path, tmp: Path) -> Iterator[tuple[str, list[str], Path | None]]:
    cli, run = str(BIN / "extraction-eval"), str(BIN / "run-experiment")
    common = ["--dataset", "scale", "--concurrency", "16"]
    yield "datasets upload", [cli, "datasets", "upload", "scale", str(data)], None
    yield "run A (baseline)", [run, *common, "--name", "a"], None
    yield "run B (--match exact)", [run, *common, "--name", "b", "--match", "exact"], None
    yield "runs show A", [cli, "runs", "show", "a"], tmp / "show.txt"
    yield "runs show A --worst", [cli, "runs", "show", "a", "--worst"], tmp / "worst.txt"
    category = [cli, "runs", "show", "a", "--category", "missed"]
    yield "runs show A --category", category, tmp / "category.txt"
    yield "runs export A jsonl", [cli, "runs", "export", "a"], tmp / "a.jsonl"
    yield "runs export A csv", [cli, "runs", "export", "a", "--format", "csv"], tmp / "a.csv"
    yield "compare A B", [cli, "compare", "a", "b"], tmp / "compare.txt"
    yield "report A", [cli, "report", "a", "--out", str(tmp / "a.html")], None
    yield "report A B", [cli, "report", "a", "b", "--out", str(tmp / "ab.html")], None


Row = tuple[str, float, float, float]


def bench(n: int, keep: Path | None, only: set[str] | None) -> list[Row]:
    rows: list[Row] = []
    tmp = keep / str(n) if keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    reuse = keep is not None and (tmp / "home").exists()
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(tmp / "home"), "COLUMNS": "120"}
        for key in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST"):
            env.pop(key, None)  # local mode whatever the caller's shell has
        data = tmp / "scale.jsonl"
        if not reuse:
            write_dataset(data, n)
        for label, argv, out in steps(data, tmp):
            if (reuse and label in SETUP) or (only and label not in only and label not in SETUP):
                continue
            wall, cpu, own, kids = measure(argv, env, out)
            rss = own + kids  # the sum of the peaks (a report's worker included)
            rows.append((label, wall, cpu, rss))
            size = f"  {out.stat().st_size / 1e6:.1f} MB out" if out else ""
            if label.startswith("report"):
                html = tmp / ("a.html" if label == "report A" else "ab.html")
                size = f"  {html.stat().st_size / 1e6:.1f} MB of HTML"
            split = f" (main {own:.0f} + worker {kids:.0f})" if kids else ""
            print(
                f"{n:>7} items  {label:<24} wall {wall:8.2f} s  cpu {cpu:8.2f} s"
                f"  {rss:7.1f} MB{split}{size}  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        if (tmp / "a.jsonl").exists():
            lines = sum(1 for _ in (tmp / "a.jsonl").open(encoding="utf-8"))
            assert lines == n, f"export has {lines} lines for {n} items"
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10_000, 100_000])
    parser.add_argument("--only", help="comma-separated step labels (the setup always runs)")
    parser.add_argument("--keep", type=Path, help="keep (or reuse) the stores under this folder")
    args = parser.parse_args()
    only = {s.strip() for s in args.only.split(",")} if args.only else None
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC  cpus={os.cpu_count()}"
        f"  load before={' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        "wall / cpu (user+system, wait4: the command's process and its children) / peak RSS:"
        " the sum of the command's and its child processes' peaks"
    )
    table = {n: bench(n, args.keep, only) for n in args.sizes}
    print(f"load after={' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print(f"{'command':<24}" + "".join(f"{n:>34,}" for n in args.sizes) + "  target (100k)")
    for i, (label, *_) in enumerate(table[args.sizes[0]]):
        cells = ""
        for n in args.sizes:
            _, wall, cpu, rss = table[n][i]
            cells += f"{wall:>9.1f} s wall {cpu:>7.1f} s cpu {rss:>5.0f} MB"
        target = TARGETS.get(label)
        print(f"{label:<24}{cells}" + (f"  < {target:g} s" if target else ""))


if __name__ == "__main__":
    main()
