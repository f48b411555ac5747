"""What the judge's tests share: a response cache in memory, and one scored pair of files
(IBM for International Business Machines: the same; Lyon for Paris: not) with the loopback
judge that answers as a person would."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from extraction_eval.llm.base import Completion
from extraction_eval.types import DatasetItem
from tests.support.openai_server import user_text

IBM_GOLD = {
    "id": "a",
    "text": "International Business Machines (IBM) moved from Paris to Lyon.",
    "entities": [
        {"name": "International Business Machines", "type": "ORG"},
        {"name": "Paris", "type": "LOC"},
    ],
}
IBM_PRED = {
    "id": "a",
    "entities": [{"name": "IBM", "type": "ORG"}, {"name": "Lyon", "type": "LOC"}],
}


class DictCache:
    """The ``ResponseCache`` protocol in memory."""

    def __init__(self) -> None:
        self.rows: dict[str, Completion] = {}

    def get(self, key: str) -> Completion | None:
        return self.rows.get(key)

    def put(self, key: str, completion: Completion) -> None:
        self.rows[key] = completion


def lyon_differs(body: dict[str, Any], reason: str = "loopback") -> dict[str, Any]:
    """The judge's verdicts for a request ``body``: same unless the pair names Lyon."""
    lines = [x for x in user_text(body).splitlines() if x[:1].isdigit() and " vs " in x]
    answers = [
        {"id": i, "same": "Lyon" not in line, "reason": reason}
        for i, line in enumerate(lines, start=1)
    ]
    return {"verdicts": answers}


def write_ibm_pair(folder: Path) -> tuple[Path, Path]:
    """``IBM_GOLD`` and ``IBM_PRED`` as one-line JSONL files in ``folder``."""
    gold, pred = folder / "gold.jsonl", folder / "pred.jsonl"
    gold.write_text(json.dumps(IBM_GOLD) + "\n", encoding="utf-8")
    pred.write_text(json.dumps(IBM_PRED) + "\n", encoding="utf-8")
    return gold, pred


def last_word_answers(items: Iterable[DatasetItem]) -> dict[str, Any]:
    """A fake model's answers (``register_fake(name, {"items": ...})``) naming every gold
    entity of ``items`` by its last word: string matching misses the multi-word names, a
    judge can credit them."""
    return {
        i.id: {
            "entities": [{"name": e.name.split()[-1], "type": e.type} for e in i.expected.entities],
            "relationships": [],
        }
        for i in items
    }


def last_word_files(directory: Path, items: list[DatasetItem]) -> tuple[Path, Path]:
    """``items``' gold and predictions naming each entity by its last word
    (``last_word_answers``), written as ``score --gold / --predictions`` read them."""
    gold, pred = directory / "gold.jsonl", directory / "pred.jsonl"
    gold.write_text(
        "".join(
            json.dumps({"id": i.id, "text": i.text, **i.expected.model_dump(mode="json")}) + "\n"
            for i in items
        ),
        encoding="utf-8",
    )
    pred.write_text(
        "".join(json.dumps({"id": k, **v}) + "\n" for k, v in last_word_answers(items).items()),
        encoding="utf-8",
    )
    return gold, pred
