"""One item of a stored run, whole (``runs show NAME --item ID``): its input, the model's raw
reply, the output read from it, the error, the repairs, the scores and the failure taxonomy.

Read from the local store only: a LangFuse-mode run's result is mirrored there, and its input
is shown when the dataset is in the local store too (never fetched: a look at one item must
not need keys or the network).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import NotFoundError
from extraction_eval.types import DatasetItem, ItemResult

_SIMILAR_SHOWN = 5


@dataclass(frozen=True)
class ItemDetail:
    """A stored result and, when the local store has it, the dataset item it was run on."""

    run: RunRecord
    result: ItemResult
    item: DatasetItem | None
    input_note: str | None = None  # why the input is not shown
    # judge identity -> this item's judged matches (``--judge`` kept them with the run)
    judged: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def run_item(store: LocalStore, run: RunRecord, item_id: str) -> ItemDetail:
    """The item's stored result and input; ``NotFoundError`` naming a few ids of the run
    when the run has no result for ``item_id``."""
    found = next(iter(store.iter_item_results(run.id, [item_id])), None)
    if found is None:
        near = store.similar_item_ids(run.id, item_id, limit=_SIMILAR_SHOWN + 1)
        shown = ", ".join(near[:_SIMILAR_SHOWN]) + (", ..." if len(near) > _SIMILAR_SHOWN else "")
        raise NotFoundError(
            f"run {run.name!r} has no result for item {item_id!r}"
            + (f" (its items include {shown})" if shown else " (it has no results)")
        )
    try:
        items = store.get_items_by_ids(run.dataset, [item_id], version=run.dataset_version)
    except NotFoundError:
        items = {}
    item = items.get(item_id)
    note = None
    if item is None:
        where = "LangFuse dataset" if run.backend == "langfuse" else "dataset"
        note = f"not in the local store ({where} {run.dataset!r}, version {run.dataset_version})"
    return ItemDetail(
        run=run, result=found, item=item, input_note=note, judged=item_judged(store, run, item_id)
    )


def item_judged(store: LocalStore, run: RunRecord, item_id: str) -> dict[str, list[dict[str, Any]]]:
    """The item's judged matches in every judged block kept with the run (newest judging
    first), by judge identity; empty when the run was never judged."""
    out: dict[str, list[dict[str, Any]]] = {}
    for block in store.run_judged(run.id):
        items = block.get("items") or {}
        found = items.get(item_id) if isinstance(items, dict) else None
        out[str(block.get("judge"))] = [m for m in found or [] if isinstance(m, dict)]
    return out
