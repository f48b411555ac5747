"""Scores to LangFuse: queued through the SDK (which batches them), with deterministic ids for
run-level scores so a resumed run overwrites its set instead of adding a second one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extraction_eval.types import Score

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = ["item_score_id", "post_score", "run_score_id"]


def run_score_id(experiment_id: str, name: str) -> str:
    """Deterministic, so a resumed run overwrites its run-level scores (LangFuse upserts by
    score id) instead of adding a second set."""
    from langfuse import Langfuse

    return str(Langfuse.create_trace_id(seed=f"extraction-eval/run-score/{experiment_id}/{name}"))


def item_score_id(trace_id: str, score: Score) -> str:
    """Deterministic per trace and score (a categorical score's value too: a trace may carry
    several ``failure_category`` scores), so the read-back can post a missing score again
    without risking a second copy of one that was only slow to arrive."""
    from langfuse import Langfuse

    key = f"{trace_id}/{score.name}"
    if score.data_type == "CATEGORICAL":
        key += f"/{score.value}"
    return str(Langfuse.create_trace_id(seed=f"extraction-eval/item-score/{key}"))


def post_score(lf: Langfuse, score: Score, **subject: str | None) -> None:
    """Queue one score (the SDK batches it); ``subject``: trace/observation or experiment."""
    create: Any = lf.create_score  # overloaded per data type; ours carries its own
    create(
        name=score.name,
        value=score.value,
        data_type=score.data_type,
        comment=score.comment,
        **subject,
    )
