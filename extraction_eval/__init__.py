"""extraction-eval: score LLM extraction pipelines, locally or in LangFuse."""

from extraction_eval.types import (
    DatasetItem,
    Entity,
    Extraction,
    ItemResult,
    Relationship,
    Schema,
    Score,
)

__version__ = "0.1.0"

__all__ = [
    "DatasetItem",
    "Entity",
    "Extraction",
    "ItemResult",
    "Relationship",
    "Schema",
    "Score",
    "__version__",
]
