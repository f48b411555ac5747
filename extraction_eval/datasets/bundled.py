"""The datasets shipped inside the package (``extraction_eval/data/``), read like any file.

The sample seeds every new local store, the journal example shows schema-declared attributes,
and the example gold/predictions pair is what ``extraction-eval score`` scores with no files.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from extraction_eval.datasets.jsonl import read_items
from extraction_eval.errors import UsageError
from extraction_eval.types import DatasetItem

__all__ = [
    "JOURNAL_DATASET",
    "example_paths",
    "journal_items",
    "sample_items",
]

JOURNAL_DATASET = "journal-example"


def _bundled(filename: str) -> list[DatasetItem]:
    ref = resources.files("extraction_eval").joinpath("data", filename)
    with resources.as_file(ref) as path:
        items, warnings = read_items(path)
    if warnings:  # pragma: no cover - the bundled files are validated by tests
        raise UsageError(f"bundled dataset {filename}: {warnings[0]}")
    return items


def sample_items() -> list[DatasetItem]:
    """The bundled sample dataset (``extraction-eval``), validated by the tests."""
    return _bundled("sample_dataset.jsonl")


def journal_items() -> list[DatasetItem]:
    """The bundled journal dataset (``journal-example``): observations with schema-declared
    attributes (domain, polarity, intensity, time), validated by the tests."""
    return _bundled("journal_dataset.jsonl")


def example_paths() -> tuple[Path, Path]:
    """The bundled example (gold, predictions) that ``score`` uses when given no files."""
    base = resources.files("extraction_eval") / "data" / "examples"
    return Path(str(base / "gold.jsonl")), Path(str(base / "predictions.jsonl"))
