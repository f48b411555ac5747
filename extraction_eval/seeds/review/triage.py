"""``gold triage``: a finished run's likely gold gaps to a review queue, most likely first.

A LangFuse-mode run's candidates become annotation-queue items on the items' traces (one open
item per trace, so a reviewer's ``gold_verdict`` names one candidate); a local run's go to a
review file (JSONL, one candidate a line, with empty ``verdict`` / ``reviewer`` / ``comment``
for a person to fill). Either way the store's ledger remembers what was sent, so re-running
triage adds nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from extraction_eval.analysis.stored import get_run, run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue, UsageError, one_line
from extraction_eval.evaluators.review import (
    KINDS,
    Candidate,
    CandidateKind,
    ItemView,
    JudgedPair,
    select_candidates,
)
from extraction_eval.types import TaxonomyTag

QUEUE_DESCRIPTION = (
    "extraction-eval gold review: is each object a gap in the gold? Answer with gold_verdict "
    "(add_to_gold, prediction_wrong, remove_from_gold, unsure); a comment says why."
)
COMMENT_PREFIX = "extraction-eval gold review: "


@dataclass
class TriageReport:
    """What triage did: candidates sent (best first), those already in the queue, and those
    held back (over ``--limit``, or their trace already has an open item)."""

    queue: str
    mode: str  # "langfuse" | "local"
    sent: list[Candidate] = field(default_factory=list)
    already: int = 0
    held_back_limit: int = 0
    held_back_trace: int = 0
    found: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    queue_created: bool = False
    file: Path | None = None


def _views(store: LocalStore, run: RunRecord) -> Iterator[ItemView]:
    """One ``ItemView`` per item of the run with an output (a failed item has nothing to
    review); rows stored without taxonomy are re-scored as the run scored them."""
    from extraction_eval.evaluators.gold_view import score_dataset_item

    gold = run_gold(store, run)
    scoring = run_scoring(run)
    judged = _judged_pairs(store, run)
    for result in store.iter_results(run.id):
        item = gold.get(result.item_id)
        if item is None or result.output is None:
            continue
        tags: Sequence[TaxonomyTag] | None = result.taxonomy
        if tags is None:
            scored = score_dataset_item(item, result.output, scoring)
            tags = [TaxonomyTag(**t.to_json()) for t in scored.taxonomy]  # type: ignore[arg-type]
        yield ItemView(
            dataset=run.dataset,
            item=item,
            output=result.output,
            taxonomy=tags,
            trace_id=result.trace_id,
            judged=judged.get(result.item_id, ()),
            evidence_mode=scoring.evidence,
        )


def _judged_pairs(store: LocalStore, run: RunRecord) -> dict[str, list[JudgedPair]]:
    """The judged matches kept with the run (its newest judging: ``--judge`` on run, compare,
    report or matrix) by item id: the pairs string matching said no to and a judge said yes.
    Stored JSON is read defensively: a malformed entry is left out."""
    blocks = store.run_judged(run.id)
    items = blocks[0].get("items") if blocks else None
    out: dict[str, list[JudgedPair]] = {}
    if not isinstance(items, dict):
        return out
    for item_id, matches in items.items():
        seen: set[tuple[str, int]] = set()
        for m in matches if isinstance(matches, list) else ():
            if not isinstance(m, dict) or not isinstance(m.get("pred"), int):
                continue
            kind: Literal["entity", "relationship"] = (
                "relationship" if m.get("kind") == "relationships" else "entity"
            )
            if (kind, m["pred"]) not in seen:  # entities and entities_typed: one object
                seen.add((kind, m["pred"]))
                out.setdefault(str(item_id), []).append(JudgedPair(kind, m["pred"], True))
    return out


def check_kinds(kinds: Sequence[str] | None) -> tuple[CandidateKind, ...]:
    """``--kinds`` as candidate kinds (all when not given); an unknown one is a usage error."""
    if not kinds:
        return KINDS
    out: list[CandidateKind] = []
    for k in (p.strip() for given in kinds for p in given.split(",")):
        if k not in KINDS:
            raise InvalidValue("kinds", f"{k!r} is not one of {', '.join(KINDS)}")
        out.append(k)  # type: ignore[arg-type]
    return tuple(out)


def triage(
    store: LocalStore,
    run_name: str,
    queue: str,
    *,
    kinds: Sequence[CandidateKind] = KINDS,
    limit: int | None = None,
    file: Path | None = None,
) -> TriageReport:
    """Pick the run's candidates and send those not yet in ``queue`` (see the module)."""
    if not queue.strip():
        raise InvalidValue("queue", "must not be empty")
    if limit is not None and limit < 1:
        raise InvalidValue("limit", "must be at least 1")
    run = get_run(store, run_name)
    if file is None and run.backend != "langfuse" and any(c in queue for c in "/\\\0"):
        raise InvalidValue(
            "queue", f"{queue!r} cannot name a review file: give {{file}}", mentions=("file",)
        )
    selection = select_candidates(_views(store, run), kinds=kinds)
    known = {row.key for row in store.review_candidates(queue)}
    fresh = [c for c in selection.candidates if c.key not in known]
    report = TriageReport(queue, "langfuse" if run.backend == "langfuse" else "local")
    report.found = selection.found
    report.already = len(selection.candidates) - len(fresh)
    if report.mode == "langfuse":
        _to_langfuse(store, run, queue, fresh, limit, report)
    else:
        keep = fresh if limit is None else fresh[:limit]
        report.held_back_limit = len(fresh) - len(keep)
        report.file = file or Path(f"{queue}.review.jsonl")
        _to_file(report.file, store.review_candidates(queue), keep)
        for c in keep:
            store.add_review_candidate(queue, c.to_json(), run=run.name)
        report.sent = keep
    return report


