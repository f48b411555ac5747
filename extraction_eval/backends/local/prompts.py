"""Prompt versions and labels, as in LangFuse prompt management."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from extraction_eval.backends.local.connection import StoreConnection, _dumps, _now
from extraction_eval.errors import NotFoundError, UsageError
from extraction_eval.prompts.template import PromptTemplate, messages_hash
from extraction_eval.prompts.versions import (
    DEFAULT_LABEL,
    LATEST,
    PromptInfo,
    PromptPush,
    PromptVersion,
    check_label,
    check_messages,
    check_prompt_name,
)


class PromptTables(StoreConnection):
    """Numbered versions per prompt name; labels (``production``, ...) point at one each."""

    def push_prompt(
        self,
        name: str,
        messages: Sequence[dict[str, str]],
        *,
        labels: Sequence[str] = (),
        config: dict[str, Any] | None = None,
        commit_message: str | None = None,
        force: bool = False,
    ) -> PromptPush:
        """Store ``messages`` as the next version of ``name`` and point ``labels`` at it.

        When the newest version already has exactly these messages and config, no version is
        added and the labels move to it (``force=True`` adds one anyway).
        """
        name = check_prompt_name(name)
        wanted = tuple(dict.fromkeys(check_label(label) for label in labels))
        chat = check_messages(messages)
        digest, config_json, now = messages_hash(chat), _dumps(config or {}), _now()
        with self._tx(write=True) as conn:
            newest = conn.execute(
                "SELECT version, content_hash, config FROM prompt_versions WHERE name = ?"
                " ORDER BY version DESC LIMIT 1",
                (name,),
            ).fetchone()
            unchanged = newest is not None and (newest["content_hash"], newest["config"]) == (
                digest,
                config_json,
            )
            if unchanged and not force:
                version = int(newest["version"])
            else:
                version = int(newest["version"]) + 1 if newest is not None else 1
                conn.execute(
                    "INSERT INTO prompt_versions (name, version, messages, content_hash, config,"
                    " commit_message, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, version, _dumps(chat), digest, config_json, commit_message, now),
                )
            for label in wanted:
                conn.execute(
                    "INSERT INTO prompt_labels (name, label, version, updated_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (name, label) DO UPDATE"
                    " SET version = excluded.version, updated_at = excluded.updated_at",
                    (name, label, version, now),
                )
        return PromptPush(
            name=name, version=version, created=not (unchanged and not force), labels=wanted
        )

    def get_prompt(
        self, name: str, *, label: str | None = None, version: int | None = None
    ) -> PromptTemplate:
        """A stored version by ``version`` or ``label`` (``latest``: the newest; neither:
        ``production``), as the same ``PromptTemplate`` a LangFuse fetch gives."""
        if label is not None and version is not None:
            raise UsageError("pass a prompt label or a prompt version, not both")
        with self._tx(write=False) as conn:
            latest = _require_prompt(conn, name)
            if version is None:
                wanted = label if label is not None else DEFAULT_LABEL
                if wanted == LATEST:
                    version = latest
                else:
                    found = conn.execute(
                        "SELECT version FROM prompt_labels WHERE name = ? AND label = ?",
                        (name, wanted),
                    ).fetchone()
                    if found is None:
                        known = [LATEST, *_prompt_labels(conn, name)]
                        raise NotFoundError(
                            f"prompt {name!r} has no label {wanted!r} in the local store"
                            f" (labels: {', '.join(known)})"
                        )
                    version = int(found["version"])
            row = conn.execute(
                "SELECT messages FROM prompt_versions WHERE name = ? AND version = ?",
                (name, version),
            ).fetchone()
            if row is None:
                raise NotFoundError(
                    f"prompt {name!r} has no version {version} in the local store"
                    f" (versions 1..{latest})"
                )
        return PromptTemplate(
            name=name,
            messages=json.loads(row["messages"]),
            version=int(version),
            label=label,
            source="local-store",
        )

    def prompt_versions(self, name: str) -> list[PromptVersion]:
        """Every version of ``name``, oldest first, each with the labels pointing at it."""
        with self._tx(write=False) as conn:
            latest = _require_prompt(conn, name)
            labels: dict[int, list[str]] = {latest: [LATEST]}
            for row in conn.execute(
                "SELECT label, version FROM prompt_labels WHERE name = ? ORDER BY label", (name,)
            ):
                labels.setdefault(int(row["version"]), []).append(row["label"])
            rows = conn.execute(
                "SELECT * FROM prompt_versions WHERE name = ? ORDER BY version", (name,)
            ).fetchall()
        return [
            PromptVersion(
                name=name,
                version=int(r["version"]),
                messages=json.loads(r["messages"]),
                content_hash=r["content_hash"],
                labels=tuple(labels.get(int(r["version"]), [])),
                config=json.loads(r["config"]),
                commit_message=r["commit_message"],
                created_at=r["created_at"],
            )
            for r in rows
        ]

    def list_prompts(self) -> list[PromptInfo]:
        with self._tx(write=False) as conn:
            heads = conn.execute(
                "SELECT name, COUNT(*) AS n, MAX(version) AS latest, MAX(created_at) AS at"
                " FROM prompt_versions GROUP BY name ORDER BY name"
            ).fetchall()
            label_rows = conn.execute(
                "SELECT name, label, version, updated_at FROM prompt_labels ORDER BY label"
            ).fetchall()
        out: list[PromptInfo] = []
        for head in heads:
            mine = [r for r in label_rows if r["name"] == head["name"]]
            out.append(
                PromptInfo(
                    name=head["name"],
                    versions=int(head["n"]),
                    latest=int(head["latest"]),
                    labels={
                        LATEST: int(head["latest"]),
                        **{r["label"]: int(r["version"]) for r in mine},
                    },
                    updated_at=max([head["at"], *(r["updated_at"] for r in mine)]),
                )
            )
        return out


def _require_prompt(conn: sqlite3.Connection, name: str) -> int:
    """The newest version of prompt ``name``; a one-line error naming the known prompts."""
    row = conn.execute(
        "SELECT MAX(version) FROM prompt_versions WHERE name = ?", (name,)
    ).fetchone()
    if row is None or row[0] is None:
        names = [r[0] for r in conn.execute("SELECT DISTINCT name FROM prompt_versions")]
        known = f"known: {', '.join(sorted(names))}" if names else "none pushed yet"
        raise NotFoundError(
            f"prompt {name!r} not found in the local store ({known}; add it with prompts push)"
        )
    return int(row[0])


def _prompt_labels(conn: sqlite3.Connection, name: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT label FROM prompt_labels WHERE name = ? ORDER BY label", (name,)
        )
    ]
