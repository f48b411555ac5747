"""The one step that diffs a changed item of two runs, wherever it happens (``compare``'s pass,
``runs diff``, the HTML report): from the two runs' stored views of the item when both fit its
gold (no scoring at all), else by scoring both predictions with the comparison's settings.
Both ways give the same :class:`~extraction_eval.evaluators.diff.ItemDiff`; the views only
save the scoring."""

from __future__ import annotations

from extraction_eval.evaluators import ScoringConfig, score_dataset_item
from extraction_eval.evaluators.diff import FollowedRun, ItemDiff, diff_followed, diff_item
from extraction_eval.types import DatasetItem, Extraction


def _fits(view: FollowedRun | None, gold: Extraction) -> bool:
    return view is not None and (len(view.entity_state), len(view.relationship_state)) == (
        len(gold.entities),
        len(gold.relationships),
    )


def diff_changed_item(
    item: DatasetItem,
    gold: Extraction,
    pred_a: Extraction | None,
    pred_b: Extraction | None,
    config: ScoringConfig,
    views: tuple[FollowedRun | None, FollowedRun | None] = (None, None),
) -> ItemDiff:
    """A → B on one item. ``gold``: the item's gold as it is scored (``scored_gold``);
    ``views``: A's and B's stored views, made with ``config`` (None: re-score)."""
    view_a, view_b = views
    if view_a is not None and view_b is not None and _fits(view_a, gold) and _fits(view_b, gold):
        return diff_followed(
            item_id=item.id,
            gold=gold,
            pred_a=pred_a,
            pred_b=pred_b,
            run_a=view_a,
            run_b=view_b,
            config=config,
        )
    return diff_item(
        item_id=item.id,
        text=item.text,
        gold=gold,
        pred_a=pred_a,
        pred_b=pred_b,
        config=config,
        scores=(score_dataset_item(item, pred_a, config), score_dataset_item(item, pred_b, config)),
    )
