"""Reading finished runs back from the store: exports and run-to-run comparison.

These read only the store, never a model, so they work the same for local and LangFuse runs.
"""

from __future__ import annotations

import csv
import heapq
import io
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, TextIO

from extraction_eval.analysis.stored import in_both_runs
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.experiments.runner import FAILURE_CATEGORY_SCORE
from extraction_eval.types import ItemResult, Score
from extraction_eval.validation import check_int

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


def export_row(r: ItemResult, *, deterministic: bool = False) -> dict[str, Any]:
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
    return row


def export_rows(
    results: Sequence[ItemResult], *, deterministic: bool = False
) -> list[dict[str, Any]]:
    return [
        export_row(r, deterministic=deterministic) for r in sorted(results, key=lambda r: r.item_id)
    ]


def export_score_columns(score_names: Iterable[str]) -> list[str]:
    """The CSV score columns for a run whose item-level scores have these names."""
    return sorted(set(score_names) - {FAILURE_CATEGORY_SCORE})


def export_lines(
    results: Iterable[ItemResult],
    fmt: Literal["jsonl", "csv"],
    *,
    deterministic: bool = False,
    score_columns: Sequence[str] | None = None,
) -> Iterator[str]:
    """The export one line at a time, for results already sorted by item id (the store's
    ``iter_results(order_by="item_id")``), so a run of any size streams to its file.

    CSV needs its score columns before the first row: pass ``score_columns``
    (``export_score_columns(store.item_score_names(run_id))``), else the results are read
    into memory once to find them."""
    rows: Iterator[dict[str, Any]] = (export_row(r, deterministic=deterministic) for r in results)
    if fmt == "jsonl":
        for row in rows:
            yield json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
        return
    if score_columns is None:
        held = list(rows)
        score_columns = export_score_columns(n for row in held for n in row["scores"])
        rows = iter(held)
    first = next(rows, None)
    base = [k for k in first if k != "scores"] if first is not None else ["item_id"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")

    def line(cells: Sequence[Any]) -> str:
        buf.seek(0)
        buf.truncate()
        writer.writerow(cells)
        return buf.getvalue()

    yield line([*base, *(f"score.{n}" for n in score_columns)])
    for row in itertools.chain([first] if first is not None else [], rows):
        cells = []
        for key in base:
            value = row[key]
            if isinstance(value, (dict, list)):
                value = json.dumps(value, sort_keys=True, ensure_ascii=False)
            cells.append("" if value is None else value)
        scores = row["scores"]
        cells.extend("" if scores.get(n) is None else scores[n] for n in score_columns)
        yield line(cells)


def export_run(
    results: Sequence[ItemResult],
    fmt: Literal["jsonl", "csv"],
    *,
    deterministic: bool = False,
) -> str:
    """Byte-stable: rows sorted by item id, keys sorted, fixed CSV columns. ``deterministic``
    leaves out ``INVOCATION_FIELDS``. (A stored run streams with ``write_run_export``.)"""
    ordered = sorted(results, key=lambda r: r.item_id)
    return "".join(export_lines(ordered, fmt, deterministic=deterministic))


def write_run_export(
    store: LocalStore,
    run: RunRecord,
    fmt: Literal["jsonl", "csv"],
    out: TextIO,
    *,
    deterministic: bool = False,
) -> None:
    """Write ``export_run``'s bytes for a stored run to ``out`` line by line: the run is read
    in batches, never held in memory at once."""
    columns = export_score_columns(store.item_score_names(run.id)) if fmt == "csv" else None
    results = store.iter_results(run.id, order_by="item_id")
    for text in export_lines(results, fmt, deterministic=deterministic, score_columns=columns):
        out.write(text)


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
    moved: list[tuple[str, float, float, float]] = []
    only_in_a: list[str] = []
    only_in_b: list[str] = []
    pairs = in_both_runs(  # values in 1-tuples: an item's F1 may itself be None
        ((r.item_id, (_entity_f1(r),)) for r in store.iter_results(a.id, order_by="item_id")),
        ((r.item_id, (_entity_f1(r),)) for r in store.iter_results(b.id, order_by="item_id")),
        only_in_a,
        only_in_b,
    )
    for item_id, (x,), (y,) in pairs:
        if x is not None and y is not None and x != y:
            moved.append((item_id, x, y, y - x))
            if len(moved) > 4 * top + 1000:  # keep the top ones only: memory stays bounded
                moved = _most_moved(moved, top)
    return {
        "a": a.name,
        "b": b.name,
        "run_level": run_level,
        "items": _most_moved(moved, top),
        "only_in_a": only_in_a,
        "only_in_b": only_in_b,
    }


def _most_moved(
    moved: list[tuple[str, float, float, float]], top: int
) -> list[tuple[str, float, float, float]]:
    return heapq.nsmallest(top, moved, key=lambda row: (-abs(row[3]), row[0]))
