"""The offset protocols (``--protocol``) over a stored run: its outputs against the gold it
was scored with (``stored.run_gold``: its dataset version, schema labels and floor), with the
bootstrap settings it was scored with. Read-only, a page of results at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.errors import UsageError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.clusters import alias_lookup
from extraction_eval.evaluators.gold_view import mapped_gold
from extraction_eval.evaluators.protocols import (
    ProtocolDocument,
    Protocols,
    ProtocolScorer,
    check_protocols,
    train_facts,
)
from extraction_eval.evaluators.protocols.paired import align_rows, paired_protocols
from extraction_eval.evaluators.stats.intervals import CiMethod
from extraction_eval.types import DatasetItem, Extraction

__all__ = [
    "PROTOCOL_HEADLINE",
    "ProtocolCells",
    "headline_value",
    "paired_run_protocols",
    "protocol_cells",
    "run_protocols",
]


def _documents(
    store: LocalStore, run: RunRecord, config: ScoringConfig
) -> Iterator[ProtocolDocument]:
    """Every gold item once: with its output, or as a failed item (an error, or no result);
    names resolve through the run's alias table (``config``) and the item schema's."""
    gold = run_gold(store, run)

    def doc(item: DatasetItem, pred: Extraction | None) -> ProtocolDocument:
        aliases_of = alias_lookup(config, item.schema_)
        return ProtocolDocument(item.id, item.text, _gold(item), pred, item.metadata, aliases_of)

    for result in store.iter_results(run.id, order_by="item_id"):
        item = gold.pop(result.item_id, None)
        if item is None:
            continue  # an item no longer in the run's dataset version: not scored by anyone
        yield doc(item, result.output if result.error is None else None)
    for item in gold.values():
        yield doc(item, None)


def _gold(item: DatasetItem) -> Extraction:
    """The item's gold with its labels mapped by the schema the run gave it."""
    return mapped_gold(item.expected, item.schema_)


def run_protocols(
    store: LocalStore,
    run: RunRecord,
    names: Sequence[str],
    *,
    train: str | Path | None = None,
) -> Protocols:
    """The named protocols over ``run``; ``train`` (a gold file) gives DocRED's Ign F1. A
    ``UsageError`` for an unknown name or an unusable training file."""
    try:
        chosen = check_protocols(names)
    except ValueError as exc:
        raise UsageError(f"protocols: {exc}") from None
    notes: list[str] = []
    facts = None
    if train is not None:
        records, notes = read_gold(Path(train))
        if not records:
            raise UsageError(f"{train}: no usable training documents")
        facts = train_facts(r.extraction for r in records)
    config = run_scoring(run)
    scorer = ProtocolScorer(chosen, train=facts)
    for doc in _documents(store, run, config):
        scorer.add(doc)
    found = scorer.result(
        resamples=config.resamples, seed=config.seed, confidence=config.confidence, method=config.ci
    )
    return Protocols(found.blocks, [*notes, *found.warnings], found.ids, found.rows)


def paired_run_protocols(
    a: Protocols, b: Protocols, *, resamples: int, seed: int, method: CiMethod = "expanded"
) -> dict[str, dict[str, Any]]:
    """B against A on each protocol metric, on the items both runs have: Δ with its paired
    bootstrap CI (``evaluators.protocols.paired``), what ``compare`` shows and a gate reads."""
    rows_a, rows_b = align_rows(a.ids, a.rows, b.ids, b.rows)
    return paired_protocols(rows_a, rows_b, resamples=resamples, seed=seed, method=method)


# each protocol's headline figures in a matrix (``matrix --protocol``), as a gate names them
PROTOCOL_HEADLINE = {
    "semeval": (
        "semeval.strict.f1",
        "semeval.exact.f1",
        "semeval.partial.f1",
        "semeval.ent_type.f1",
    ),
    "re": ("re_strict.f1", "re_boundaries.f1"),
    "docred": ("docred.f1", "docred.ign_f1", "docred.evidence_f1"),
}


def headline_value(
    blocks: dict[str, dict[str, Any]], metric: str
) -> tuple[float | None, tuple[float, float] | None]:
    """``semeval.strict.f1`` / ``re_strict.f1`` / ``docred.ign_f1`` in a run's blocks: the
    value and its bootstrap CI (None where the block has none)."""
    *path, ratio = metric.split(".")
    block: Any = blocks
    for key in path:
        block = block.get(key) if isinstance(block, dict) else None
    if not isinstance(block, dict):
        return None, None
    value = block.get(ratio)
    bounds = (block.get("ci") or {}).get(ratio)
    ci = (bounds["low"], bounds["high"]) if isinstance(bounds, dict) else None
    return (float(value) if isinstance(value, (int, float)) else None), ci


@dataclass
class ProtocolCells:
    """Protocol headline figures per matrix cell: ``values[cell][metric]`` = (value, CI),
    ``best[metric]`` the best cell(s), ``similar[metric]`` the cells whose paired bootstrap
    CI of Δ against the best contains 0 (not corrected for the many comparisons)."""

    metrics: tuple[str, ...]
    values: dict[str, dict[str, tuple[float | None, tuple[float, float] | None]]]
    best: dict[str, tuple[str, ...]] = field(default_factory=dict)
    similar: dict[str, tuple[str, ...]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def protocol_cells(
    store: LocalStore,
    runs: Sequence[RunRecord],
    names: Sequence[str],
    *,
    train: str | Path | None = None,
) -> ProtocolCells:
    """The named protocols over each run (a matrix's cells, by run name): their headline
    figures with CIs, the best cell per metric and the cells not told apart from it."""
    found = {run.name: run_protocols(store, run, names, train=train) for run in runs}
    chosen = check_protocols(names)
    values = {
        cell: {m: headline_value(p.blocks, m) for n in chosen for m in PROTOCOL_HEADLINE[n]}
        for cell, p in found.items()
    }
    metrics = tuple(
        m
        for n in chosen
        for m in PROTOCOL_HEADLINE[n]
        if any(v[m][0] is not None for v in values.values())
    )
    out = ProtocolCells(metrics, values)
    out.warnings = [f"{cell}: {w}" for cell, p in found.items() for w in p.warnings]
    settings = run_scoring(runs[0]) if runs else None
    pairs: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}  # one bootstrap per pair
    for metric in metrics:
        scored: dict[str, float] = {}
        for cell, v in values.items():
            value = v[metric][0]
            if value is not None:
                scored[cell] = value
        top = max(scored.values())
        out.best[metric] = tuple(c for c, v in scored.items() if v == top)
        if settings is None or metric.split(".")[-1] != "f1" or len(scored) < 2:
            continue  # Ign F1 and evidence F1 have no count rows to pair
        best = out.best[metric][0]
        similar = []
        for cell in scored:
            if cell in out.best[metric]:
                continue
            if (best, cell) not in pairs:
                pairs[best, cell] = paired_run_protocols(
                    found[best],
                    found[cell],
                    resamples=settings.resamples,
                    seed=settings.seed,
                    method=settings.ci,
                )
            paired = pairs[best, cell].get(metric)
            ci = None if paired is None else paired["ci"]
            if ci is not None and ci["low"] <= 0 <= ci["high"]:
                similar.append(cell)
        out.similar[metric] = tuple(similar)
    return out
