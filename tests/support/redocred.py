"""Re-DocRED predictions that are right but name entities by another of their gold mentions
(issue 31's case), for the tests and the benchmark alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def renamed_predictions(gold_path: Path) -> tuple[list[dict[str, Any]], int]:
    """The gold with each entity named by its first other mention; how many were renamed."""
    preds, renamed = [], 0
    for line in gold_path.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        names = []
        for e in doc["entities"]:
            own = " ".join(e["name"].casefold().split())
            other = [
                m["name"]
                for m in e.get("mentions", [])
                if " ".join(m["name"].casefold().split()) != own
            ]
            renamed += bool(other)
            names.append(other[0] if other else e["name"])
        preds.append(
            {
                "id": doc["id"],
                "entities": [
                    {"name": n, "type": e["type"]}
                    for n, e in zip(names, doc["entities"], strict=True)
                ],
                "relationships": [
                    {"source": names[r["head"]], "type": r["type"], "target": names[r["tail"]]}
                    for r in doc["relationships"]
                ],
            }
        )
    return preds, renamed
