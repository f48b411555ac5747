"""Scores to LangFuse: queued through the SDK (which batches them), with deterministic ids for
run-level scores so a resumed run overwrites its set instead of adding a second one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from extraction_eval.types import Score

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = ["experiment_id_for", "item_score_id", "post_score", "run_score_id"]


def experiment_id_for(lf: Langfuse, dataset_id: str | None, run_name: str) -> str:
    """The experiment id ``run_experiment`` derives for ``run_name`` on a dataset when given
    none: the server's stable derivation (``langfuse-experiment-v1``, project, dataset, run
    name; SHA-256, 16 hex), so a run split over worker processes, each passing this id, is
    the one experiment a single ``run_experiment`` makes. Without a dataset or project id a
    random one, as the SDK does then."""
    import hashlib
    import json
    import secrets

    project_id: str | None = None
    if dataset_id:
        try:
            projects = lf.api.projects.get()
            project_id = str(projects.data[0].id) if projects.data else None
        except Exception:  # the SDK too falls back to a random id (and so do we)
            project_id = None
    if not dataset_id or not project_id:
        return secrets.token_hex(8)
    payload = json.dumps(
        ["langfuse-experiment-v1", project_id, dataset_id, run_name],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


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
