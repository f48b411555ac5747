"""Reading finished runs back from the store: exports and run-to-run comparison.

These read only the store, never a model, so they work the same for local and LangFuse runs.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any, Literal

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import NotFoundError
from extraction_eval.experiments.runner import FAILURE_CATEGORY_SCORE
from extraction_eval.types import ItemResult, Score
from extraction_eval.validation import check_int


def get_run(store: LocalStore, name: str, dataset: str | None = None) -> RunRecord:
    run = store.get_run(name, dataset)
    if run is None:
        known = ", ".join(sorted({r.name for r in store.list_runs(dataset)})) or "none"
        raise NotFoundError(f"no run named {name!r}; known runs: {known}")
    return run


# Fields that describe one invocation, not the result: wall-clock time, retries, the cache
# (a cache hit spends no attempt and no token), the trace of this invocation. ``--deterministic``
# drops them, so two runs of one config on the same data export byte-identically.
INVOCATION_FIELDS: tuple[str, ...] = (
    "attempts",
    "latency_ms",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "cache_hit",
    "trace_id",
    "trace_url",
)


def _score_map(scores: Sequence[Score]) -> dict[str, Any]:
    # failure_category (one score per category) is exported as ``categories`` instead
    return {
        s.name: s.value
        for s in sorted(scores, key=lambda s: s.name)
        if s.name != FAILURE_CATEGORY_SCORE
    }


def export_rows(
    results: Sequence[ItemResult], *, deterministic: bool = False
) -> list[dict[str, Any]]:
    rows = []
    for r in sorted(results, key=lambda r: r.item_id):
        row = {
            "item_id": r.item_id,
            "output": r.output.model_dump(mode="json") if r.output is not None else None,
            "error": r.error,
            "error_kind": r.error_kind,
            # null: stored before the taxonomy was kept; {}: a clean item
            "categories": r.categories if r.taxonomy is not None else None,
            "attempts": r.attempts,
            "latency_ms": r.latency_ms,
            "tokens_in": r.usage.tokens_in,
            "tokens_out": r.usage.tokens_out,
            "cost_usd": r.usage.cost_usd,
            "cache_hit": r.cache_hit,
            "trace_id": r.trace_id,
            "trace_url": r.trace_url,
            "taxonomy": None
            if r.taxonomy is None
            else [t.model_dump(mode="json", exclude_defaults=True) for t in r.taxonomy],
            "scores": _score_map(r.scores),
        }
        if deterministic:
            for key in INVOCATION_FIELDS:
                del row[key]
        rows.append(row)
    return rows


def export_run(
    results: Sequence[ItemResult],
    fmt: Literal["jsonl", "csv"],
    *,
    deterministic: bool = False,
) -> str:
    """Byte-stable: rows sorted by item id, keys sorted, fixed CSV columns. ``deterministic``
    leaves out ``INVOCATION_FIELDS``."""
    rows = export_rows(results, deterministic=deterministic)
    if fmt == "jsonl":
        return "".join(
            json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
            for row in rows
        )
    score_names = sorted({name for row in rows for name in row["scores"]})
    base = [k for k in rows[0] if k != "scores"] if rows else ["item_id"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*base, *(f"score.{n}" for n in score_names)])
    for row in rows:
        cells = []
        for key in base:
            value = row[key]
            if isinstance(value, (dict, list)):
                value = json.dumps(value, sort_keys=True, ensure_ascii=False)
            cells.append("" if value is None else value)
        cells.extend("" if row["scores"].get(n) is None else row["scores"][n] for n in score_names)
        writer.writerow(cells)
    return buf.getvalue()


def _entity_f1(result: ItemResult) -> float | None:
    for s in result.scores:
        if s.name == "entity_f1" and isinstance(s.value, (int, float)):
            return float(s.value)
    return None


def compare_runs(store: LocalStore, a: RunRecord, b: RunRecord, *, top: int = 10) -> dict[str, Any]:
    """Run-level values side by side and the items whose entity F1 moved most."""
    check_int("top", top, minimum=0)
    va = (a.summary or {}).get("values") or {}
    vb = (b.summary or {}).get("values") or {}
    run_level = []
    for name in sorted(set(va) | set(vb)):
        x, y = va.get(name), vb.get(name)
        delta = y - x if isinstance(x, (int, float)) and isinstance(y, (int, float)) else None
        run_level.append((name, x, y, delta))
    ra = {r.item_id: r for r in store.results(a.id)}
    rb = {r.item_id: r for r in store.results(b.id)}
    moved = []
    for item_id in sorted(set(ra) & set(rb)):
        x, y = _entity_f1(ra[item_id]), _entity_f1(rb[item_id])
        if x is not None and y is not None and x != y:
            moved.append((item_id, x, y, y - x))
    moved.sort(key=lambda row: (-abs(row[3]), row[0]))
    return {
        "a": a.name,
        "b": b.name,
        "run_level": run_level,
        "items": moved[:top],
        "only_in_a": sorted(set(ra) - set(rb)),
        "only_in_b": sorted(set(rb) - set(ra)),
    }
