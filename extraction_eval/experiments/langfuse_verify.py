"""LangFuse mode's read-back: after a run, check that LangFuse has every trace and score of
it, re-post any score it lacks, and say in one line what is verified.

Why it exists: the SDK only logs export failures, and its score thread reports a batch that
timed out as "Scores will be dropped" although a slow server often stored it. Our filter
(``ScoreDeliveryLog``) takes those lines out of the log and counts them; the read-back then
says what really is missing, re-posts those scores (deterministic score ids: a second copy
overwrites the first, so re-posting is idempotent) and reports what it repaired.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from extraction_eval.backends.langfuse import (
    DEFAULT_VERIFY_TIMEOUT_S,
    VERIFY_TIMEOUT_ENV,
    VerifyReport,
    item_score_id,
    missing_summary,
    post_score,
    verify_run,
    verify_timeout_s,
)
from extraction_eval.errors import BackendError
from extraction_eval.types import Score

if TYPE_CHECKING:
    from langfuse import Langfuse

    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments.runner import RunOutcome

__all__ = [
    "DEFAULT_VERIFY_TIMEOUT_S",
    "VERIFY_TIMEOUT_ENV",
    "Repair",
    "ScoreDeliveryLog",
    "VerificationError",
    "missing_summary",
    "score_delivery_log",
    "verified_line",
    "verify_run",
    "verify_timeout_s",
]

log = logging.getLogger(__name__)


class VerificationError(BackendError):
    """The run finished and the local mirror has every result, but LangFuse is missing some
    traces or scores after the wait (and after re-posting the scores). ``outcome`` is the
    finished run (print its summary), ``report`` says what is missing."""

    def __init__(self, message: str, *, outcome: RunOutcome, report: VerifyReport) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.report = report


class ScoreDeliveryLog(logging.Filter):
    """Takes the SDK's score-delivery error lines out of the ``langfuse`` log and counts them.

    "Failed to send N scores ... Scores will be dropped" is logged for a batch whose request
    timed out, and a slow server has often stored it all the same; the read-back checks and
    repairs, and our own line says what is true. Other SDK lines pass through."""

    _MARKERS = ("Scores will be dropped", "Rejected scores are not retried")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.unconfirmed = 0
        self.last_error: str | None = None
        self.pass_level = logging.NOTSET  # other SDK lines below this stay quiet

    def install(self, logger: logging.Logger) -> None:
        """Filter ``logger`` (the SDK's), seeing its score errors even where the CLI turned
        it down to CRITICAL: its other lines keep the level they had."""
        level = logger.getEffectiveLevel()
        if self not in logger.filters:
            self.pass_level = level
            logger.addFilter(self)
        elif level > logging.ERROR:  # turned down again since (another CLI start)
            self.pass_level = level
        if level > logging.ERROR:
            logger.setLevel(logging.ERROR)

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if not any(marker in message for marker in self._MARKERS):
            return record.levelno >= self.pass_level
        args = record.args if isinstance(record.args, tuple) else ()
        count = 0
        if "Rejected" in message and len(args) >= 2 and isinstance(args[1], int):
            count = args[1]  # accepted, rejected, batch size, errors
        elif args and isinstance(args[0], int):
            count = args[0]  # batch size, error
        with self._lock:
            self.unconfirmed += count
            self.last_error = str(args[-1])[:200] if args else None
        return False

    def add(self, count: int, error: str | None) -> None:
        """Count ``count`` scores a batch of ours could not confirm (a 207's rejections, a
        score the SDK refused when it took a failed batch)."""
        with self._lock:
            self.unconfirmed += count
            self.last_error = error or self.last_error

    def take(self) -> tuple[int, str | None]:
        """Scores the SDK could not confirm since the last call, and its last error."""
        with self._lock:
            out = (self.unconfirmed, self.last_error)
            self.unconfirmed, self.last_error = 0, None
        return out


score_delivery_log = ScoreDeliveryLog()


@dataclass(frozen=True)
class Repair:
    """Scores the read-back found missing and posted again (same ids), by kind."""

    item_scores: int = 0
    run_scores: int = 0

    @property
    def total(self) -> int:
        return self.item_scores + self.run_scores


def repost_missing(
    lf: Langfuse,
    report: VerifyReport,
    *,
    store: LocalStore,
    run_id: int,
    observations: Mapping[str, str],
    experiment_id: str | None,
    run_scores: Sequence[Score],
    config_ids: Mapping[str, str],
) -> Repair:
    """Post again, with the ids they were first sent with, the scores ``report`` lists as
    missing: item scores from the local mirror (on the trace and its task observation),
    run scores from the finished summary. LangFuse upserts by id, so a score that was only
    slow to arrive is not doubled."""
    from extraction_eval.backends.langfuse import run_score_id

    wanted = set(report.missing_scores)
    traces = {t for t, _ in wanted}
    item_scores = 0
    if wanted:
        for result in store.results(run_id):
            if result.trace_id not in traces:
                continue
            for score in result.scores:
                if (result.trace_id, score.name) in wanted:
                    post_score(
                        lf,
                        score,
                        trace_id=result.trace_id,
                        observation_id=observations.get(result.trace_id),
                        score_id=item_score_id(result.trace_id, score),
                        config_id=config_ids.get(score.name),
                    )
                    item_scores += 1
    run_posted = 0
    if experiment_id and report.missing_run_scores:
        missing_run = set(report.missing_run_scores)
        for score in run_scores:
            if score.name in missing_run:
                post_score(
                    lf,
                    score,
                    dataset_run_id=experiment_id,
                    score_id=run_score_id(experiment_id, score.name),
                )
                run_posted += 1
    lf.flush()
    return Repair(item_scores=item_scores, run_scores=run_posted)


def verified_line(
    report: VerifyReport,
    *,
    run_scores: int,
    repair: Repair,
    unconfirmed: tuple[int, str | None],
) -> str:
    """The run's last word on LangFuse: what is verified there, what was repaired, and
    whether the SDK's delivery complaints turned out true."""
    line = (
        f"verified in LangFuse: {report.expected_traces} traces,"
        f" {report.expected_scores} item scores, {run_scores} run scores"
        f" ({report.waited_s:.1f}s)"
    )
    count, error = unconfirmed
    if count:
        line += f"; the SDK could not confirm {count} scores{f' ({error})' if error else ''}"
    if repair.total:
        line += (
            f"; re-posted {repair.total} scores LangFuse did not show after the wait"
            " (same ids: never doubled), all now there"
        )
    elif count:
        line += ", all of them had arrived"
    return line


def verify_in_langfuse(
    lf: Langfuse,
    *,
    outcome: RunOutcome,
    store: LocalStore,
    traces: Mapping[str, Collection[str]],
    untraced: Sequence[str],
    observations: Mapping[str, str],
    experiment_id: str | None,
    since: datetime,
    timeout_s: float,
    config_ids: Mapping[str, str],
) -> str:
    """Read the run back, re-post what is missing, read again; the verified line, or
    ``VerificationError`` naming what LangFuse still lacks."""
    sharded = outcome.run.config.get("shard") is not None  # a shard posts no run scores
    run_scores = [] if sharded or not experiment_id else list(outcome.summary.run_scores)
    names = [s.name for s in run_scores]
    started = time.monotonic()
    report = verify_run(
        lf,
        traces=traces,
        experiment_id=experiment_id,
        run_score_names=names,
        since=since,
        timeout_s=timeout_s,
    )
    repair = Repair()
    if report.missing_scores or report.missing_run_scores:
        repair = repost_missing(
            lf,
            report,
            store=store,
            run_id=outcome.run.id,
            observations=observations,
            experiment_id=experiment_id,
            run_scores=run_scores,
            config_ids=config_ids,
        )
        if repair.total:
            log.info("re-posted %d scores LangFuse did not show; reading back", repair.total)
            lacking: dict[str, list[str]] = {}
            for trace_id, name in report.missing_scores:
                lacking.setdefault(trace_id, []).append(name)
            again = verify_run(
                lf,
                traces=lacking,
                experiment_id=experiment_id,
                run_score_names=list(report.missing_run_scores),
                since=since,
                timeout_s=max(timeout_s, 5.0),
            )
            report = VerifyReport(
                expected_traces=report.expected_traces,
                expected_scores=report.expected_scores,
                missing_traces=report.missing_traces,
                missing_scores=again.missing_scores,
                missing_run_scores=again.missing_run_scores,
                waited_s=round(time.monotonic() - started, 3),
                errors=(*report.errors, *again.errors)[-5:],
            )
    unconfirmed = score_delivery_log.take()
    if untraced or not report.ok:
        run = outcome.run
        missing = missing_summary(report, run_scores=len(names), untraced=len(untraced))
        repaired = f"; re-posted {repair.total} scores" if repair.total else ""
        raise VerificationError(
            f"LangFuse is missing data from run {run.name!r}"
            f" (experiment {experiment_id}): {missing}{repaired};"
            f" every result is in the local store (runs show {run.name})",
            outcome=outcome,
            report=report,
        )
    return verified_line(report, run_scores=len(names), repair=repair, unconfirmed=unconfirmed)


def unverified_line(unconfirmed: tuple[int, str | None]) -> str:
    """The last word when the read-back was skipped."""
    count, error = unconfirmed
    line = "not verified in LangFuse (read-back off)"
    if count:
        line += f"; the SDK could not confirm {count} scores{f' ({error})' if error else ''}"
    return line
