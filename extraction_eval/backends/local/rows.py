"""Stored rows back into our objects, checked: a store is input too.

A shard store comes from another machine and may have been edited by hand (or by another
tool). Reading it must not end in a traceback (``json.loads`` on ``'{not json'``, pydantic on
``{"entities": 5}``) nor in a figure that cannot exist (a cost of 1e308 USD made the run
summary's ``math.fsum`` raise ``OverflowError``). So each value that is decoded or summed is
checked here, and a bad one is :class:`StoredValueError`: one line naming the run or item and
the column (``runs merge`` adds the store's path).
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from pydantic import ValidationError

from extraction_eval.backends.base import RunRecord
from extraction_eval.errors import UsageError, one_line
from extraction_eval.limits import MAX_STORED_NUMBER
from extraction_eval.types import Extraction, ItemResult, Score, ScoreType, TaxonomyTag, Usage


class StoredValueError(UsageError):
    """A stored value that cannot be what the column holds (a store edited by hand)."""


def _json(text: str | None, where: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StoredValueError(f"{where} is not valid JSON ({one_line(exc, limit=80)})") from None


def run_record(row: sqlite3.Row) -> RunRecord:
    """A ``runs`` row; its config must be a JSON object, its summary one or NULL."""
    where = f"run {row['name']!r}: runs"
    config = _json(row["config"], f"{where}.config")
    if not isinstance(config, dict):
        raise StoredValueError(f"{where}.config is not a JSON object (got {_kind(config)})")
    summary = _json(row["summary"], f"{where}.summary")
    if summary is not None and not isinstance(summary, dict):
        raise StoredValueError(f"{where}.summary is not a JSON object (got {_kind(summary)})")
    version = _json(row["dataset_version"], f"{where}.dataset_version")
    if isinstance(version, bool) or not isinstance(version, (int, str, type(None))):
        raise StoredValueError(f"{where}.dataset_version is not a version (got {_kind(version)})")
    return RunRecord(
        id=int(row["id"]),
        name=row["name"],
        dataset=row["dataset"],
        dataset_version=version,
        backend=row["backend"],
        experiment_id=row["experiment_id"],
        config=config,
        status=row["status"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        summary=summary,
    )


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _number(value: Any, where: str, *, minimum: float | None) -> Any:
    """A stored measurement: NULL, or a finite number within the bounds (``MAX_STORED_NUMBER``
    keeps any sum of them finite)."""
    if value is None:
        return None
    low = -MAX_STORED_NUMBER if minimum is None else minimum
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (math.isfinite(value) and low <= value <= MAX_STORED_NUMBER)
    ):
        raise StoredValueError(
            f"{where} is {value!r}, not a number from {low:g} to {MAX_STORED_NUMBER:g}"
        )
    return value


def item_result(
    row: sqlite3.Row, scores: list[Score], tags: dict[str, list[TaxonomyTag]]
) -> ItemResult:
    """A ``results`` row with its scores and taxonomy; its output must be an extraction, its
    cost, latency and token counts numbers that can be."""
    item_id = row["item_id"]
    where = f"item {item_id!r}: results"
    output = row["output"]
    try:
        extraction = None if output is None else Extraction.model_validate_json(output)
    except (ValidationError, ValueError, RecursionError) as exc:
        problem = one_line(exc, limit=120)
        raise StoredValueError(f"{where}.output is not an extraction ({problem})") from None
    for column in ("cost_usd", "latency_ms", "tokens_in", "tokens_out", "attempts"):
        _number(row[column], f"{where}.{column}", minimum=0)
    try:
        return _item_result(row, extraction, scores, tags)
    except ValidationError as exc:
        raise StoredValueError(f"{where}: {one_line(exc, limit=120)}") from None


def _item_result(
    row: sqlite3.Row,
    extraction: Extraction | None,
    scores: list[Score],
    tags: dict[str, list[TaxonomyTag]],
) -> ItemResult:
    item_id = row["item_id"]
    return ItemResult(
        item_id=item_id,
        output=extraction,
        raw_output=row["raw_output"],
        error=row["error"],
        error_kind=row["error_kind"],
        attempts=int(row["attempts"]),
        latency_ms=row["latency_ms"],
        usage=Usage(
            tokens_in=row["tokens_in"], tokens_out=row["tokens_out"], cost_usd=row["cost_usd"]
        ),
        cache_hit=bool(row["cache_hit"]),
        scores=scores,
        trace_id=row["trace_id"],
        trace_url=row["trace_url"],
        taxonomy=tags.get(item_id, []) if row["taxonomy_recorded"] else None,
        counts=row["counts"],
        repairs=_repairs(row, item_id),
    )


def _repairs(row: sqlite3.Row, item_id: str) -> list[str]:
    """What reading the reply repaired (a JSON list of names); NULL: none, or a row stored
    before repairs were recorded, or a row read without the column."""
    raw = row["repairs"] if "repairs" in row.keys() else None  # noqa: SIM118 (Row: `in` tests values)
    if not raw:
        return []
    value = _json(raw, f"item {item_id!r}: results.repairs")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise StoredValueError(f"item {item_id!r}: results.repairs is not a list of names")
    return value


def score(row: sqlite3.Row) -> Score:
    """A ``scores`` row; a numeric value must be finite (NULL is NaN: what went in)."""
    data_type: ScoreType = row["data_type"]
    num, text = row["value_num"], row["value_str"]
    value: float | bool | str
    if text is not None:
        value = text
    elif num is None:
        value = math.nan  # SQLite stores NaN as NULL; NaN is what went in
    elif data_type == "BOOLEAN":
        value = bool(num)
    else:
        item = row["item_id"]
        where = (f"item {item!r}: " if item is not None else "") + f"score {row['name']!r}"
        value = float(_number(num, where, minimum=None))
    return Score(name=row["name"], value=value, data_type=data_type, comment=row["comment"])


def tag(row: sqlite3.Row) -> TaxonomyTag:
    """A ``result_taxonomy`` row."""
    where = f"item {row['item_id']!r}: result_taxonomy"
    try:
        return TaxonomyTag(
            category=row["category"],
            kind=row["kind"],
            side=row["side"],
            index=int(row["idx"]),
            label=row["label"],
            related=_json(row["related"], f"{where}.related"),
            source_id=row["source_id"],
        )
    except ValidationError as exc:
        raise StoredValueError(f"{where}: {one_line(exc, limit=120)}") from None
