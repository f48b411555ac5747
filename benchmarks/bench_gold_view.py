"""What labels and ignore regions cost per item. Figures are printed, never asserted.

    .venv/bin/python benchmarks/bench_gold_view.py [--repeat 5]

CoNLL04 test (288 documents, from ../shared/data or $EXTRACTION_EVAL_SHARED_DATA), gold
against a seeded perturbed copy (a third of the entities dropped, a fifth retyped), scored
per item four ways: ``score_item`` on the raw gold (the floor), ``score_dataset_item`` with no
schema, with the CoNLL04 label map (examples/conll04/schema.json; the predictions in the
mapped labels, as a pipeline asked for them answers), and with a confidence
floor over synthetic ensemble metadata (every fourth gold object below it: the ignore-region
path, which aligns twice). Best of ``--repeat`` wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.datasets.schema import read_schema
from extraction_eval.evaluators import ScoringConfig, score_dataset_item, score_item
from extraction_eval.evaluators.gold_view import mapped_gold
from extraction_eval.types import DatasetItem, Extraction

ROOT = Path(__file__).resolve().parents[1]


def _data() -> Path:
    env = os.environ.get("EXTRACTION_EVAL_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def _perturbed(gold: Extraction, rng: random.Random) -> Extraction:
    ents = [e for e in gold.entities if rng.random() > 1 / 3]
    ents = [e.model_copy(update={"type": "person"}) if rng.random() < 0.2 else e for e in ents]
    return Extraction(entities=ents, relationships=gold.relationships)


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    gold, _ = read_gold(_data() / "conll04_test.jsonl")
    rng = random.Random(7)
    preds = {g.id: _perturbed(g.extraction, rng) for g in gold}
    schema = read_schema(ROOT / "examples" / "conll04" / "schema.json")
    cfg = ScoringConfig(resamples=0)

    def meta(g: Extraction) -> dict[str, object]:
        conf = [0.5 if i % 4 == 3 else 1.0 for i in range(len(g.entities) + len(g.relationships))]
        n = len(g.entities)
        return {
            "gold": {
                "entities": [{"confidence": c} for c in conf[:n]],
                "relationships": [{"confidence": c} for c in conf[n:]],
            }
        }

    plain = [DatasetItem(id=g.id, text=g.text, expected=g.extraction) for g in gold]
    # a pipeline asked for the mapped labels answers with them
    asked = {k: mapped_gold(v, schema) for k, v in preds.items()}
    mapped = [i.model_copy(update={"schema_": schema}) for i in plain]
    ensemble = [i.model_copy(update={"metadata": meta(i.expected)}) for i in plain]
    ways: dict[str, Callable[[], object]] = {
        "score_item (raw gold)": lambda: [
            score_item(item_id=i.id, text=i.text, gold=i.expected, pred=preds[i.id], config=cfg)
            for i in plain
        ],
        "score_dataset_item, no schema": lambda: [
            score_dataset_item(i, preds[i.id], cfg) for i in plain
        ],
        "score_dataset_item, label map": lambda: [
            score_dataset_item(i, asked[i.id], cfg) for i in mapped
        ],
        "score_dataset_item, floor 0.9": lambda: [
            score_dataset_item(i, preds[i.id], cfg, floor=0.9) for i in ensemble
        ],
    }
    ignored = sum(score_dataset_item(i, preds[i.id], cfg, floor=0.9).ignored_gold for i in ensemble)
    print(f"CoNLL04 test: {len(gold)} items; best of {args.repeat}; 2 shared cores")
    print(f"(floor 0.9: {ignored} gold objects below it, ignore regions)")
    for name, fn in ways.items():
        t = _best(fn, args.repeat)
        print(f"{name:32s} {t * 1000:8.1f} ms  {t * 1e6 / len(gold):8.1f} µs/item")
    print(json.dumps({"items": len(gold), "repeat": args.repeat}))


if __name__ == "__main__":
    main()
