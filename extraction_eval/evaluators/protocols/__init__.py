"""Scores that reproduce published tables (``--protocol NAME``): ``semeval`` (SemEval-2013
NER modes by character offsets, as nervaluate computes them), ``re`` (``re_strict`` and
``re_boundaries``, Taillé et al. 2020) and ``docred`` (relation F1, Ign F1, evidence F1, as
thunlp/DocRED evaluates them). See docs/protocols.md for each definition.

Each protocol folds one document at a time (:class:`ProtocolScorer`), so a run's memory
does not grow with its items. A failed item (no prediction) counts its gold as missed.
Objects without offsets are counted (``without_offsets``), bad offsets and out-of-range
indices are one warning each (the object is skipped, the rest scored). Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from extraction_eval.evaluators.protocols.docred import DocredAccumulator, TrainFacts, train_facts
from extraction_eval.evaluators.protocols.relext import RelextAccumulator
from extraction_eval.evaluators.protocols.rows import CountRows
from extraction_eval.evaluators.protocols.semeval import SemevalAccumulator
from extraction_eval.evaluators.protocols.spans import PROTOCOLS_LABEL, Problems
from extraction_eval.evaluators.stats.intervals import CiMethod
from extraction_eval.types import Extraction

__all__ = [
    "PROTOCOLS",
    "ProtocolDocument",
    "ProtocolScorer",
    "Protocols",
    "TrainFacts",
    "check_protocols",
    "score_protocols",
    "train_facts",
]

PROTOCOLS = ("semeval", "re", "docred")


@dataclass(frozen=True, slots=True)
class ProtocolDocument:
    """One item as the protocols see it; ``pred`` None is a failed item. ``aliases_of``: a
    name's alias-table group (``evaluators.clusters.alias_lookup``), which ``docred``
    resolves predicted endpoint names through too."""

    item_id: str
    text: str
    gold: Extraction
    pred: Extraction | None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    aliases_of: Callable[[str], Iterable[str]] | None = None


@dataclass(frozen=True, slots=True)
class Protocols:
    """The report's ``protocols`` blocks (``re`` gives ``re_strict`` and ``re_boundaries``)
    and one warning line per skipped object (bounded, with a count)."""

    blocks: dict[str, dict[str, Any]]
    warnings: list[str]
    # per document, in ``ids`` order: each metric's (tp, fp, fn) row (for a paired comparison)
    ids: tuple[str, ...] = ()
    rows: dict[str, NDArray[np.int64]] = field(default_factory=dict)


def check_protocols(names: Iterable[str]) -> tuple[str, ...]:
    """The names, deduplicated in order; ValueError naming an unknown one."""
    out: list[str] = []
    for name in names:
        if name not in PROTOCOLS:
            raise ValueError(f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}")
        if name not in out:
            out.append(name)
    return tuple(out)


class ProtocolScorer:
    """The chosen protocols folded over documents one at a time."""

    def __init__(self, names: Iterable[str], *, train: TrainFacts | None = None) -> None:
        self.names = check_protocols(names)
        self.problems = Problems(PROTOCOLS_LABEL)
        self.rows = CountRows()
        self.ids: list[str] = []
        wanted = self.names
        self.semeval = SemevalAccumulator(self.problems, self.rows) if "semeval" in wanted else None
        self.relext = RelextAccumulator(self.problems, self.rows) if "re" in wanted else None
        self.docred = (
            DocredAccumulator(train, self.problems, self.rows) if "docred" in wanted else None
        )

    def add(self, doc: ProtocolDocument) -> None:
        pred = doc.pred
        self.rows.document(failed=pred is None)
        self.ids.append(doc.item_id)
        if self.semeval is not None:
            self.semeval.add(
                doc.item_id, doc.text, doc.gold.entities, None if pred is None else pred.entities
            )
        if self.relext is not None:
            self.relext.add(doc.item_id, doc.text, doc.gold, pred)
        if self.docred is not None:
            self.docred.add(doc.item_id, doc.text, doc.gold, pred, doc.metadata, doc.aliases_of)

    def result(
        self,
        *,
        resamples: int = 0,
        seed: int = 42,
        confidence: float = 0.95,
        method: CiMethod = "expanded",
    ) -> Protocols:
        """The blocks; with ``resamples``, each P/R/F1 gets its bootstrap CI over documents
        (``ci``: ``{"precision"|"recall"|"f1": {"low", "high"}}``), as the other scores do."""
        blocks: dict[str, dict[str, Any]] = {}
        warnings = self.problems.warnings()
        if self.semeval is not None:
            blocks["semeval"] = self.semeval.report()
            warnings += _without("semeval", "entities", self.semeval.without_offsets)
        if self.relext is not None:
            blocks.update(self.relext.report())
            warnings += _without("re", "relationships", self.relext.without_offsets)
        if self.docred is not None:
            block = self.docred.report()
            blocks["docred"] = block
            for key in ("ambiguous", "unresolved"):
                if block[key]:
                    warnings.append(
                        f"docred: {block[key]} predicted endpoint name(s) {key}"
                        " (not guessed: their facts count as submitted, never correct)"
                    )
        ci = self.rows.intervals(
            resamples=resamples, seed=seed, confidence=confidence, method=method
        )
        for metric, bounds in (ci or {}).items():
            head, _, mode = metric.partition(".")
            block = blocks[head][mode] if mode else blocks[head]
            block["ci"] = bounds
        rows = {
            k: np.frombuffer(v, dtype=np.int64).reshape(-1, 3) for k, v in self.rows.rows.items()
        }
        return Protocols(blocks, warnings, tuple(self.ids), rows)


def _without(protocol: str, kind: str, counts: Mapping[str, int]) -> list[str]:
    """Objects the offset protocols could not score, said once per side."""
    return [
        f"{protocol}: {n} {side} {kind} without offsets not scored"
        for side, n in counts.items()
        if n
    ]


def score_protocols(
    names: Iterable[str],
    documents: Iterable[ProtocolDocument],
    *,
    train: Iterable[Extraction] | None = None,
    resamples: int = 0,
    seed: int = 42,
    confidence: float = 0.95,
    method: CiMethod = "expanded",
) -> Protocols:
    """Every named protocol over ``documents``; ``train`` (training documents' gold) turns
    on DocRED's Ign F1; ``resamples`` > 0 adds bootstrap CIs over documents."""
    scorer = ProtocolScorer(names, train=None if train is None else train_facts(train))
    for doc in documents:
        scorer.add(doc)
    return scorer.result(resamples=resamples, seed=seed, confidence=confidence, method=method)
