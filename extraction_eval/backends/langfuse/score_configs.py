"""LangFuse score configs for our scores, created once per project and reused.

A score posted with its ``config_id`` is validated by LangFuse against the config (range,
categories) and the UI's filters and charts know its shape: a 0-1 ratio, a boolean, one of
the failure categories. Creation is idempotent: an existing, unarchived config of the same
name and data type is used as it is (LangFuse has no unique constraint on config names, so
we look before creating).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extraction_eval.backends.langfuse.errors import api_errors
from extraction_eval.evaluators.taxonomy import CATEGORIES

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = ["SCORE_CONFIGS", "ScoreConfigSpec", "ensure_score_configs"]

_PAGE = 100


@dataclass(frozen=True)
class ScoreConfigSpec:
    name: str
    data_type: str  # NUMERIC | BOOLEAN | CATEGORICAL
    description: str
    min_value: float | None = None
    max_value: float | None = None
    categories: tuple[str, ...] = ()


_RATIOS = (
    "entity_precision",
    "entity_recall",
    "entity_f1",
    "entity_typed_f1",
    "type_accuracy",
    "relationship_precision",
    "relationship_recall",
    "relationship_f1",
    "relationship_accuracy",
    "evidence_coverage_rate",
)

SCORE_CONFIGS: tuple[ScoreConfigSpec, ...] = (
    *(
        ScoreConfigSpec(name, "NUMERIC", f"extraction-eval: {name}, a ratio", 0.0, 1.0)
        for name in _RATIOS
    ),
    ScoreConfigSpec(
        "extraction_error", "BOOLEAN", "extraction-eval: the item failed (no usable output)"
    ),
    ScoreConfigSpec(
        "zero_fp_pass", "BOOLEAN", "extraction-eval: an item with empty gold got no objects"
    ),
    ScoreConfigSpec(
        "failure_category",
        "CATEGORICAL",
        "extraction-eval: a failure category present on the item (one score per category)",
        categories=tuple(CATEGORIES),
    ),
)


def _field(config: Any, name: str) -> Any:
    return getattr(config, name, None)


def _existing(lf: Langfuse) -> list[Any]:
    out: list[Any] = []
    page = 1
    while True:
        with api_errors(lf, "listing score configs"):
            batch = lf.api.score_configs.get(page=page, limit=_PAGE)
        out.extend(batch.data)
        if page >= (batch.meta.total_pages or 1):
            return out
        page += 1


def _matches(config: Any, spec: ScoreConfigSpec) -> bool:
    data_type = str(getattr(_field(config, "data_type"), "value", _field(config, "data_type")))
    if _field(config, "name") != spec.name or data_type != spec.data_type:
        return False
    if _field(config, "is_archived"):
        return False
    if spec.categories:
        labels = {str(_field(c, "label")) for c in _field(config, "categories") or ()}
        return set(spec.categories) <= labels  # a category we post must exist
    return True


def ensure_score_configs(
    lf: Langfuse, specs: Sequence[ScoreConfigSpec] = SCORE_CONFIGS
) -> Mapping[str, str]:
    """Score name -> config id, creating the configs LangFuse lacks (idempotent)."""
    from langfuse.api import ConfigCategory, ScoreConfigDataType

    existing = _existing(lf)
    ids: dict[str, str] = {}
    for spec in specs:
        found = next((c for c in existing if _matches(c, spec)), None)
        if found is None:
            kwargs: dict[str, Any] = {"description": spec.description}
            if spec.min_value is not None:
                kwargs["min_value"] = spec.min_value
            if spec.max_value is not None:
                kwargs["max_value"] = spec.max_value
            if spec.categories:
                kwargs["categories"] = [
                    ConfigCategory(label=label, value=float(i))
                    for i, label in enumerate(spec.categories)
                ]
            with api_errors(lf, f"creating the score config {spec.name!r}"):
                found = lf.api.score_configs.create(
                    name=spec.name, data_type=ScoreConfigDataType(spec.data_type), **kwargs
                )
        ids[spec.name] = str(found.id)
    return ids
