"""Annotation queues and comments for the fake LangFuse (``langfuse_server``), as LangFuse's
public API defines them (``/work/shared/docs/langfuse-openapi.yml``):

    GET/POST /annotation-queues                     list (page, limit) / create
    GET      /annotation-queues/{id}                one queue
    GET/POST /annotation-queues/{id}/items          list (status, page, limit) / add an item
    GET/PATCH/DELETE /annotation-queues/{id}/items/{itemId}
    POST     /annotation-queues/{id}/assignments    (recorded, answered like LangFuse)
    POST/GET /comments                              attach a comment / list (objectType, objectId)

:meth:`QueueState.review` plays a reviewer in the UI: a ``source: ANNOTATION`` score with the
queue's id on the item's object, an optional comment, and the item marked COMPLETED.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

_OBJECT_TYPES = ("TRACE", "OBSERVATION", "SESSION")
_STATUSES = ("PENDING", "COMPLETED")


def _iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class QueueState:
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)  # by id
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # by id, insertion order
    comments: list[dict[str, Any]] = field(default_factory=list)
    assignments: list[dict[str, Any]] = field(default_factory=list)


def _page(rows: list[Any], query: dict[str, list[str]]) -> tuple[list[Any], dict[str, int]]:
    def num(name: str, default: int) -> int:
        try:
            return int(query.get(name, [str(default)])[0])
        except ValueError:
            return default

    page, limit = max(num("page", 1), 1), max(num("limit", 50), 1)
    start = (page - 1) * limit
    pages = (len(rows) + limit - 1) // limit
    meta = {"page": page, "limit": limit, "totalItems": len(rows), "totalPages": pages}
    return rows[start : start + limit], meta


class QueueRoutes:
    """Handlers mixed into ``FakeLangfuse`` (``self._queues``, ``self._lock``, ...)."""

    _queues: QueueState
    project_id: str

    def queue_routes(self, seg: str) -> list[tuple[str, str, Any]]:
        q = f"/api/public/annotation-queues/{seg}"
        return [
            ("GET", "/api/public/annotation-queues", self._list_queues),
            ("POST", "/api/public/annotation-queues", self._create_queue),
            ("GET", q, self._get_queue),
            ("GET", f"{q}/items", self._list_queue_items),
            ("POST", f"{q}/items", self._create_queue_item),
            ("GET", f"{q}/items/{seg}", self._get_queue_item),
            ("PATCH", f"{q}/items/{seg}", self._update_queue_item),
            ("DELETE", f"{q}/items/{seg}", self._delete_queue_item),
            ("POST", f"{q}/assignments", self._create_assignment),
            ("POST", "/api/public/comments", self._create_comment),
            ("GET", "/api/public/comments", self._list_comments),
        ]

    def _list_queues(self, req: Any) -> tuple[int, Any]:
        rows, meta = _page(list(self._queues.queues.values()), req.query)
        return 200, {"data": [dict(r) for r in rows], "meta": meta}

    def _create_queue(self, req: Any) -> tuple[int, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        name, configs = body.get("name"), body.get("scoreConfigIds")
        if not isinstance(name, str) or not name:
            return 400, {"message": "name is required"}
        if not isinstance(configs, list):
            return 400, {"message": "scoreConfigIds is required"}
        known = self._state.score_configs  # type: ignore[attr-defined]
        missing = [c for c in configs if c not in known]
        if missing:
            return 400, {"message": f"unknown score configs {missing}"}
        if any(q["name"] == name for q in self._queues.queues.values()):
            return 409, {"message": f"a queue named {name!r} exists"}
        now = _iso()
        queue = {
            "id": uuid.uuid4().hex,
            "name": name,
            "description": body.get("description"),
            "scoreConfigIds": list(configs),
            "createdAt": now,
            "updatedAt": now,
        }
        self._queues.queues[queue["id"]] = queue
        return 200, dict(queue)

    def _get_queue(self, req: Any) -> tuple[int, Any]:
        queue = self._queues.queues.get(req.params[0])
        return (404, {"message": "queue not found"}) if queue is None else (200, dict(queue))

    def _queue_items(self, queue_id: str) -> list[dict[str, Any]]:
        return [i for i in self._queues.items.values() if i["queueId"] == queue_id]

    def _list_queue_items(self, req: Any) -> tuple[int, Any]:
        if req.params[0] not in self._queues.queues:
            return 404, {"message": "queue not found"}
        status = req.query.get("status", [None])[0]
        rows = [i for i in self._queue_items(req.params[0]) if status in (None, i["status"])]
        page, meta = _page(rows, req.query)
        return 200, {"data": [dict(r) for r in page], "meta": meta}

    def _create_queue_item(self, req: Any) -> tuple[int, Any]:
        if req.params[0] not in self._queues.queues:
            return 404, {"message": "queue not found"}
        body = req.body if isinstance(req.body, dict) else {}
        object_id, object_type = body.get("objectId"), body.get("objectType")
        if not isinstance(object_id, str) or not object_id:
            return 400, {"message": "objectId is required"}
        if object_type not in _OBJECT_TYPES:
            return 400, {"message": f"objectType must be one of {_OBJECT_TYPES}"}
        status = body.get("status") or "PENDING"
        if status not in _STATUSES:
            return 400, {"message": f"status must be one of {_STATUSES}"}
        now = _iso()
        item = {
            "id": uuid.uuid4().hex,
            "queueId": req.params[0],
            "objectId": object_id,
            "objectType": object_type,
            "status": status,
            "completedAt": now if status == "COMPLETED" else None,
            "createdAt": now,
            "updatedAt": now,
        }
        self._queues.items[item["id"]] = item
        return 200, dict(item)

    def _item(self, req: Any) -> dict[str, Any] | None:
        item = self._queues.items.get(req.params[1])
        return item if item is not None and item["queueId"] == req.params[0] else None

    def _get_queue_item(self, req: Any) -> tuple[int, Any]:
        item = self._item(req)
        return (404, {"message": "item not found"}) if item is None else (200, dict(item))

    def _update_queue_item(self, req: Any) -> tuple[int, Any]:
        item = self._item(req)
        if item is None:
            return 404, {"message": "item not found"}
        status = (req.body or {}).get("status")
        if status is not None:
            if status not in _STATUSES:
                return 400, {"message": f"status must be one of {_STATUSES}"}
            item["status"] = status
            item["completedAt"] = _iso() if status == "COMPLETED" else None
        item["updatedAt"] = _iso()
        return 200, dict(item)

    def _delete_queue_item(self, req: Any) -> tuple[int, Any]:
        item = self._item(req)
        if item is None:
            return 404, {"message": "item not found"}
        del self._queues.items[item["id"]]
        return 200, {"success": True, "message": "Item removed from queue"}

    def _create_assignment(self, req: Any) -> tuple[int, Any]:
        user = (req.body or {}).get("userId")
        self._queues.assignments.append({"queueId": req.params[0], "userId": user})
        return 200, {"userId": user, "queueId": req.params[0], "projectId": self.project_id}

    def _create_comment(self, req: Any) -> tuple[int, Any]:
        body = req.body if isinstance(req.body, dict) else {}
        content = body.get("content")
        if not isinstance(content, str) or not content or len(content) > 5000:
            return 400, {"message": "content must be 1 to 5000 characters"}
        if str(body.get("objectType", "")).upper() not in (*_OBJECT_TYPES, "PROMPT"):
            return 400, {"message": "invalid objectType"}
        now = _iso()
        comment = {
            "id": uuid.uuid4().hex,
            "projectId": body.get("projectId"),
            "objectType": str(body["objectType"]).upper(),
            "objectId": body.get("objectId"),
            "content": content,
            "authorUserId": body.get("authorUserId"),
            "createdAt": now,
            "updatedAt": now,
        }
        self._queues.comments.append(comment)
        return 200, {"id": comment["id"]}

    def _list_comments(self, req: Any) -> tuple[int, Any]:
        object_type = req.query.get("objectType", [None])[0]
        object_id = req.query.get("objectId", [None])[0]
        rows = [
            c
            for c in self._queues.comments
            if object_type in (None, c["objectType"]) and object_id in (None, c["objectId"])
        ]
        page, meta = _page(rows, req.query)
        return 200, {"data": [dict(c) for c in page], "meta": meta}

    # what tests read and do ---------------------------------------------------------------

    def annotation_queues(self) -> list[dict[str, Any]]:
        with self._lock:  # type: ignore[attr-defined]
            return [dict(q) for q in self._queues.queues.values()]

    def queue_items(self, queue_id: str | None = None) -> list[dict[str, Any]]:
        with self._lock:  # type: ignore[attr-defined]
            return [
                dict(i) for i in self._queues.items.values() if queue_id in (None, i["queueId"])
            ]

    def comments(self) -> list[dict[str, Any]]:
        with self._lock:  # type: ignore[attr-defined]
            return [dict(c) for c in self._queues.comments]

    def seed_queue_items(self, queue_id: str, object_ids: list[str]) -> None:
        """Items someone else put in the queue (no HTTP: a big queue in a blink)."""
        with self._lock:  # type: ignore[attr-defined]
            now = _iso()
            for object_id in object_ids:
                item_id = uuid.uuid4().hex
                self._queues.items[item_id] = {
                    "id": item_id,
                    "queueId": queue_id,
                    "objectId": object_id,
                    "objectType": "TRACE",
                    "status": "PENDING",
                    "completedAt": None,
                    "createdAt": now,
                    "updatedAt": now,
                }

    def change_review(self, score_id: str, value: str) -> None:
        """A reviewer picking another verdict in the UI: the same score, a new value."""
        with self._lock:  # type: ignore[attr-defined]
            score = self._state.scores[score_id]  # type: ignore[attr-defined]
            score["value"] = value
            score["updatedAt"] = _iso()

    def remove_queue_item(self, item_id: str) -> None:
        """What deleting the item in the UI does."""
        with self._lock:  # type: ignore[attr-defined]
            del self._queues.items[item_id]

    def review(
        self,
        item_id: str,
        value: str,
        *,
        comment: str | None = None,
        author: str = "reviewer-1",
        complete: bool = True,
    ) -> dict[str, Any]:
        """What a reviewer does in the UI: score the item's object with the queue's config
        (``source: ANNOTATION``, the queue's id), and mark the item completed."""
        with self._lock:  # type: ignore[attr-defined]
            item = self._queues.items[item_id]
            queue = self._queues.queues[item["queueId"]]
            config = self._state.score_configs[queue["scoreConfigIds"][0]]  # type: ignore[attr-defined]
            score: dict[str, Any] = {
                "id": uuid.uuid4().hex,
                "name": config["name"],
                "value": value,
                "dataType": "CATEGORICAL",
                "configId": config["id"],
                "source": "ANNOTATION",
                "queueId": queue["id"],
                "authorUserId": author,
                "comment": comment,
            }
            if item["objectType"] == "TRACE":
                score["traceId"] = item["objectId"]
            else:
                score["observationId"] = item["objectId"]
                score["traceId"] = item.get("traceId") or item["objectId"]
            self._store_score(score)  # type: ignore[attr-defined]
            if complete:
                item["status"] = "COMPLETED"
                item["completedAt"] = item["updatedAt"] = _iso()
            return score
