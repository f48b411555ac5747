"""Runs big enough to split a report's build at a chunk boundary (``html_report.build``): 1,234
items whose entity and relationship types change along the dataset (so the worker's part brings
types the first part has not seen), and three scripted pipelines: ``split_a``; ``split_b``, which
answers otherwise on every third item and fails on every 97th; ``split_c``, A's answers (scored
with ``--match exact`` by the test, as bench_scale's B is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

N_ITEMS = 1234
TYPES = ("person", "location", "org", "date", "product")


def _type(i: int) -> str:
    return TYPES[min(i // 300, len(TYPES) - 1)]  # a new type every 300 items


def dataset_rows() -> list[dict[str, Any]]:
    rows = []
    for i in range(N_ITEMS):
        a, b, t = f"Name{i}", f"Place{i % 41}", _type(i)
        text = f"{a} works with {b} since {1900 + i % 120}; {a} said so."
        entities = [
            {"name": a, "type": t, "evidence": f"{a} works"},
            {"name": b, "type": "location", "evidence": b},
        ]
        rels = [{"source": a, "type": f"with_{t}", "target": b, "evidence": f"{a} works with"}]
        if i % 11 == 0:  # gold-empty items
            entities, rels = [], []
        rows.append({"id": f"s-{i:05d}", "text": text, "entities": entities, "relationships": rels})
    return rows


def _gold(item: Any) -> dict[str, Any]:
    return {
        "entities": [e.model_dump() for e in item.expected.entities],
        "relationships": [r.model_dump() for r in item.expected.relationships],
    }


def _n(item: Any) -> int:
    return int(item.id.split("-")[1])


def split_a(*, item: Any, **_: Any) -> dict[str, Any]:
    out = _gold(item)
    if _n(item) % 5 == 0:  # a miss, a spurious one and an ungrounded one
        out["entities"] = [
            *out["entities"][1:],
            {"name": "1901", "type": "date", "evidence": "1901"},
            {"name": "Paris", "type": "location", "evidence": "born in Paris"},
        ]
    return out


def split_b(*, item: Any, **_: Any) -> dict[str, Any]:
    n = _n(item)
    if n % 97 == 5:
        raise RuntimeError(f"scripted failure on {item.id}")
    if n % 3 == 0:  # other answers: retyped, a flipped relationship, a new false positive
        out = _gold(item)
        for e in out["entities"][:1]:
            e["type"] = "thing"
        for r in out["relationships"]:
            r["source"], r["target"] = r["target"], r["source"]
        out["entities"].append({"name": "since", "type": f"word{n % 4}", "evidence": "since"})
        return out
    return split_a(item=item)


def split_c(*, item: Any, **_: Any) -> dict[str, Any]:
    return split_a(item=item)


def make_split_runs(store: Any, tmp: Path, *, dataset: str = "split-set") -> None:
    """Upload the dataset and run the three pipelines on it (the real local runner)."""
    import asyncio
    import json

    from extraction_eval.datasets.jsonl import read_items
    from extraction_eval.evaluators import ScoringConfig
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import arun_local
    from extraction_eval.pipeline.base import PipelineConfig

    path = tmp / "split-set.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for row in dataset_rows():
            fh.write(json.dumps(row) + "\n")
    items, problems = read_items(path)
    assert not problems, problems
    store.upload_items(dataset, items)
    here = Path(__file__).resolve()
    for name, fn, match in (
        ("split-a", "split_a", "fuzzy"),
        ("split-b", "split_b", "fuzzy"),
        ("split-c", "split_c", "exact"),
    ):
        config = RunConfig(
            dataset=dataset,
            name=name,
            pipeline=PipelineConfig(pipeline=f"{here}:{fn}"),
            scoring=ScoringConfig(match=match),
        )
        asyncio.run(arun_local(config, store=store))
