"""Time of the paired ``compare`` of two synthetic 10,000-item runs (target: under 2 s with
10,000 resamples). Printed, not asserted.

The dataset cycles the CoNLL04 sentences of the shared data (train, dev, test, negatives) with
new ids; run A predicts each item's gold with a few entities and relationships dropped or
retyped, run B with a different pattern (and 1% errored items), so the two runs differ item by
item. Both are stored in a temp store; then we time:

    library   compare_stored_runs(store, A, B, resamples=10_000)   (read, re-score, bootstrap)
    phases    gold load, read + re-score, bootstrap (also on random rows: the worst case)
    cli       `extraction-eval compare A B` and `--format json` as child processes

Wall and CPU time are printed: on a shared machine the wall time measures the neighbours too.

    .venv/bin/python benchmarks/bench_compare.py [N_ITEMS]    # default 10000
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("EXTRACTION_EVAL_SHARED_DATA", ROOT.parent / "shared" / "data"))
SOURCES = (
    "conll04_train.jsonl",
    "conll04_dev.jsonl",
    "conll04_test.jsonl",
    "conll04_negatives.jsonl",
)
BIN = Path(sys.executable).parent


def _sentences() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for name in SOURCES:
        with (DATA / name).open(encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh)
    return rows


def _noisy(row: dict[str, object], rng: random.Random, drop: float, retype: float) -> dict:
    ents = []
    for e in row["entities"]:  # type: ignore[attr-defined]
        if rng.random() < drop:
            continue
        kind = "Other" if rng.random() < retype else e["type"]
        ents.append({"name": e["name"], "type": kind, "evidence": e["name"]})
    rels = [
        {"source": r["source"], "type": r["type"], "target": r["target"]}
        for r in row["relationships"]  # type: ignore[attr-defined]
        if rng.random() >= drop
    ]
    return {"entities": ents, "relationships": rels}


def build(store_dir: Path, n: int) -> None:
    os.environ["EXTRACTION_EVAL_HOME"] = str(store_dir)
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.types import DatasetItem, Extraction, ItemResult

    sentences = _sentences()
    items = []
    for i in range(n):
        row = sentences[i % len(sentences)]
        items.append(
            DatasetItem.model_validate(
                {
                    "id": f"bench-{i:06d}",
                    "input": {"text": row["text"]},
                    "text": row["text"],
                    "expected": {
                        "entities": [
                            {"name": e["name"], "type": e["type"]} for e in row["entities"]
                        ],
                        "relationships": [
                            {"source": r["source"], "type": r["type"], "target": r["target"]}
                            for r in row["relationships"]
                        ],
                    },
                }
            )
        )
    store = LocalStore(seed=False)
    store.upload_items("bench-compare", items)
    for name, seed, drop, retype, errors in (("A", 1, 0.15, 0.05, 0.0), ("B", 2, 0.10, 0.08, 0.01)):
        run = store.create_run(
            name=name,
            dataset="bench-compare",
            dataset_version=1,
            config={"scoring": {"match": "exact"}},
        )
        rng = random.Random(seed)
        for i in range(n):
            row = sentences[i % len(sentences)]
            if rng.random() < errors:
                result = ItemResult(item_id=f"bench-{i:06d}", error="timeout", error_kind="timeout")
            else:
                out = Extraction.model_validate(_noisy(row, rng, drop, retype))
                result = ItemResult(item_id=f"bench-{i:06d}", output=out)
            store.record_result(run.id, result)
        store.finish_run(run.id, status="completed", run_scores=[], summary={"values": {}})
    store.close()


class Timer:
    """Wall and CPU (this process) seconds of a block: the machine may be shared, and CPU
    time is what the work itself costs."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:6.2f} s wall, {self.cpu:6.2f} s CPU"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        with Timer() as t:
            build(home, n)
        print(f"setup: {n} items, two runs stored ({t})")

        import numpy as np

        from extraction_eval.backends.local import LocalStore
        from extraction_eval.evaluators.paired import WIDTH, paired_compare_counts
        from extraction_eval.experiments.paired import (
            compare_stored_runs,
            pair_and_score,
            run_gold,
            run_scoring,
        )

        store = LocalStore(seed=False)
        a, b = store.get_run("A"), store.get_run("B")
        assert a is not None and b is not None
        with Timer() as whole:
            result = compare_stored_runs(store, a, b, resamples=10_000, seed=42)
        f1 = result.comparison.metric("entity_f1")
        print(
            f"compare_stored_runs, 10,000 resamples:      {whole}\n"
            f"  (entity_f1 A {f1.a:.4f} B {f1.b:.4f} Δ {f1.delta:+.4f}"
            f" CI [{f1.ci_low:+.4f}, {f1.ci_high:+.4f}] {f1.verdict})"
        )
        with Timer() as t:
            gold = run_gold(store, a)
        print(f"  gold: the dataset version's items           {t}")
        with Timer() as t:
            paired = pair_and_score(store, a, b, gold, run_scoring(a))
        print(f"  read both runs' outputs + re-score 2×{n}:  {t}")
        rows_a, rows_b = paired.accumulator.matrices()
        with Timer() as t:
            paired_compare_counts(rows_a, rows_b, resamples=10_000, seed=42)
        print(f"  paired bootstrap + McNemar on the rows:     {t}")
        rng = np.random.default_rng(0)
        rand_a = rng.integers(0, 4, size=(n, WIDTH))
        rand_b = rng.integers(0, 4, size=(n, WIDTH))
        with Timer() as t:
            paired_compare_counts(rand_a, rand_b, resamples=10_000, seed=42)
        print(f"  bootstrap, random rows ({2 * WIDTH} distinct columns): {t}")
        store.close()

        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(home), "COLUMNS": "120"}
        for label, extra in (("text", []), ("json", ["--format", "json"])):
            started = time.perf_counter()
            argv = [str(BIN / "extraction-eval"), "compare", "A", "B", *extra]
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, argv
            print(
                f"cli `compare A B --format {label}` (whole process, imports included):"
                f" {time.perf_counter() - started:.2f} s wall,"
                f" {usage.ru_utime + usage.ru_stime:.2f} s CPU, peak RSS"
                f" {usage.ru_maxrss / 1024:.0f} MB"
            )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