def _to_file(path: Path, rows: Sequence[Any], new: Sequence[Candidate]) -> None:
    """The review file: lines already there kept as they are (a reviewer's verdicts with
    them), the new candidates appended; written whole or not at all."""
    from extraction_eval.atomic import atomic_text

    lines: list[str] = []
    if path.exists():
        try:
            lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: cannot read the review file: {one_line(exc)}") from None
    with atomic_text(path) as fp:
        for line in lines:
            fp.write(line + "\n")
        for c in new:
            row = {**c.to_json(), "verdict": None, "reviewer": None, "comment": None}
            fp.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def _to_langfuse(
    store: LocalStore,
    run: RunRecord,
    queue: str,
    fresh: Sequence[Candidate],
    limit: int | None,
    report: TriageReport,
) -> None:
    from extraction_eval.backends.langfuse import close_client, connect
    from extraction_eval.backends.langfuse.queues import (
        add_comment,
        add_queue_item,
        ensure_queue,
        project_id,
        queue_items,
    )

    lf = connect()
    try:
        lf_queue, _, report.queue_created = ensure_queue(lf, queue, QUEUE_DESCRIPTION)
        queue_id = str(lf_queue.id)
        ours = {row.queue_item_id for row in store.review_candidates(queue)}
        queued_traces: set[str] = set()
        foreign = 0
        for i in queue_items(lf, queue_id):
            if i.object_type == "TRACE":
                queued_traces.add(i.object_id)
            foreign += i.id not in ours
        if foreign:
            report.notes.append(
                f"queue {queue!r} also holds {foreign:,} items this tool did not send:"
                " left as they are"
            )
        project = project_id(lf)
        for c in fresh:
            if limit is not None and len(report.sent) >= limit:
                report.held_back_limit += 1
                continue
            if c.trace_id is None:
                report.problems.append(
                    f"item {c.item_id!r}: no trace recorded for it in run {run.name!r};"
                    f" {c.question!r} not queued"
                )
                continue
            if c.trace_id in queued_traces:
                report.held_back_trace += 1  # one item per trace: its verdict names one object
                continue
            try:
                item_id = add_queue_item(lf, queue_id, c.trace_id, "TRACE")
            except Exception as exc:  # one line per candidate; the others go on
                report.problems.append(f"item {c.item_id!r}: not queued: {one_line(exc)}")
                continue
            # recorded at once: a queue item the ledger does not know could never be applied
            store.add_review_candidate(queue, c.to_json(), run=run.name, queue_item_id=item_id)
            queued_traces.add(c.trace_id)
            report.sent.append(c)
            try:
                add_comment(lf, project, "TRACE", c.trace_id, COMMENT_PREFIX + c.question)
            except Exception as exc:
                report.problems.append(
                    f"item {c.item_id!r}: queued, but its question could not be added as a"
                    f" comment ({one_line(exc)}): {c.question}"
                )
    finally:
        close_client(lf)


def queue_state(store: LocalStore, queue: str, dataset: str) -> list[tuple[Candidate, str]]:
    """The candidates sent to ``queue`` for ``dataset``, each with what became of it."""
    out = []
    for row in store.review_candidates(queue):
        if row.dataset != dataset:
            continue
        state = (
            "awaiting a verdict"
            if row.applied_verdict is None
            else f"{row.applied_verdict} by {row.applied_by or 'a reviewer'}"
            f" (version {row.applied_version})"
        )
        out.append((Candidate.from_json(row.candidate), state))
    return out
