"""PPI-corrected P/R/F1 of a stored run (:mod:`extraction_eval.evaluators.stats.ppi`): the run's
outputs scored against its dataset's model-voted gold on every item, and against a person's
gold on the verified items (a ``--human`` JSONL file: id, entities, relationships; text
optional), with the run's own scoring settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.datasets.predictions import read_predictions
from extraction_eval.errors import UsageError
from extraction_eval.evaluators import score_dataset_item
from extraction_eval.evaluators.stats.ppi import PPIResult, ppi_prf
from extraction_eval.types import Extraction


@dataclass
class RunPPI:
    run: str
    results: list[PPIResult]
    confidence: float
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "method": "prediction-powered inference (Angelopoulos et al. 2023), delta method",
            "level": self.confidence,
            "metrics": {r.metric: r.to_json() for r in self.results},
            "warnings": self.warnings,
        }


def read_human_gold(path: str | Path) -> tuple[dict[str, Extraction], list[str]]:
    """Verified items (id -> a person's gold) from a JSONL file, and its warnings. A line is
    ``{"id", "entities", "relationships"}``; ``text`` may be there and is not needed (the
    dataset's item holds it), so it is read like a predictions file."""
    records, warnings, _ = read_predictions(Path(path))
    if not records:
        first = f" (first problem: {warnings[0]})" if warnings else ""
        raise UsageError(f"{path}: no usable verified items{first}")
    return records, warnings


def run_ppi(store: LocalStore, run: RunRecord, human: Mapping[str, Extraction]) -> RunPPI:
    """PPI P/R/F1 (entities, relationships) of ``run`` with ``human``-verified items."""
    scoring = run_scoring(run)
    items = run_gold(store, run)
    ids: list[str] = []
    model_rows: list[tuple[int, ...]] = []
    human_rows: list[tuple[int, ...]] = []
    for item_id, output, error, _ in store.iter_outputs(run.id):
        item = items.get(item_id)
        if item is None:
            continue
        pred = (
            None if error is not None or output is None else Extraction.model_validate_json(output)
        )
        s = score_dataset_item(item, pred, scoring)
        model_rows.append((*s.entities, *s.relationships))
        if item_id in human:
            checked = item.model_copy(update={"expected": human[item_id]})
            h = score_dataset_item(checked, pred, scoring)
            human_rows.append((*h.entities, *h.relationships))
        else:
            human_rows.append((0,) * 6)
        ids.append(item_id)
    seen = set(ids)
    warnings = []
    unknown = sorted(set(human) - seen)
    if unknown:
        warnings.append(
            f"{len(unknown)} verified items are not in run {run.name!r} and were left out:"
            f" {', '.join(unknown[:10])}"
        )
    verified = np.asarray([i in human for i in ids], dtype=bool)
    if not verified.any():
        raise UsageError(f"no verified item is in run {run.name!r}: nothing to correct with")
    model = np.asarray(model_rows, dtype=np.int64).reshape(-1, 6)
    hum = np.asarray(human_rows, dtype=np.int64).reshape(-1, 6)
    results = []
    for k, prefix in ((0, "entity"), (3, "relationship")):
        results += ppi_prf(
            model[:, k : k + 3],
            hum[:, k : k + 3],
            verified,
            prefix=prefix,
            confidence=scoring.confidence,
        )
    return RunPPI(run.name, results, scoring.confidence, warnings)
