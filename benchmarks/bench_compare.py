"""Time of ``compare`` of two synthetic 10,000-item runs: the paired statistics (10,000
resamples) and the extraction-aware diff, with 30% of the items changed (target: under 2 s).
Printed, not asserted.

The dataset cycles the CoNLL04 sentences of the shared data (train, dev, test, negatives) with
new ids; run A predicts each item's gold with a few entities and relationships dropped or
retyped; run B predicts the same as A except on a share of the items (``--changed``, default
0.3), where it has its own noise, and 1% errored items. Results are written straight into a
temp store (no pipeline) with the counts the runner stores with each result (m008). We time:

    library   compare_and_diff(A, B, store=store) (one pass: stored counts, diff, bootstrap)
    phases    the paired statistics alone, and the bootstrap alone on the count rows
    old rows  the same with the stored counts dropped (rows recorded before m008: re-scored)
    cli       `extraction-eval compare A B` (text and --format json) as child processes

Wall and CPU time are printed: on a shared machine the wall time measures the neighbours too.

    .venv/bin/python benchmarks/bench_compare.py [N_ITEMS] [--changed 0.3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
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


def build(store_dir: Path, n: int, changed: float) -> None:
    os.environ["EXTRACTION_EVAL_HOME"] = str(store_dir)
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.evaluators import ScoringConfig, score_dataset_item
    from extraction_eval.evaluators.counts import counts_key, encode_counts
    from extraction_eval.types import DatasetItem, Extraction, ItemResult

    scoring = ScoringConfig(match="exact")
    key = counts_key(scoring)

    def counts(item: DatasetItem, pred: Extraction | None) -> str:
        """What the runner stores with the result (ItemRunner.counts)."""
        return encode_counts(score_dataset_item(item, pred, scoring), key=key)

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
    store = LocalStore(sample=False)
    store.upload_items("bench-compare", items)
    outputs: dict[str, list[Extraction | None]] = {}
    rng = random.Random(1)
    outputs["A"] = [
        Extraction.model_validate(_noisy(sentences[i % len(sentences)], rng, 0.15, 0.05))
        for i in range(n)
    ]
    rng = random.Random(2)
    outputs["B"] = []
    for i, same in enumerate(outputs["A"]):
        roll = rng.random()
        if roll < 0.01:
            outputs["B"].append(None)  # errored
        elif roll < 0.01 + changed - 0.01:
            row = sentences[i % len(sentences)]
            other = Extraction.model_validate(_noisy(row, rng, 0.10, 0.08))
            if other == same:  # really changed: one false positive more
                extra = {"name": row["text"].split()[0], "type": "Other"}  # type: ignore[attr-defined]
                other = Extraction.model_validate(
                    {
                        **other.model_dump(mode="json"),
                        "entities": [*other.model_dump(mode="json")["entities"], extra],
                    }
                )
            outputs["B"].append(other)
        else:
            outputs["B"].append(same)
    for name in ("A", "B"):
        run = store.create_run(
            name=name,
            dataset="bench-compare",
            dataset_version=1,
            config={"scoring": scoring.to_json()},
        )
        for item, out in zip(items, outputs[name], strict=True):
            if out is None:
                result = ItemResult(
                    item_id=item.id,
                    error="timeout",
                    error_kind="timeout",
                    counts=counts(item, None),
                )
            else:
                result = ItemResult(item_id=item.id, output=out, counts=counts(item, out))
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


def cli(home: Path, label: str) -> None:
    env = {**os.environ, "EXTRACTION_EVAL_HOME": str(home), "COLUMNS": "120"}
    for fmt, extra in (("text", []), ("json", ["--format", "json"])):
        started = time.perf_counter()
        argv = [str(BIN / "extraction-eval"), "compare", "A", "B", *extra]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, argv
        print(
            f"cli `compare A B --format {fmt}` ({label}, whole process, imports included):"
            f" {time.perf_counter() - started:.2f} s wall,"
            f" {usage.ru_utime + usage.ru_stime:.2f} s CPU, peak RSS"
            f" {usage.ru_maxrss / 1024:.0f} MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=10_000)
    parser.add_argument("--changed", type=float, default=0.3)
    args = parser.parse_args()
    n = args.n
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        with Timer() as t:
            build(home, n, args.changed)
        print(f"setup: {n} items, two runs stored ({t})")

        from extraction_eval.analysis.compare.runs import (
            CompareOptions,
            compare_and_diff,
            compare_runs,
        )
        from extraction_eval.backends.local import LocalStore

        store = LocalStore(sample=False)
        a, b = store.get_run("A"), store.get_run("B")
        assert a is not None and b is not None

        def library(label: str) -> None:
            with Timer() as whole:
                result, diff = compare_and_diff(
                    a, b, store=store, options=CompareOptions(resamples=10_000, seed=42)
                )
            f1 = result.comparison.metric("entity_f1")
            print(
                f"compare_and_diff ({label}), 10,000 resamples: {whole}\n"
                f"  ({diff.counts.changed_items} of {result.comparison.items} items changed;"
                f" entity_f1 A {f1.a:.4f} B {f1.b:.4f} Δ {f1.delta:+.4f}"
                f" CI [{f1.ci_low:+.4f}, {f1.ci_high:+.4f}] {f1.verdict})"
            )
            with Timer() as t:
                compare_runs(a, b, store=store, options=CompareOptions(resamples=10_000, seed=42))
            print(f"  the paired statistics alone:                {t}")
            with Timer() as t:
                compare_and_diff(a, b, store=store, options=CompareOptions(resamples=1, seed=42))
            print(f"  all but the bootstrap (1 resample):         {t}")

        library("stored counts")
        store.close()
        cli(home, "stored counts")
        conn = sqlite3.connect(home / "store.db")
        with conn:
            conn.execute("UPDATE results SET counts = NULL")  # as rows recorded before m008
        conn.close()
        store = LocalStore(sample=False)
        library("rows without stored counts: re-scored")
        store.close()
        cli(home, "re-scored")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
