"""Evaluators: pure scoring functions (no network, no disk, no clock).

cfg = ScoringConfig(match="fuzzy", threshold=0.85)
s = score_item(item_id="x", text=..., gold=..., pred=..., config=cfg)
scores = item_scores(s)             # what the stores record per item
report = aggregate([s, ...], cfg)
"""

from extraction_eval.evaluators.config import (
    DEFAULT_INVERSE_PAIRS,
    DEFAULT_SYMMETRIC,
    EvidenceMode,
    MatchMode,
    ScoringConfig,
)
from extraction_eval.evaluators.evidence import ContextIndex, TextIndex
from extraction_eval.evaluators.gold_view import GoldView, score_dataset_item
from extraction_eval.evaluators.item import (
    VALUE_NAMES,
    AttributeCount,
    Grounding,
    ItemScore,
    TypeCount,
    score_item,
)
from extraction_eval.evaluators.matching import (
    EntityAlignment,
    EntityPair,
    RelationshipAlignment,
    RelationshipPair,
    align_entities,
    align_relationships,
    assign,
)
from extraction_eval.evaluators.metrics import Counts, f1, precision, recall
from extraction_eval.evaluators.report import ReportAccumulator, aggregate
from extraction_eval.evaluators.scores import item_scores
from extraction_eval.evaluators.stats.bootstrap import bootstrap_prf
from extraction_eval.evaluators.taxonomy import CATEGORIES, TaxonomyEntry

__all__ = [
    "CATEGORIES",
    "DEFAULT_INVERSE_PAIRS",
    "DEFAULT_SYMMETRIC",
    "VALUE_NAMES",
    "AttributeCount",
    "ContextIndex",
    "Counts",
    "EntityAlignment",
    "EntityPair",
    "EvidenceMode",
    "GoldView",
    "Grounding",
    "ItemScore",
    "MatchMode",
    "RelationshipAlignment",
    "RelationshipPair",
    "ReportAccumulator",
    "ScoringConfig",
    "TaxonomyEntry",
    "TextIndex",
    "TypeCount",
    "aggregate",
    "align_entities",
    "align_relationships",
    "assign",
    "bootstrap_prf",
    "f1",
    "item_scores",
    "precision",
    "recall",
    "score_dataset_item",
    "score_item",
]
