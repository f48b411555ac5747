"""Time of the paired ``compare`` of two synthetic 10,000-item runs (target: under 2 s with
10,000 resamples). Printed, not asserted.

The dataset cycles the CoNLL04 sentences of the shared data (train, dev, test, negatives) with
new ids; run A predicts each item's gold with a few entities and relationships dropped or
retyped, run B with a different pattern (and 1% errored items), so the two runs differ item by
item. Both are stored in a temp store; then we time:

    library   compare_stored_runs(store, A, B, resamples=10_000)   (read, re-score, bootstrap)
    bootstrap the same on count rows only (paired_compare_counts)
    cli       `extraction-eval compare A B` and `--format json` as child processes

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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        started = time.perf_counter()
        build(home, n)
        print(f"setup: {n} items, two runs stored in {time.perf_counter() - started:.1f} s")

        from extraction_eval.backends.local import LocalStore
        from extraction_eval.evaluators.paired import paired_compare_counts
        from extraction_eval.experiments.paired import compare_stored_runs

        store = LocalStore(seed=False)
        a, b = store.get_run("A"), store.get_run("B")
        assert a is not None and b is not None
        started = time.perf_counter()
        result = compare_stored_runs(store, a, b, resamples=10_000, seed=42)
        library = time.perf_counter() - started
        f1 = result.comparison.metric("entity_f1")
        print(
            f"library compare_stored_runs: {library:.2f} s  (entity_f1 A {f1.a:.4f} B {f1.b:.4f}"
            f" Δ {f1.delta:+.4f} CI [{f1.ci_low:+.4f}, {f1.ci_high:+.4f}] {f1.verdict})"
        )
        from extraction_eval.experiments.paired import _join, _outputs

        started = time.perf_counter()
        for _ in _join(_outputs(store, a), _outputs(store, b)):
            pass
        print(
            "  of which reading + parsing both runs' outputs:"
            f" {time.perf_counter() - started:.2f} s"
        )
        acc_rows = result.comparison  # the counts are gone; time the bootstrap on fresh rows
        del acc_rows
        import numpy as np

        from extraction_eval.evaluators.paired import WIDTH

        rng = np.random.default_rng(0)
        rows_a = rng.integers(0, 4, size=(n, WIDTH))
        rows_b = rng.integers(0, 4, size=(n, WIDTH))
        started = time.perf_counter()
        paired_compare_counts(rows_a, rows_b, resamples=10_000, seed=42)
        print(
            f"  bootstrap alone on {n} random rows ({2 * WIDTH} distinct columns, the worst case):"
            f" {time.perf_counter() - started:.2f} s"
        )
        store.close()

        env = {**os.environ, "EXTRACTION_EVAL_HOME": str(home), "COLUMNS": "120"}
        for label, extra in (("text", []), ("json", ["--format", "json"])):
            started = time.perf_counter()
            subprocess.run(
                [str(BIN / "extraction-eval"), "compare", "A", "B", *extra],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            print(
                f"cli compare A B --format {label}:"
                f" {time.perf_counter() - started:.2f} s (whole process)"
            )


if __name__ == "__main__":
    main()
