"""An item's counts in one run as one integer row (:data:`COLUMNS`, from :func:`item_row`), how a
row is stored with a result and read back (:func:`encode_counts` / :func:`decode_counts`, keyed
by :func:`counts_key`), and every compared metric computed from summed rows
(:func:`metric_arrays`). Pure: the paired comparison (:mod:`.paired`) and the config matrix
build on these rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from extraction_eval.evaluators.config import ScoringConfig
from extraction_eval.evaluators.diff import FollowedRun, follow
from extraction_eval.evaluators.item import ItemScore, TypeCount
from extraction_eval.evaluators.metrics import prf_arrays

# One item's integer counts in one run, in this order (what :func:`item_row` returns).
COLUMNS: tuple[str, ...] = (
    "entity_tp",
    "entity_fp",
    "entity_fn",
    "entity_typed_tp",
    "entity_typed_fp",
    "entity_typed_fn",
    "relationship_tp",
    "relationship_fp",
    "relationship_fn",
    "failed",
    "schema_failure",
    "type_correct",
    "evidence_predicted",
    "evidence_with",
    "evidence_grounded",
    "gold_empty",
    "gold_empty_scored",
    "zero_fp_pass",
    "hallucinations",
    "attribute_checked",
    "attribute_violating",
    "right",
)
COLUMN_INDEX = {name: i for i, name in enumerate(COLUMNS)}
WIDTH = len(COLUMNS)

PRF_GROUPS = ("entity", "entity_typed", "relationship")
# Every metric compared, in display order: the run summary's run-level values (``run_values``
# plus error and schema-failure rates; per-attribute accuracy is not paired).
METRICS: tuple[str, ...] = (
    *(f"{g}_{m}" for g in PRF_GROUPS for m in ("precision", "recall", "f1")),
    "type_accuracy",
    "relationship_accuracy",
    "evidence_coverage_rate",
    "zero_fp_pass_rate",
    "hallucination_rate",
    "error_rate",
    "schema_failure_rate",
    "attribute_violation_rate",
)
# The headline metrics (F1s) the text view puts first.
HEADLINE: tuple[str, ...] = ("entity_f1", "entity_typed_f1", "relationship_f1")


def is_right(score: ItemScore) -> bool:
    """McNemar's per-item outcome: no error and entity F1 = 1; on a gold-empty item, no
    predicted object at all (zero false positives)."""
    if score.failed:
        return False
    if score.gold_empty:
        return score.predicted_objects == 0
    e = score.entities
    return e.fp == 0 and e.fn == 0


def item_row(score: ItemScore, *, schema_failure: bool = False) -> tuple[int, ...]:
    """One item's counts in :data:`COLUMNS` order. ``schema_failure``: the item failed
    because the model's answer did not fit the schema (the result's ``error_kind``)."""
    e, t, r = score.entities, score.entities_typed, score.relationships
    scored_empty = score.gold_empty and not score.failed
    return (
        *e,
        *t,
        *r,
        int(score.failed),
        int(schema_failure),
        score.type_correct,
        score.predicted_objects,
        score.with_evidence(),
        score.grounded(),
        int(score.gold_empty),
        int(scored_empty),
        int(bool(score.zero_fp_pass)),
        score.hallucination_count if scored_empty else 0,
        score.attribute_checked,
        score.attribute_violation_count,
        int(is_right(score)),
    )


def counts_key(
    scoring: ScoringConfig, min_gold_confidence: float | None = None, schemas: Any = None
) -> str:
    """What decides an item's counts (the scoring settings that match and ground objects, the
    gold confidence floor and the run's schemas — their label maps; not the bootstrap's), as a
    short stable hash: stored counts are used only by a comparison that would score the same."""
    parts: list[Any] = [scoring.count_fields(), min_gold_confidence]
    if schemas is not None:  # absent: keys as before schemas counted
        parts.append(schemas)
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class StoredCounts(NamedTuple):
    """One item's counts in one run as stored with its result (:func:`encode_counts`)."""

    row: tuple[int, ...]
    entity_types: tuple[TypeCount, ...]
    relationship_types: tuple[TypeCount, ...]
    # the diff's view of the scorer's alignment (FollowedRun as JSON text), read only if needed
    followed: str | None = None

    @property
    def failed(self) -> bool:
        return bool(self.row[COLUMN_INDEX["failed"]])

    @property
    def schema_failure(self) -> bool:
        return bool(self.row[COLUMN_INDEX["schema_failure"]])

    @property
    def gold_empty(self) -> bool:
        return bool(self.row[COLUMN_INDEX["gold_empty"]])

    def followed_run(self, gold_entities: int, gold_relationships: int) -> FollowedRun | None:
        """The stored diff view when it is readable and fits the gold (None: re-score)."""
        if not self.followed:
            return None
        try:
            run = FollowedRun.from_json(json.loads(self.followed))
        except (ValueError, TypeError):
            return None
        fits = (len(run.entity_state), len(run.relationship_state)) == (
            gold_entities,
            gold_relationships,
        )
        return run if fits else None


