"""Six CoNLL04 documents whose gold lacks one entity the offline baseline finds (the review-
queue tests, local and LangFuse): found with the baseline itself, in file order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.datasets.jsonl import read_items
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.gold_view import score_dataset_item
from extraction_eval.evaluators.review import ItemView, select_candidates
from extraction_eval.pipeline.baseline import extract_baseline
from extraction_eval.types import DatasetItem, Schema, TaxonomyTag

SCHEMA = Schema(
    entity_types=["Peop", "Org", "Loc", "Other"],
    relationship_types=["Work_For", "Kill", "OrgBased_In", "Live_In", "Located_In"],
)


def _without_one_entity(item: DatasetItem) -> Iterator[tuple[DatasetItem, str]]:
    """The item with one entity the baseline finds (in no relationship) cut from its gold."""
    used = {i for r in item.expected.relationships for i in (r.head, r.tail)}
    names = [e.name for e in item.expected.entities]
    for j, e in enumerate(item.expected.entities):
        if j in used or names.count(e.name) > 1:
            continue
        rels = [
            r.model_copy(
                update={
                    "head": None if r.head is None else r.head - (r.head > j),
                    "tail": None if r.tail is None else r.tail - (r.tail > j),
                }
            )
            for r in item.expected.relationships
        ]
        ents = [x for k, x in enumerate(item.expected.entities) if k != j]
        expected = item.expected.model_copy(update={"entities": ents, "relationships": rels})
        yield item.model_copy(update={"expected": expected}), e.name


def six_documents(shared: Path) -> list[tuple[DatasetItem, str]]:
    """The first six CoNLL04 dev/test documents (file order) where the baseline finds every
    gold entity and nothing else, cut so that one of its finds is the run's only candidate."""
    out: list[tuple[DatasetItem, str]] = []
    for name in ("conll04_dev.jsonl", "conll04_test.jsonl"):
        for item in read_items(shared / name)[0]:
            item = item.model_copy(update={"schema_": SCHEMA})
            pred = extract_baseline(item.text, SCHEMA)
            scored = score_dataset_item(item, pred, ScoringConfig())
            if any(t.kind == "entity" or t.side == "pred" for t in scored.taxonomy):
                continue
            for cut, removed in _without_one_entity(item):
                tags = score_dataset_item(cut, pred, ScoringConfig()).taxonomy
                view = ItemView("c6", cut, pred, [TaxonomyTag(**t.to_json()) for t in tags])  # type: ignore[arg-type]
                found = select_candidates([view]).candidates
                if [c.obj.name for c in found] == [removed]:  # type: ignore[union-attr]
                    out.append((cut, removed))
                    break
            if len(out) == 6:
                return out
    pytest.skip(f"only {len(out)} suitable CoNLL04 documents found")


def spurious_entities(run: str) -> int:
    """Predicted entities of a stored run no gold object matched, grounded in the text."""
    store = LocalStore()
    record = store.get_run(run)
    assert record is not None
    return sum(
        1
        for r in store.results(record.id)
        for t in r.taxonomy or ()
        if t.category == "spurious" and t.kind == "entity"
    )
