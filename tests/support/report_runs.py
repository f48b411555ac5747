"""Two real runs for the HTML report tests: a small dataset with known evidence and two
scripted pipelines (``run_a``, ``run_b``) whose answers are fixed per item, so every highlight
status, an error, a gold-empty hallucination and a hostile text are present.

``make_runs(store, path)`` uploads the dataset and runs both through ``run_experiment`` (the
real local runner, store and scoring); the runs are called ``rep-a`` and ``rep-b``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HOSTILE = (
    "Bob wrote </script><script>window.__pwned=1</script> & <b>bold</b>"
    ' <img src=x onerror="window.__pwned=2"> on the wall.'
)
FILLERS = 58  # items r-004 ... : enough for a second page of the table (50 a page)


def _e(name: str, type_: str, evidence: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": type_}
    if evidence is not None:
        out["evidence"] = evidence
    return out


def dataset_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {
            "id": "r-001",
            "text": "Ada Lovelace met Charles Babbage in London in 1833.",
            "entities": [
                _e("Ada Lovelace", "person", "Ada Lovelace"),
                _e("Charles Babbage", "person", "Charles Babbage"),
                _e("London", "location", "in London"),
            ],
            "relationships": [
                {
                    "source": "Ada Lovelace",
                    "type": "met",
                    "target": "Charles Babbage",
                    "evidence": "Ada Lovelace met Charles Babbage",
                }
            ],
        },
        {"id": "r-002", "text": HOSTILE, "entities": [_e("Bob", "person", "Bob")]},
        {"id": "r-003", "text": "Nothing happens here.", "entities": []},
    ]
    for i in range(FILLERS):
        n = i + 4
        rows.append(
            {
                "id": f"r-{n:03d}",
                "text": f"Person{n} lives in Town{n}.",
                "entities": [
                    _e(f"Person{n}", "person", f"Person{n}"),
                    _e(f"Town{n}", "location", f"Town{n}"),
                ],
            }
        )
    return rows


# r-001 in A: Ada matched, London matched, Charles Babbage missed, "1833" spurious (no date in
# the gold), "Paris" ungrounded (its evidence is not in the text); B: all three entities and the
# relationship, London missed. r-002 fails in B. r-003 (gold-empty): B hallucinates.
_A: dict[str, dict[str, Any]] = {
    "r-001": {
        "entities": [
            _e("Ada Lovelace", "person", "Ada Lovelace"),
            _e("London", "location", "in London"),
            _e("1833", "date", "1833"),
            _e("Paris", "location", "born in Paris"),
        ],
        "relationships": [],
    },
    "r-002": {"entities": [_e("Bob", "person", "Bob")], "relationships": []},
    "r-003": {"entities": [], "relationships": []},
}
_B: dict[str, dict[str, Any]] = {
    "r-001": {
        "entities": [
            _e("Ada Lovelace", "person", "Ada Lovelace"),
            _e("Charles Babbage", "person", "Charles Babbage"),
        ],
        "relationships": [
            {
                "source": "Ada Lovelace",
                "type": "met",
                "target": "Charles Babbage",
                "evidence": "Ada Lovelace met Charles Babbage",
            }
        ],
    },
    "r-003": {"entities": [_e("Nothing", "thing", "Nothing")], "relationships": []},
}


def _filler(item: Any) -> dict[str, Any]:
    return {"entities": [e.model_dump() for e in item.expected.entities], "relationships": []}


def run_a(*, item: Any, **_: Any) -> dict[str, Any]:
    return _A.get(item.id) or _filler(item)


def run_b(*, item: Any, **_: Any) -> dict[str, Any]:
    if item.id == "r-002":
        raise RuntimeError("scripted failure on r-002")
    return _B.get(item.id) or _filler(item)


def write_dataset(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for row in dataset_rows():
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def make_runs(store: Any, tmp: Path, *, dataset: str = "report-set") -> None:
    """Upload the dataset and run both pipelines on it (local mode, the real runner)."""
    import asyncio

    from extraction_eval.datasets.jsonl import read_items
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.run import arun_local
    from extraction_eval.pipeline.base import PipelineConfig

    items, problems = read_items(write_dataset(tmp / "report-set.jsonl"))
    assert not problems, problems
    store.upload_items(dataset, items)
    here = Path(__file__).resolve()
    for name, fn in (("rep-a", "run_a"), ("rep-b", "run_b")):
        config = RunConfig(
            dataset=dataset,
            name=name,
            pipeline=PipelineConfig(pipeline=f"{here}:{fn}"),
        )
        asyncio.run(arun_local(config, store=store))