def encode_counts(score: ItemScore, *, key: str, schema_failure: bool = False) -> str:
    """The item's count row and per-type counts as compact JSON tagged with ``key``
    (:func:`counts_key` of what it was scored with), then a tab and its :func:`~.diff.follow`
    view as JSON (read only for the items a diff needs; compact JSON has no raw tab)."""

    def types(group: Iterable[TypeCount]) -> list[list[Any]]:
        return [[t.key, t.label, t.tp, t.fp, t.fn] for t in group]

    def dumps(obj: Any) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    counts = [
        key,
        list(item_row(score, schema_failure=schema_failure)),
        types(score.entity_types),
        types(score.relationship_types),
    ]
    return dumps(counts) + "\t" + dumps(follow(score).to_json())


def decode_counts(
    text: str | None, key: str, memo: dict[str, StoredCounts | None] | None = None
) -> StoredCounts | None:
    """The stored counts when they were made with ``key``; None when absent, made with other
    settings, or not readable (the caller re-scores). ``memo`` (count part -> decoded) decodes
    each distinct count part once: in a large run most items repeat another's counts, and the
    repeats share one row and one tuple of per-type counts (which the accumulator sums once)."""
    if not text or not text.startswith(f'["{key}",'):
        return None
    head, _, followed = text.partition("\t")
    if memo is not None and head in memo:
        decoded = memo[head]
    else:
        decoded = _decode_head(head, key)
        if memo is not None:
            memo[head] = decoded
    if decoded is None:
        return None
    # the constructor, not ``_replace``: this runs twice per item of a compare or a report
    return StoredCounts(decoded.row, decoded.entity_types, decoded.relationship_types, followed)


def _decode_head(head: str, key: str) -> StoredCounts | None:
    try:
        stored_key, row, ents, rels = json.loads(head)
        if stored_key != key or len(row) != WIDTH or not all(type(v) is int for v in row):
            return None
        return StoredCounts(
            tuple(row),
            tuple(TypeCount(*t) for t in ents),
            tuple(TypeCount(*t) for t in rels),
        )
    except (ValueError, TypeError):  # not ours: re-score
        return None


def metric_arrays(sums: NDArray[np.float64], n_items: int) -> dict[str, NDArray[np.float64]]:
    """Every metric of :data:`METRICS` for each row of ``sums`` (column sums in
    :data:`COLUMNS` order over ``n_items`` items); NaN where a metric is undefined. The same
    rules as the run report (experiments/summary.py ``run_values``)."""

    def col(name: str) -> NDArray[np.float64]:
        return np.asarray(sums[:, COLUMN_INDEX[name]], dtype=np.float64)

    def div(num: NDArray[np.float64], den: NDArray[np.float64], fill: Any) -> Any:
        safe = np.where(den > 0, den, 1.0)
        return np.where(den > 0, num / safe, fill)

    failed = col("failed") > 0
    out: dict[str, NDArray[np.float64]] = {}
    for g in PRF_GROUPS:
        tp, fp, fn = col(f"{g}_tp"), col(f"{g}_fp"), col(f"{g}_fn")
        p, r, f = prf_arrays(tp, fp, fn, failed)
        out[f"{g}_precision"], out[f"{g}_recall"], out[f"{g}_f1"] = p, r, f

    def vacuous(g: str) -> NDArray[np.float64]:
        both_empty = (col(f"{g}_tp") == 0) & (col(f"{g}_fp") == 0) & (col(f"{g}_fn") == 0)
        return np.where(both_empty & ~failed, 1.0, 0.0)

    out["type_accuracy"] = div(col("type_correct"), col("entity_tp"), vacuous("entity"))
    r_tp = col("relationship_tp")
    out["relationship_accuracy"] = div(r_tp, r_tp + col("relationship_fp"), vacuous("relationship"))
    coverage = div(col("evidence_grounded"), col("evidence_predicted"), 0.0)
    out["evidence_coverage_rate"] = np.where(col("evidence_with") > 0, coverage, np.nan)
    out["zero_fp_pass_rate"] = div(col("zero_fp_pass"), col("gold_empty"), np.nan)
    out["hallucination_rate"] = div(col("hallucinations"), col("gold_empty_scored"), np.nan)
    n = np.full(sums.shape[0], float(n_items))
    out["error_rate"] = div(col("failed"), n, 0.0)
    out["schema_failure_rate"] = div(col("schema_failure"), n, 0.0)
    out["attribute_violation_rate"] = div(
        col("attribute_violating"), col("attribute_checked"), np.nan
    )
    return {name: np.asarray(out[name], dtype=np.float64) for name in METRICS}
