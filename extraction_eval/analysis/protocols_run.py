"""The offset protocols (``--protocol``) over a stored run: its outputs against the gold it
was scored with (``stored.run_gold``: its dataset version, schema labels and floor), with the
bootstrap settings it was scored with. Read-only, a page of results at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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

__all__ = ["paired_run_protocols", "run_protocols"]


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
