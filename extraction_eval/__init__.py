"""extraction-eval: score LLM extraction pipelines, locally or in LangFuse.

The types are re-exported lazily (PEP 562): ``import extraction_eval.cli`` for ``--help`` then
builds no pydantic model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("extraction_eval.types"), name)
    raise AttributeError(f"module 'extraction_eval' has no attribute {name!r}")
