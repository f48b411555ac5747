"""Wall time and peak memory of ``compare``'s item diff (``compare.run_diff.diff_runs``) on two
stored runs that really differ. Measured, not asserted.

Synthetic, from the shared CoNLL04 gold: N items cycling its sentences (new ids). Run A's
output is the gold with evidence; run B's is changed on a share of the items (``--changed``,
default 0.3): the first entity dropped, the second retyped, the first relationship reversed, an
evidence quote replaced by one not in the text; every 50th item errored in B. Results are
written straight into a fresh store (no pipeline). Then, in this process: the diff once; once
more under tracemalloc (what the diff itself holds at its peak); and, for reference, one
pass pairing the two runs' stored results by item id (``analysis.stored.in_both_runs``, what
every comparison streams) with nothing else done.

    .venv/bin/python benchmarks/bench_diff.py [N ...] [--changed 0.3] [--top 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("EXTRACTION_EVAL_SHARED_DATA", ROOT.parent / "shared" / "data"))
SOURCES = ("conll04_train.jsonl", "conll04_dev.jsonl", "conll04_test.jsonl")


def _sentences() -> list[dict[str, Any]]:
    rows = []
    for name in SOURCES:
        with (DATA / name).open(encoding="utf-8") as fh:
            rows.extend(json.loads(line) for line in fh)
    return rows


def _gold(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "entities": [
            {"name": e["name"], "type": e["type"], "evidence": e["name"]} for e in row["entities"]
        ],
        "relationships": [
            {"source": r["source"], "type": r["type"], "target": r["target"]}
            for r in row["relationships"]
        ],
    }


def _changed(out: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(out))
    ents, rels = out["entities"], out["relationships"]
    if len(ents) > 2:
        ents[2]["evidence"] = "a quote that is not in the text"
    if len(ents) > 1:
        ents[1]["type"] = "Misc"
    if ents:
        ents.pop(0)
    if rels:
        rels[0]["source"], rels[0]["target"] = rels[0]["target"], rels[0]["source"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000])
    parser.add_argument("--changed", type=float, default=0.3)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    if not (DATA / SOURCES[0]).is_file():
        raise SystemExit(f"shared data not found at {DATA}")
    sentences = _sentences()
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["EXTRACTION_EVAL_HOME"] = tmp
            from extraction_eval.analysis.compare.run_diff import diff_runs
            from extraction_eval.analysis.stored import in_both_runs
            from extraction_eval.backends.local import LocalStore
            from extraction_eval.types import DatasetItem, Extraction, ItemResult

            store = LocalStore(Path(tmp) / "store.db", sample=False)
            items = []
            for i in range(n):
                row = sentences[i % len(sentences)]
                items.append(
                    DatasetItem(
                        id=f"diff-{i:06d}",
                        text=row["text"],
                        expected=Extraction.model_validate(_gold(row)),
                    )
                )
            store.upload_items("bench", items)
            runs = {}
            every = max(1, round(1 / args.changed)) if args.changed > 0 else 0
            for name in ("a", "b"):
                run = store.create_run(name=name, dataset="bench", dataset_version=1, config={})
                for i, item in enumerate(items):
                    out = item.expected.model_dump(mode="json")
                    error = None
                    if name == "b" and i % 50 == 49:
                        error, out = "HTTP 500", None
                    elif name == "b" and every and i % every == 0:
                        out = _changed(out)
                    store.record_result(
                        run.id,
                        ItemResult(
                            item_id=item.id,
                            output=None if out is None else Extraction.model_validate(out),
                            error=error,
                            error_kind="provider" if error else None,
                        ),
                    )
                runs[name] = store.get_run_by_id(run.id)
            del items
            started = time.perf_counter()
            diff = diff_runs(store, runs["a"], runs["b"], top=args.top)
            wall = time.perf_counter() - started
            started = time.perf_counter()
            streams = [
                ((r.item_id, r) for r in store.iter_results(runs[x].id, order_by="item_id"))
                for x in ("a", "b")
            ]
            for _ in in_both_runs(streams[0], streams[1], [], []):
                pass
            reading = time.perf_counter() - started
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            tracemalloc.start()  # a second diff, traced: what the diff itself holds at its peak
            diff_runs(store, runs["a"], runs["b"], top=args.top)
            traced = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            t = diff.counts.totals
            print(
                f"{n:>7} items  diff {wall:6.2f} s  ({wall / n * 1e3:.3f} ms/item)"
                f"  changed {diff.counts.changed_items}  fixed {t['fixed']}  broken"
                f" {t['broken']}  retyped {t['retyped']}  flipped {t['flipped']}"
                f"  (pairing the same two runs' stored results by id: {reading:.2f} s)"
                f"  peak Python allocations of the diff {traced:.1f} MB"
                f" (process peak RSS, setup included, {rss:.0f} MB)",
                flush=True,
            )
            store.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
