"""LangFuse annotation queues for gold review, through SDK 5's ``lf.api.annotation_queues``.

A queue carries the categorical score config ``gold_verdict``; each candidate becomes one
queue item pointing at the item's trace, with a comment on that trace stating the question,
so a reviewer in the LangFuse UI needs nothing of ours. Reviewers' verdicts come back as the
``gold_verdict`` scores LangFuse stores with the queue's id (``source: ANNOTATION``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extraction_eval.backends.langfuse.errors import api_errors
from extraction_eval.backends.langfuse.score_configs import ScoreConfigSpec, ensure_score_configs
from extraction_eval.evaluators.review import VERDICT_SCORE, VERDICTS

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = [
    "VERDICT_CONFIG",
    "QueueItem",
    "ReviewScore",
    "add_comment",
    "add_queue_item",
    "ensure_queue",
    "find_queue",
    "queue_items",
    "verdict_scores",
]

_PAGE = 100
MAX_QUEUE_ITEMS = 100_000  # read at most this many items of a queue (1,000 pages)

VERDICT_CONFIG = ScoreConfigSpec(
    VERDICT_SCORE,
    "CATEGORICAL",
    "extraction-eval: a reviewer's verdict on a likely gold gap (add_to_gold: the gold misses"
    " it; prediction_wrong: the model is wrong; remove_from_gold: the gold is wrong; unsure)",
    categories=VERDICTS,
)


@dataclass(frozen=True)
class QueueItem:
    id: str
    object_id: str
    object_type: str
    status: str


@dataclass(frozen=True)
class ReviewScore:
    """One ``gold_verdict`` a reviewer gave (on a trace or an observation)."""

    id: str
    value: str
    object_id: str | None
    trace_id: str | None
    author: str | None
    comment: str | None
    timestamp: str


def _value(x: Any) -> str:
    return str(getattr(x, "value", x))


def find_queue(lf: Langfuse, name: str) -> Any | None:
    """The queue of that name (LangFuse has no unique name: the first, oldest, wins)."""
    page = 1
    while True:
        with api_errors(lf, "listing annotation queues"):
            batch = lf.api.annotation_queues.list_queues(page=page, limit=_PAGE)
        for queue in batch.data:
            if queue.name == name:
                return queue
        if page >= (batch.meta.total_pages or 1):
            return None
        page += 1


def ensure_queue(lf: Langfuse, name: str, description: str) -> tuple[Any, str, bool]:
    """(queue, gold_verdict config id, created): the queue, made with the config if missing."""
    config_id = ensure_score_configs(lf, (VERDICT_CONFIG,))[VERDICT_SCORE]
    queue = find_queue(lf, name)
    if queue is not None:
        return queue, config_id, False
    with api_errors(lf, f"creating the annotation queue {name!r}"):
        queue = lf.api.annotation_queues.create_queue(
            name=name, description=description, score_config_ids=[config_id]
        )
    return queue, config_id, True


def queue_items(lf: Langfuse, queue_id: str, status: str | None = None) -> Iterator[QueueItem]:
    """Every item of the queue (optionally of one status), a page at a time."""
    from langfuse.api import AnnotationQueueStatus

    wanted = AnnotationQueueStatus(status) if status else None
    page = 1
    while page <= MAX_QUEUE_ITEMS // _PAGE:
        with api_errors(lf, f"listing the items of annotation queue {queue_id}"):
            batch = lf.api.annotation_queues.list_queue_items(
                queue_id, status=wanted, page=page, limit=_PAGE
            )
        for item in batch.data:
            yield QueueItem(
                str(item.id), str(item.object_id), _value(item.object_type), _value(item.status)
            )
        if page >= (batch.meta.total_pages or 1):
            return
        page += 1


def add_queue_item(lf: Langfuse, queue_id: str, object_id: str, object_type: str) -> str:
    from langfuse.api import AnnotationQueueObjectType

    with api_errors(lf, f"adding {object_type.lower()} {object_id} to annotation queue"):
        item = lf.api.annotation_queues.create_queue_item(
            queue_id, object_id=object_id, object_type=AnnotationQueueObjectType(object_type)
        )
    return str(item.id)


def add_comment(lf: Langfuse, project_id: str, object_type: str, object_id: str, text: str) -> None:
    """A comment on the object, shown beside it in the queue's view in the UI."""
    with api_errors(lf, f"commenting on {object_type.lower()} {object_id}"):
        lf.api.comments.create(
            project_id=project_id,
            object_type=object_type,
            object_id=object_id,
            content=text[:5000],
        )


def project_id(lf: Langfuse) -> str:
    with api_errors(lf, "reading the project of the API keys"):
        projects = lf.api.projects.get()
    return str(projects.data[0].id)


def verdict_scores(lf: Langfuse, queue_id: str) -> list[ReviewScore]:
    """Every ``gold_verdict`` score given in the queue, oldest first."""
    out: list[ReviewScore] = []
    cursor: str | None = None
    while True:
        with api_errors(lf, f"reading the verdicts of annotation queue {queue_id}"):
            page = lf.api.scores.get_many(
                name=VERDICT_SCORE,
                queue_id=queue_id,
                fields="details,subject,annotation",
                limit=_PAGE,
                cursor=cursor,
            )
        for s in page.data:
            subject = getattr(s, "subject", None)
            out.append(
                ReviewScore(
                    id=str(s.id),
                    value=str(s.value),
                    object_id=getattr(subject, "id", None),
                    trace_id=getattr(subject, "trace_id", None) or getattr(subject, "id", None),
                    author=getattr(s, "author_user_id", None),
                    comment=getattr(s, "comment", None),
                    timestamp=str(s.timestamp),
                )
            )
        cursor = getattr(page.meta, "cursor", None)
        if not cursor:
            break
    out.sort(key=lambda r: (r.timestamp, r.id))
    return out
