"""``gold apply-reviews``: reviewers' verdicts become a new dataset version.

Verdicts come from the LangFuse queue (its completed items' ``gold_verdict`` scores, matched
to the candidates triage sent through the item's trace) or from the local review file. Each
is applied at most once (the ledger records it with the version it made); an object given
two different verdicts, a verdict changed after it was applied, a verdict on an item the
dataset no longer has: each is one line, and nothing is guessed. Earlier dataset versions are
never touched: the changed items are uploaded as a new version, flagged human-verified.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.backends.base import DatasetBackend
from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local.reviews import LedgerRow
from extraction_eval.errors import UsageError, one_line
from extraction_eval.evaluators.review import (
    VERDICTS,
    Candidate,
    Decision,
    apply_decisions,
    safe_comment,
)


@dataclass(frozen=True)
class Given:
    """One verdict as a reviewer gave it (before it is checked)."""

    key: str
    verdict: str
    reviewer: str | None
    comment: str | None
    where: str  # what names it in a message: the file line, the score id


@dataclass
class ApplyReport:
    queue: str
    applied: list[Decision] = field(default_factory=list)
    unchanged: int = 0  # already applied with the same verdict
    unsure: int = 0
    pending: int = 0  # sent, no verdict yet
    versions: dict[str, str | int | None] = field(default_factory=dict)  # dataset -> version
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def verdicts_from_file(path: Path) -> tuple[list[Given], list[str]]:
    """The filled-in review file: lines with a ``verdict``; a bad line is one problem."""
    given: list[Given] = []
    problems: list[str] = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"{path}: {one_line(exc)}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict) or not isinstance(raw.get("key"), str):
                raise ValueError("not a review line (no key)")
        except (ValueError, RecursionError) as exc:
            problems.append(f"{path.name}:{number}: {one_line(exc)}; skipped")
            continue
        verdict = raw.get("verdict")
        if verdict in (None, ""):
            continue
        reviewer, comment = raw.get("reviewer"), raw.get("comment")
        given.append(
            Given(
                raw["key"],
                str(verdict),
                reviewer if isinstance(reviewer, str) else None,
                comment if isinstance(comment, str) else None,
                f"{path.name}:{number}",
            )
        )
    return given, problems


def verdicts_from_langfuse(
    queue: str, rows: Sequence[LedgerRow]
) -> tuple[list[Given], list[str], int]:
    """The completed queue items' ``gold_verdict`` scores, matched to the candidates sent;
    also how many sent items are still pending."""
    from extraction_eval.backends.langfuse import close_client, connect
    from extraction_eval.backends.langfuse.queues import find_queue, queue_items, verdict_scores

    problems: list[str] = []
    lf = connect()
    try:
        lf_queue = find_queue(lf, queue)
        if lf_queue is None:
            raise UsageError(f"LangFuse has no annotation queue named {queue!r}")
        items = {i.id: i for i in queue_items(lf, str(lf_queue.id))}
        scores = verdict_scores(lf, str(lf_queue.id))
    finally:
        close_client(lf)
    by_item = {r.queue_item_id: r for r in rows if r.queue_item_id}
    by_trace: dict[str, LedgerRow] = {}
    for r in rows:
        trace = r.candidate.get("trace_id")
        if isinstance(trace, str):
            by_trace[trace] = r
    done: set[str] = set()
    pending = 0
    for item_id, row in by_item.items():
        item = items.get(str(item_id))
        if item is None:
            problems.append(
                f"queue item {item_id} (item {row.item_id!r}) is gone from the queue;"
                " its verdict cannot be read"
            )
        elif item.status == "COMPLETED":
            done.add(item.object_id)
        else:
            pending += 1
    given: list[Given] = []
    for s in scores:
        sent = by_trace.get(s.trace_id or "")
        if sent is None:
            problems.append(
                f"verdict {s.id} on trace {s.trace_id}: no candidate of this tool was sent"
                " for it; ignored"
            )
            continue
        if s.trace_id not in done:
            continue  # scored but not completed yet: the reviewer may still change it
        given.append(Given(sent.key, s.value, s.author, s.comment, f"score {s.id}"))
    return given, problems, pending


def _decide(
    given: Sequence[Given], rows: dict[str, LedgerRow], report: ApplyReport
) -> list[Decision]:
    """The verdicts to apply now: checked, one per candidate, not applied before."""
    from extraction_eval.redact import configured_secrets

    by_key: dict[str, list[Given]] = defaultdict(list)
    for g in given:
        if g.key not in rows:
            report.problems.append(f"{g.where}: no candidate {g.key!r} was sent to this queue")
            continue
        if g.verdict not in VERDICTS:
            report.problems.append(
                f"{g.where}: verdict {g.verdict[:40]!r} is not one of {', '.join(VERDICTS)}"
            )
            continue
        by_key[g.key].append(g)
    secrets = configured_secrets()
    out: list[Decision] = []
    for key, gs in by_key.items():
        row = rows[key]
        label = f"item {row.item_id!r} ({row.candidate.get('question', key)})"
        values = sorted({g.verdict for g in gs})
        if len(values) > 1:
            report.problems.append(
                f"{label}: reviewed twice with different verdicts ({', '.join(values)});"
                " not applied: settle it in the queue"
            )
            continue
        g = gs[-1]
        if row.applied_verdict is not None:
            if row.applied_verdict == g.verdict:
                report.unchanged += 1
            else:
                report.problems.append(
                    f"{label}: verdict changed to {g.verdict} after {row.applied_verdict} was"
                    f" applied in version {row.applied_version}; not applied again (undo it"
                    " with gold override)"
                )
            continue
        if g.verdict == "unsure":
            report.unsure += 1
            continue
        comment, notes = safe_comment(g.comment, secrets)
        for n in notes:
            report.notes.append(f"{g.where}: comment of {label}: {n}")
        reviewer, rnotes = safe_comment(g.reviewer, secrets)
        report.notes.extend(f"{g.where}: reviewer name of {label}: {n}" for n in rnotes)
        candidate = Candidate.from_json(row.candidate)
        out.append(Decision(candidate, g.verdict, reviewer, comment))  # type: ignore[arg-type]
    return out


def apply_reviews(
    store: LocalStore,
    backend: DatasetBackend,
    queue: str,
    *,
    file: Path | None = None,
    langfuse: bool = False,
) -> ApplyReport:
    """Apply the queue's new verdicts as a new version of each dataset they are about."""
    rows = {r.key: r for r in store.review_candidates(queue)}
    if not rows:
        raise UsageError(f"no candidates were sent to queue {queue!r}: run gold triage first")
    report = ApplyReport(queue)
    if langfuse:
        given, problems, report.pending = verdicts_from_langfuse(queue, list(rows.values()))
    else:
        path = file or Path(f"{queue}.review.jsonl")
        given, problems = verdicts_from_file(path)
        report.pending = len(rows) - len({g.key for g in given})
    report.problems.extend(problems)
    decisions = _decide(given, rows, report)
    by_item: dict[tuple[str, str], list[Decision]] = defaultdict(list)
    for d in decisions:
        by_item[(d.candidate.dataset, d.candidate.item_id)].append(d)
    for dataset in sorted({k[0] for k in by_item}):
        _apply_dataset(store, backend, queue, dataset, by_item, report)
    return report


def _apply_dataset(
    store: LocalStore,
    backend: DatasetBackend,
    queue: str,
    dataset: str,
    by_item: dict[tuple[str, str], list[Decision]],
    report: ApplyReport,
) -> None:
    items = {i.id: i for i in backend.get_items(dataset)}
    changed = []
    done: list[Decision] = []
    for (ds, item_id), decisions in by_item.items():
        if ds != dataset:
            continue
        item = items.get(item_id)
        if item is None or item.status != "ACTIVE":
            report.problems.append(
                f"dataset {dataset!r} has no item {item_id!r} any more: {len(decisions)}"
                " verdict(s) on it not applied"
            )
            continue
        new, problems, applied = apply_decisions(item, decisions)
        report.problems.extend(problems)
        if applied:
            changed.append(new)
            done.extend(applied)
    if not changed:
        return
    upload = backend.upload_items(dataset, changed)
    version: Any = upload.version
    if upload.new_version:
        report.versions[dataset] = version
    for d in done:
        store.mark_review_applied(
            queue, d.candidate.key, d.verdict, d.reviewer, None if version is None else str(version)
        )
    report.applied.extend(done)
