"""Gold and prediction files in, scores out: ``extraction-eval score`` as a Python call.

The files are read by ``datasets`` (one line reader, one warning format); this module only
pairs predictions with gold and hands them to the pure evaluators. A bad line never stops a
run: it is a warning and the other lines are scored. Only input that cannot be scored at all
raises :class:`~extraction_eval.errors.UsageError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from extraction_eval.datasets.jsonl import GoldRecord, read_gold
from extraction_eval.datasets.predictions import read_predictions
from extraction_eval.errors import UsageError
from extraction_eval.evaluators import (
    ContextIndex,
    GoldView,
    ItemScore,
    ScoringConfig,
    aggregate,
)
from extraction_eval.evaluators.clusters import alias_lookup
from extraction_eval.evaluators.gold_view import mapped_gold
from extraction_eval.evaluators.limits import over_cap
from extraction_eval.evaluators.protocols import (
    ProtocolDocument,
    Protocols,
    check_protocols,
    score_protocols,
)
from extraction_eval.types import DatasetItem, Extraction, Schema

if TYPE_CHECKING:
    from extraction_eval.analysis.judged import JudgedItem
    from extraction_eval.judge.base import Judge

__all__ = ["ScoredFiles", "score_files"]


@dataclass(frozen=True, slots=True)
class ScoredFiles:
    """What ``score_files`` returns: the JSON report and the per-item scores behind it."""

    report: dict[str, Any]
    items: list[ItemScore]
    warnings: list[str] = field(default_factory=list)
    judged: list[JudgedItem] | None = None  # per item, in ``items``' order, with ``judge``

    def per_item_lines(self) -> list[dict[str, Any]]:
        """One JSON object per item (``score --per-item``), its judged counts beside its
        scores when a judge ran."""
        lines = [s.to_json() for s in self.items]
        for line, j in zip(lines, self.judged or [], strict=False):
            line["judged"] = j.to_json()
        return lines


def gold_ignored_warning(ignored: int, min_confidence: float) -> str:
    """Said whenever the option is given, so a run that ignored nothing says so too."""
    return (
        f"{ignored} gold objects below ensemble confidence {min_confidence:g} ignored (ignore"
        " regions: not missed when unpredicted, and predictions aligned with them are not"
        " counted (gold without confidences is trusted as it is)"
    )


def gold_item(g: GoldRecord) -> DatasetItem:
    """A gold line as the dataset item it would be once uploaded (scored the same way)."""
    return DatasetItem(
        id=g.id, text=g.text, schema=g.schema, expected=g.extraction, metadata=g.metadata or {}
    )


def _id_list(ids: list[str], limit: int = 20) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


def _within_cap(
    gold: list[Any], preds: dict[str, Any], limit: int, warnings: list[str]
) -> dict[str, Any]:
    """``preds`` without the items over the per-item object cap (``ScoringConfig.max_objects``;
    matching would need memory quadratic in the count), each a warning. Such an item is
    still a row, as in a run: scored as a failed item (no prediction; its gold counts as
    missed), whichever side was over the cap."""
    dropped = set()
    for g in gold:
        found = over_cap(g.extraction, limit)
        if found is not None:
            warnings.append(
                f"item {g.id}: the gold has {found}, over {limit:,}; scored as a failed item"
                " (its gold counts as missed)"
            )
            dropped.add(g.id)
            continue
        pred = preds.get(g.id)
        found = over_cap(pred, limit) if pred is not None else None
        if found is not None:
            warnings.append(
                f"item {g.id}: the prediction has {found}, over {limit:,}; scored as no prediction"
            )
            dropped.add(g.id)
    return {k: v for k, v in preds.items() if k not in dropped}


def _protocols(
    names: Sequence[str],
    gold: list[GoldRecord],
    preds: dict[str, Extraction],
    train: str | Path | None,
    schema: Schema | None,
    config: ScoringConfig,
) -> Protocols:
    """The offset protocols over the same pairs as the scores (an item without a usable
    prediction is a failed item there too)."""
    try:
        chosen = check_protocols(names)
    except ValueError as exc:
        raise UsageError(f"protocols: {exc}") from None
    train_docs: list[Extraction] | None = None
    notes: list[str] = []
    if train is not None:
        records, notes = read_gold(Path(train))
        if not records:
            first = f" (first problem: {notes[0]})" if notes else ""
            raise UsageError(f"{train}: no usable training documents{first}")
        train_docs = [r.extraction for r in records]
    documents = (
        ProtocolDocument(
            g.id,
            g.text,
            mapped_gold(g.extraction, schema or g.schema),
            preds.get(g.id),
            g.metadata or {},
            alias_lookup(config, schema or g.schema),
        )
        for g in gold
    )
    found = score_protocols(
        chosen,
        documents,
        train=train_docs,
        resamples=config.resamples,
        seed=config.seed,
        confidence=config.confidence,
        method=config.ci,
    )
    return Protocols(found.blocks, [*notes, *found.warnings])


def score_files(
    gold_path: str | Path,
    predictions_path: str | Path,
    config: ScoringConfig,
    *,
    min_gold_confidence: float | None = None,
    schema: Schema | None = None,
    judge: Judge | None = None,
    calibration: dict[str, Any] | None = None,
    protocols: Sequence[str] = (),
    train: str | Path | None = None,
) -> ScoredFiles:
    """Score a predictions file against a gold file.

    A gold id without a prediction line is scored as a failed item (never a pass) and reported; a
    prediction id not in gold is reported and ignored. Raises UsageError only when nothing
    can be scored: unreadable file, no usable gold line, or predictions that are all broken
    or that share no id with gold. ``schema`` replaces every line's own (its ``labels`` map
    gold labels); gold objects below ``min_gold_confidence`` are ignore regions. ``judge``
    adds the report's ``judged`` block (``analysis.judged``; ``calibration`` is the one that
    backs it) and leaves every other key as it is without one.
    ``protocols`` (semeval, re, docred) add the report's ``protocols`` block; ``train`` (a
    gold file of training documents) gives DocRED's Ign F1.
    """
    gold_path, predictions_path = Path(gold_path), Path(predictions_path)
    gold, warnings = read_gold(gold_path)
    if not gold:
        first = f" (first problem: {warnings[0]})" if warnings else ""
        raise UsageError(f"{gold_path}: no usable gold items{first}")
    preds, pred_warnings, n_lines = read_predictions(predictions_path)
    warnings += pred_warnings
    if n_lines and not preds:
        raise UsageError(
            f"{predictions_path}: no usable prediction lines (first problem: {pred_warnings[0]})"
        )
    gold_ids = {g.id for g in gold}
    unknown = sorted(set(preds) - gold_ids)
    if preds and len(unknown) == len(preds):
        raise UsageError(
            f"{predictions_path}: no prediction id matches a gold id in {gold_path.name}"
            f" (e.g. {unknown[0]!r})"
        )
    if unknown:
        warnings.append(
            f"{len(unknown)} prediction id(s) not in gold, ignored: {_id_list(unknown)}"
        )
    context = ContextIndex({g.id: g.text for g in gold})
    preds = _within_cap(gold, preds, config.max_objects, warnings)
    view = GoldView(floor=min_gold_confidence, schema=schema)
    items = [view.score(gold_item(g), preds.get(g.id), config, context_texts=context) for g in gold]
    if min_gold_confidence is not None:
        ignored = sum(s.ignored_gold for s in items)
        warnings.append(gold_ignored_warning(ignored, min_gold_confidence))
    if protocols:
        found = _protocols(protocols, gold, preds, train, schema, config)
        warnings += found.warnings
    report = aggregate(items, config, warnings=warnings)
    judged = None
    if judge is not None:
        from extraction_eval.analysis.judged import judge_items, judged_report
        from extraction_eval.evaluators.gold_view import scored_gold

        work = [
            (s, g.text, scored_gold(view.item(gold_item(g))), preds.get(g.id))
            for s, g in zip(items, gold, strict=True)
        ]
        judged = judge_items(judge, work, config)
        report["judged"] = judged_report(judge, judged, calibration)
    if protocols:
        report["protocols"] = found.blocks
    return ScoredFiles(report=report, items=items, warnings=list(report["warnings"]), judged=judged)
