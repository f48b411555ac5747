"""Gold / prediction JSONL files in, scores out: the disk edge of the scoring core.

Lines are normalised here, once (architecture: normalise at the edge), so evaluators only see
:class:`~extraction_eval.types.Extraction` values. A bad line never stops a run: it becomes a
warning naming the file, the line number and the id, and the other lines are scored. Only
input that cannot be scored at all raises :class:`~extraction_eval.errors.UsageError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from extraction_eval.errors import UsageError
from extraction_eval.evaluators import (
    ContextIndex,
    ItemScore,
    ScoringConfig,
    aggregate,
    score_item,
)
from extraction_eval.types import Extraction, Schema

# Separator used when a list of evidence passages (e.g. Re-DocRED sentences) becomes one quote;
# grounding treats "…" as an elision, so each passage is looked up on its own.
EVIDENCE_JOINER = " … "
_ID_HINT = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


@dataclass(frozen=True, slots=True)
class GoldRecord:
    id: str
    text: str
    extraction: Extraction
    line: int
    schema: Schema | None = None  # its attribute declarations are checked against predictions


@dataclass(frozen=True, slots=True)
class ScoredFiles:
    """What ``score_files`` returns: the JSON report and the per-item scores behind it."""

    report: dict[str, Any]
    items: list[ItemScore]
    warnings: list[str] = field(default_factory=list)


def example_paths() -> tuple[Path, Path]:
    """The bundled example (gold, predictions), shipped inside the package."""
    base = resources.files("extraction_eval") / "data" / "examples"
    return Path(str(base / "gold.jsonl")), Path(str(base / "predictions.jsonl"))


def _evidence(value: Any) -> Any:
    """A list of passages (strings or {"text": ...}) becomes one elided quote."""
    if isinstance(value, dict) and "text" in value:
        value = value["text"]
    if isinstance(value, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in value]
        texts = [p for p in parts if isinstance(p, str) and p.strip()]
        return EVIDENCE_JOINER.join(texts) if texts else None
    return value


def _attributes(value: Any) -> Any:
    """Scalar attribute values become strings (JSON spelling); nulls are dropped."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for k, v in value.items():
        if v is None:
            continue
        out[str(k)] = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return out


def _clean_objects(raw: Any) -> Any:
    if not isinstance(raw, list):
        return raw
    out = []
    for obj in raw:
        if isinstance(obj, dict):
            obj = dict(obj)
            if "evidence" in obj:
                obj["evidence"] = _evidence(obj["evidence"])
            if "attributes" in obj:
                obj["attributes"] = _attributes(obj["attributes"])
        out.append(obj)
    return out


def parse_extraction(obj: dict[str, Any]) -> Extraction:
    """The entities/relationships of a JSON object (gold or prediction) as an Extraction."""
    return Extraction.model_validate(
        {
            "entities": _clean_objects(obj.get("entities") or []),
            "relationships": _clean_objects(obj.get("relationships") or []),
        }
    )


def _describe(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(x) for x in first["loc"])
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{loc}: {first['msg']}{more}"


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        content = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected a JSONL file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    for number, line in enumerate(content.splitlines(), start=1):
        if line.strip():
            yield number, line


def _load_line(path: Path, number: int, line: str) -> tuple[str | None, dict[str, Any] | str]:
    """(id, object) or (id if recognisable, problem)."""
    where = f"{path.name}:{number}"
    hint = _ID_HINT.search(line)
    hinted = None
    if hint:
        try:
            hinted = str(json.loads(hint.group(1)))
        except json.JSONDecodeError:
            hinted = None
    id_part = f" (id {hinted})" if hinted is not None else ""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return hinted, f"{where}{id_part}: invalid JSON ({exc.msg}, column {exc.colno}); skipped"
    if not isinstance(obj, dict):
        return None, f"{where}: expected a JSON object, got {type(obj).__name__}; skipped"
    raw_id = obj.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == "":
        return None, f'{where}: missing or invalid "id"; skipped'
    return str(raw_id), obj


def read_gold(path: Path) -> tuple[list[GoldRecord], list[str]]:
    """Gold items ``{"id", "text", "entities", "relationships"}`` (extra keys ignored)."""
    records: list[GoldRecord] = []
    warnings: list[str] = []
    seen: dict[str, int] = {}
    for number, line in _lines(path):
        item_id, obj = _load_line(path, number, line)
        if isinstance(obj, str):
            warnings.append(obj)
            continue
        assert item_id is not None
        where = f"{path.name}:{number} (id {item_id})"
        if item_id in seen:
            warnings.append(f"{where}: duplicate id, first seen on line {seen[item_id]}; skipped")
            continue
        text = obj.get("text")
        if not isinstance(text, str):
            warnings.append(f'{where}: missing or non-string "text"; skipped')
            continue
        raw_schema = obj.get("schema")
        try:
            extraction = parse_extraction(obj)
            schema = Schema.model_validate(raw_schema) if isinstance(raw_schema, dict) else None
        except ValidationError as exc:
            warnings.append(f"{where}: {_describe(exc)}; skipped")
            continue
        seen[item_id] = number
        records.append(GoldRecord(item_id, text, extraction, number, schema))
    return records, warnings


def read_predictions(path: Path) -> tuple[dict[str, Extraction], list[str], int]:
    """Prediction lines ``{"id", "entities", "relationships"}``: (by id, warnings, lines read)."""
    out: dict[str, Extraction] = {}
    warnings: list[str] = []
    first_line: dict[str, int] = {}
    n_lines = 0
    for number, line in _lines(path):
        n_lines += 1
        item_id, obj = _load_line(path, number, line)
        if isinstance(obj, str):
            warnings.append(obj)
            continue
        assert item_id is not None
        where = f"{path.name}:{number} (id {item_id})"
        if item_id in first_line:
            warnings.append(
                f"{where}: duplicate id, first seen on line {first_line[item_id]}; skipped"
            )
            continue
        try:
            out[item_id] = parse_extraction(obj)
        except ValidationError as exc:
            warnings.append(f"{where}: {_describe(exc)}; skipped")
            continue
        first_line[item_id] = number
    return out, warnings, n_lines


def _id_list(ids: list[str], limit: int = 20) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


def score_files(
    gold_path: str | Path, predictions_path: str | Path, config: ScoringConfig
) -> ScoredFiles:
    """Score a predictions file against a gold file.

    A gold id without a prediction line is scored as a failed item (never a pass) and reported; a
    prediction id not in gold is reported and ignored. Raises UsageError only when nothing
    can be scored: unreadable file, no usable gold line, or predictions that are all broken
    or that share no id with gold.
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
    items = [
        score_item(
            item_id=g.id,
            text=g.text,
            gold=g.extraction,
            pred=preds.get(g.id),
            config=config,
            context_texts=context,
            schema=g.schema,
        )
        for g in gold
    ]
    report = aggregate(items, config, warnings=warnings)
    return ScoredFiles(report=report, items=items, warnings=list(report["warnings"]))
