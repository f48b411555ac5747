"""Labelled pairs from gold that lists every mention of its entities (Re-DocRED does).

Positives: two different surface forms of one entity ("Wilfried Schneider" / "Schneider"),
at most ``per_entity`` a entity. Hard negatives: two entities of one type in one document,
most similar names first (rapidfuzz ``WRatio``), as many as the document has positives (at
least one when it has any same-type pair), never two entities whose names are equal. The
document's text is each pair's context. Deterministic: same gold, same pairs, same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rapidfuzz import fuzz

from extraction_eval.datasets.jsonl import GoldRecord
from extraction_eval.types import Entity


def _forms(entity: Entity) -> list[str]:
    """The entity's distinct surface forms (casefold-distinct), name first."""
    seen: dict[str, str] = {}
    for form in [entity.name, *(m.name for m in entity.mentions), *entity.aliases]:
        key = " ".join(form.casefold().split())
        if key and key not in seen:
            seen[key] = form
    return list(seen.values())


def document_pairs(record: GoldRecord, per_entity: int = 3) -> Iterator[dict[str, Any]]:
    """The labelled pairs of one gold document (see the module's docstring)."""
    entities = record.extraction.entities
    positives = 0
    for e in entities:
        forms = _forms(e)
        for other in forms[1 : 1 + per_entity]:
            positives += 1
            yield _line(record, forms[0], other, e.type, same=True)
    candidates: list[tuple[float, int, int]] = []
    for i, e in enumerate(entities):
        for j in range(i + 1, len(entities)):
            f = entities[j]
            if " ".join(e.type.casefold().split()) != " ".join(f.type.casefold().split()):
                continue
            if e.name.casefold().strip() == f.name.casefold().strip():
                continue
            candidates.append((-fuzz.WRatio(e.name.casefold(), f.name.casefold()), i, j))
    candidates.sort()
    for _, i, j in candidates[: max(positives, 1)]:
        yield _line(record, entities[i].name, entities[j].name, entities[i].type, same=False)


def _line(record: GoldRecord, a: str, b: str, type_: str, *, same: bool) -> dict[str, Any]:
    return {"a": a, "b": b, "type": type_, "context": record.text, "same": same, "item": record.id}


def build_pairs(records: Iterable[GoldRecord], per_entity: int = 3) -> list[dict[str, Any]]:
    """Every document's pairs, in file order."""
    return [p for r in records for p in document_pairs(r, per_entity)]
