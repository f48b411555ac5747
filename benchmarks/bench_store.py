"""Time to record 2,000 item results (with scores) into the local store, one commit each.

Measured, not asserted: the runner commits every result as it finishes, so this is the
store's share of a run's wall time. Prints synchronous=NORMAL (what the store uses) and FULL.

    .venv/bin/python benchmarks/bench_store.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from extraction_eval.backends.local import LocalStore
from extraction_eval.types import Entity, Extraction, ItemResult, Relationship, Score, Usage


def _result(i: int) -> ItemResult:
    return ItemResult(
        item_id=f"item-{i:05d}",
        output=Extraction(
            entities=[
                Entity(name=f"Person {i}", type="person", evidence=f"Person {i} works"),
                Entity(name="Acme", type="organization", evidence="for Acme"),
            ],
            relationships=[Relationship(source=f"Person {i}", type="employed_by", target="Acme")],
        ),
        raw_output='{"entities": [], "relationships": []}',
        attempts=1,
        latency_ms=200.0,
        usage=Usage(tokens_in=400, tokens_out=120, cost_usd=0.0004),
        scores=[
            Score(name="entity_f1", value=0.8),
            Score(name="relationship_f1", value=0.5),
            Score(name="evidence_grounded", value=1.0),
            Score(name="extraction_error", value=False, data_type="BOOLEAN"),
        ],
    )


def bench(n: int, synchronous: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp) / "store.db", sample=False)
        assert store._conn is not None
        store._conn.execute(f"PRAGMA synchronous={synchronous}")
        run = store.create_run(name="bench", dataset="bench", dataset_version=1, config={})
        results = [_result(i) for i in range(n)]
        start = time.perf_counter()
        for r in results:
            store.record_result(run.id, r)
        elapsed = time.perf_counter() - start
        assert len(store.results(run.id)) == n
        store.close()
    return elapsed


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for mode in ("NORMAL", "FULL"):
        t = bench(n, mode)
        print(
            f"synchronous={mode:<6} {n} results x 4 scores, one commit each: "
            f"{t:.2f} s total, {1000 * t / n:.2f} ms/result"
        )


if __name__ == "__main__":
    main()
