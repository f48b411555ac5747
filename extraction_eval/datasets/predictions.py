"""Prediction JSONL files for ``score``: ``{"id", "entities", "relationships"}`` per line.

Read with the same line reader and the same normalisation as gold (``jsonl.parse_extraction``),
so a prediction and its gold line are compared on equal terms.
"""

from __future__ import annotations

from pathlib import Path

from extraction_eval.datasets.jsonl import object_notes, parse_extraction
from extraction_eval.datasets.lines import Line, read
from extraction_eval.types import Extraction

__all__ = ["read_predictions"]


def _prediction(line: Line, problems: list[str]) -> tuple[str, Extraction]:
    return line.id, parse_extraction(line.obj, problems)


def read_predictions(path: Path) -> tuple[dict[str, Extraction], list[str], int]:
    """Prediction lines by id, the warnings, and how many non-blank lines were read."""
    convert, notes = object_notes(Path(path), _prediction)
    got = read(path, convert)
    return dict(got.records), got.warnings + notes, got.lines
