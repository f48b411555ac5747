"""Reading finished runs back from the store: exports (JSONL, CSV).

These read only the store, never a model, so they work the same for local and LangFuse runs.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TextIO

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.experiments.runner import ANSWER_REPAIR_SCORE, FAILURE_CATEGORY_SCORE
from extraction_eval.types import ItemResult, Score

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


# One score per value, exported as a column of their own (``categories``, ``repairs``)
_LISTED_SCORES = frozenset({FAILURE_CATEGORY_SCORE, ANSWER_REPAIR_SCORE})


def _score_map(scores: Sequence[Score]) -> dict[str, Any]:
    ordered = sorted(scores, key=lambda s: s.name)
    return {s.name: s.value for s in ordered if s.name not in _LISTED_SCORES}


def export_row(r: ItemResult, *, deterministic: bool = False) -> dict[str, Any]:
    row = {
        "item_id": r.item_id,
        "output": r.output.model_dump(mode="json") if r.output is not None else None,
        "error": r.error,
        "error_kind": r.error_kind,
        # the model's reply as it came (redacted, like error text): what the output was read
        # from, or what could not be read
        "raw_output": r.raw_output,
        "repairs": r.repairs,  # what reading the reply repaired (fence, prose, wrapper)
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


def export_score_columns(score_names: Iterable[str]) -> list[str]:
    """The CSV score columns for a run whose item-level scores have these names."""
    return sorted(set(score_names) - _LISTED_SCORES)


def export_lines(
    results: Iterable[ItemResult],
    fmt: Literal["jsonl", "csv"],
    *,
    deterministic: bool = False,
    score_columns: Sequence[str] | None = None,
    judged: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[str]:
    """The export one line at a time, for results already sorted by item id (the store's
    ``iter_results(order_by="item_id")``), so a run of any size streams to its file.

    CSV needs its score columns before the first row: pass ``score_columns``
    (``export_score_columns(store.item_score_names(run_id))``), else the results are read
    into memory once to find them. ``judged`` (judge identity -> item id -> judged matches,
    as ``--judge`` kept them with the run) adds a ``judged`` field to every row; without it
    the export is as it always was."""
    rows: Iterator[dict[str, Any]] = (export_row(r, deterministic=deterministic) for r in results)
    if judged:
        rows = (
            {**row, "judged": {j: list(m.get(row["item_id"], [])) for j, m in judged.items()}}
            for row in rows
        )
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
    judged = {b["judge"]: b.get("items") or {} for b in store.run_judged(run.id)}
    results = store.iter_results(run.id, order_by="item_id")
    for text in export_lines(
        results, fmt, deterministic=deterministic, score_columns=columns, judged=judged or None
    ):
        out.write(text)
