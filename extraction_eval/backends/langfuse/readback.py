"""``read_back``: after a run, poll LangFuse until every trace and score arrived (bounded);
``verify_run`` for one run (one deadline for every trace and run score), ``missing_summary``
for the one-line message, ``verify_timeout_s`` for how long to wait."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from extraction_eval.backends.langfuse.errors import api_errors
from extraction_eval.backends.langfuse.reads import ReadLimits, api_pages
from extraction_eval.errors import ConfigError, ExtractionEvalError

if TYPE_CHECKING:
    from langfuse import Langfuse


@dataclass(frozen=True)
class VerifyReport:
    """What arrived in LangFuse after a run, and what did not (within the wait)."""

    expected_traces: int
    expected_scores: int
    missing_traces: tuple[str, ...] = ()
    missing_scores: tuple[tuple[str, str], ...] = ()  # (trace_id, score name)
    missing_run_scores: tuple[str, ...] = ()
    waited_s: float = 0.0
    errors: tuple[str, ...] = field(default_factory=tuple)  # read failures seen while polling

    @property
    def ok(self) -> bool:
        return not (self.missing_traces or self.missing_scores or self.missing_run_scores)

    def __str__(self) -> str:
        return "; ".join(self.lines(limit=3))

    def lines(self, limit: int = 10) -> list[str]:
        """One line per kind of gap (first ``limit`` ids each), for the CLI."""
        if self.ok:
            return [
                f"verified in LangFuse: {self.expected_traces} traces,"
                f" {self.expected_scores} scores ({self.waited_s:.1f}s)"
            ]
        out: list[str] = []
        if self.missing_traces:
            shown = ", ".join(self.missing_traces[:limit])
            more = len(self.missing_traces) - limit
            out.append(
                f"missing in LangFuse: {len(self.missing_traces)} of {self.expected_traces}"
                f" traces ({shown}{f', +{more} more' if more > 0 else ''})"
            )
        if self.missing_scores:
            shown = ", ".join(f"{n}@{t}" for t, n in self.missing_scores[:limit])
            more = len(self.missing_scores) - limit
            out.append(
                f"missing in LangFuse: {len(self.missing_scores)} of {self.expected_scores}"
                f" item scores ({shown}{f', +{more} more' if more > 0 else ''})"
            )
        if self.missing_run_scores:
            shown = ", ".join(self.missing_run_scores[:limit])
            more = len(self.missing_run_scores) - limit
            out.append(
                f"missing in LangFuse: {len(self.missing_run_scores)} run scores"
                f" ({shown}{f', +{more} more' if more > 0 else ''})"
            )
        if self.errors:
            out.append(f"last read error: {self.errors[-1]}")
        return out


def _score_trace_id(score: Mapping[str, Any]) -> str | None:
    subject = score.get("subject") or {}
    kind = subject.get("kind")
    if kind == "trace":
        return cast("str | None", subject.get("id"))
    if kind == "observation":
        return cast("str | None", subject.get("traceId"))
    return None


def _score_pages(lf: Langfuse, **params: Any) -> Iterator[list[dict[str, Any]]]:
    """Pages of ``GET /api/public/v3/scores``."""
    return api_pages(lf, "v3/scores", retry=False, **params)


def _chunks(values: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def _arrived_traces(lf: Langfuse, wanted: set[str], since: datetime | None) -> set[str]:
    found: set[str] = set()
    if since is not None:  # one window query, paged, instead of one request per trace
        cursor: str | None = None
        seen: set[str] = set()  # a cursor sent twice would page forever
        for _ in range(ReadLimits.from_env().max_pages):
            page = lf.api.observations.get_many(
                is_root_observation=True,
                from_start_time=since,
                fields="core",
                limit=1000,
                cursor=cursor,
            )
            found.update(o.trace_id for o in page.data if o.trace_id in wanted)
            cursor = page.meta.cursor
            if not cursor or found >= wanted or cursor in seen:
                return found
            seen.add(cursor)
        return found
    for trace_id in sorted(wanted):
        page = lf.api.observations.get_many(trace_id=trace_id, fields="core", limit=1)
        if page.data:
            found.add(trace_id)
    return found


def _arrived_scores(
    lf: Langfuse,
    wanted: set[tuple[str, str]],
    since: datetime | None,
) -> set[tuple[str, str]]:
    """Which (trace id, score name) pairs of ``wanted`` LangFuse has.

    With ``since``: one windowed query (scores created since the run started, our names
    only), paged, instead of one request per handful of traces; it stops once everything
    wanted was seen. Without: the traces' scores, 20 traces per request."""
    names = sorted({n for _, n in wanted})
    found: set[tuple[str, str]] = set()

    def take(pages: Iterator[list[dict[str, Any]]]) -> bool:
        for page in pages:
            for score in page:
                trace_id = _score_trace_id(score)
                key = (trace_id or "", str(score.get("name")))
                if key in wanted:
                    found.add(key)
            if found >= wanted:
                return True
        return False

    if since is not None:
        stamp = since.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        take(
            _score_pages(lf, fromTimestamp=stamp, name=",".join(names), fields="subject", limit=100)
        )
        return found
    for chunk in _chunks(sorted({t for t, _ in wanted}), 20):
        take(
            _score_pages(
                lf, traceId=",".join(chunk), name=",".join(names), fields="subject", limit=100
            )
        )
    return found


_SCORE_LIMIT = 50  # scores per experiment item the server returns at most
# The walk over a large run's items is split into start-time windows walked side by side
# (cursor pages are sequential within a window): at most this many, and one per this many
# items wanted, so a small run still takes one request.
_MAX_WINDOWS = 4
_ITEMS_PER_WINDOW = 400
_WINDOW_OVERLAP = timedelta(milliseconds=1)  # whatever the API's bounds: no item between two


def _stamp(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def start_windows(
    since: datetime, until: datetime, wanted: int
) -> list[tuple[datetime, datetime | None]]:
    """``[since, until)`` and everything after, cut into up to ``_MAX_WINDOWS`` start-time
    windows (``(from, to)``, the last one open) for about ``_ITEMS_PER_WINDOW`` items each.
    Neighbours overlap by a millisecond, so an item on a boundary is in one of them whether
    the server's bounds are inclusive or not (the walk keeps sets: a second sighting is
    harmless)."""
    count = min(_MAX_WINDOWS, max(1, -(-wanted // _ITEMS_PER_WINDOW)))
    if count == 1 or until <= since:
        return [(since, None)]
    width = (until - since) / count
    edges = [since + width * i for i in range(count)]
    return [
        (edge, edges[i + 1] + _WINDOW_OVERLAP if i + 1 < count else None)
        for i, edge in enumerate(edges)
    ]


@dataclass
class _Walk:
    traces: set[str] = field(default_factory=set)
    scores: set[tuple[str, str]] = field(default_factory=set)
    full: list[str] = field(default_factory=list)  # items whose scores may have been cut


def _walk_window(
    lf: Langfuse,
    experiment_id: str,
    window: tuple[datetime, datetime | None],
    wanted: set[str],
    scores: set[tuple[str, str]],
) -> _Walk:
    found = _Walk()
    pages = api_pages(
        lf,
        "experiment-items",
        retry=False,
        experimentId=experiment_id,
        fromStartTime=_stamp(window[0]),
        toStartTime=_stamp(window[1]) if window[1] is not None else None,
        fields="core,scores",
        scoreLimit=_SCORE_LIMIT,
        limit=100,
    )
    for page in pages:
        for row in page:
            trace_id = str(row.get("traceId"))
            if trace_id not in wanted:
                continue
            found.traces.add(trace_id)
            item_scores = list(row.get("scores") or [])
            if len(item_scores) >= _SCORE_LIMIT:
                found.full.append(trace_id)
            for score in item_scores:
                key = (_score_trace_id(score) or trace_id, str(score.get("name")))
                if key in scores:
                    found.scores.add(key)
    return found


def _arrived_in_experiment(
    lf: Langfuse,
    experiment_id: str,
    since: datetime,
    traces: set[str],
    scores: set[tuple[str, str]],
) -> tuple[set[str], set[tuple[str, str]]]:
    """Traces and scores found in a paged walk over the experiment's items (with their
    scores): a request per 100 items, instead of per page of 100 scores; a large run's walk
    is split into start-time windows (``start_windows``) walked side by side, bounded. An
    item whose scores may have been cut at the server's limit has them read from v3 scores."""
    wanted = traces | {t for t, _ in scores}
    since = since.astimezone(UTC)  # a naive time is local, as before the windows
    windows = start_windows(since, datetime.now(UTC), len(wanted))
    if len(windows) == 1:
        walks = [_walk_window(lf, experiment_id, windows[0], wanted, scores)]
    else:
        with ThreadPoolExecutor(len(windows), thread_name_prefix="read-back") as pool:
            futures = [
                pool.submit(_walk_window, lf, experiment_id, w, wanted, scores) for w in windows
            ]
            walks = [f.result() for f in futures]  # the first error raises, as a walk's would
    found_traces = set().union(*(w.traces for w in walks))
    found_scores: set[tuple[str, str]] = set().union(*(w.scores for w in walks))
    cut = {t for w in walks for t in w.full}
    if cut:
        rest = {(t, n) for t, n in scores if t in cut} - found_scores
        if rest:
            found_scores |= _arrived_scores(lf, rest, None)
    return found_traces, found_scores


def _arrived_run_scores(lf: Langfuse, experiment_id: str, names: Sequence[str]) -> set[str]:
    pages = _score_pages(lf, experimentId=experiment_id, name=",".join(names), limit=100)
    return {str(score.get("name")) for page in pages for score in page}


def read_back(
    lf: Langfuse,
    *,
    trace_ids: Sequence[str],
    score_names: Sequence[str] = (),
    experiment_id: str | None = None,
    run_score_names: Sequence[str] = (),
    since: datetime | None = None,
    timeout_s: float = 60.0,
    poll_s: float = 2.0,
) -> VerifyReport:
    """``read_back_run`` with the same ``score_names`` on every trace."""
    return read_back_run(
        lf,
        traces={t: score_names for t in trace_ids},
        experiment_id=experiment_id,
        run_score_names=run_score_names,
        since=since,
        timeout_s=timeout_s,
        poll_s=poll_s,
    )


def read_back_run(
    lf: Langfuse,
    *,
    traces: Mapping[str, Collection[str]],
    experiment_id: str | None = None,
    run_score_names: Sequence[str] = (),
    since: datetime | None = None,
    timeout_s: float = 60.0,
    poll_s: float = 2.0,
    linked: bool = False,
) -> VerifyReport:
    """Poll LangFuse (bounded by ``timeout_s``) until every trace (observations v2) and each
    trace's own score names (``traces``: trace id -> names; scores v3) arrived, plus
    ``run_score_names`` on the experiment; report what is still missing. Call after
    ``lf.flush()``.

    ``since`` (the run's start) makes each poll a few paged window queries (root observations
    started since, scores created since) instead of requests per trace; with ``linked`` (the
    traces are the experiment's items) one walk over the experiment's items and their scores,
    a request per 100 items. Read failures are kept in ``errors`` and polling continues.
    """
    started = time.monotonic()
    deadline = started + max(timeout_s, 0.0)
    missing_traces = set(traces)
    missing_scores = {(t, n) for t, names in traces.items() for n in set(names)}
    expected_scores = len(missing_scores)
    missing_run = set(run_score_names) if experiment_id else set()
    errors: list[str] = []
    while True:
        try:
            with api_errors(lf, "reading back traces and scores"):
                if (
                    linked
                    and experiment_id
                    and since is not None
                    and (missing_traces or missing_scores)
                ):
                    traces_in, scores_in = _arrived_in_experiment(
                        lf, experiment_id, since, missing_traces, missing_scores
                    )
                    missing_traces -= traces_in
                    missing_scores -= scores_in
                else:
                    if missing_traces:
                        missing_traces -= _arrived_traces(lf, missing_traces, since)
                    if missing_scores:
                        missing_scores -= _arrived_scores(lf, missing_scores, since)
                if missing_run and experiment_id:
                    missing_run -= _arrived_run_scores(lf, experiment_id, sorted(missing_run))
        except ExtractionEvalError as exc:
            errors.append(str(exc))
        done = not (missing_traces or missing_scores or missing_run)
        if done or time.monotonic() + poll_s > deadline:
            break
        time.sleep(poll_s)
    return VerifyReport(
        expected_traces=len(traces),
        expected_scores=expected_scores,
        missing_traces=tuple(sorted(missing_traces)),
        missing_scores=tuple(sorted(missing_scores)),
        missing_run_scores=tuple(sorted(missing_run)),
        waited_s=round(time.monotonic() - started, 3),
        errors=tuple(errors[-5:]),
    )


VERIFY_TIMEOUT_ENV = "EXTRACTION_EVAL_VERIFY_TIMEOUT"
DEFAULT_VERIFY_TIMEOUT_S = 60.0


def verify_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``EXTRACTION_EVAL_VERIFY_TIMEOUT`` (seconds, >= 0; default 60): how long the read-back
    waits for LangFuse to make what the run sent readable (ingestion is asynchronous)."""
    env = os.environ if env is None else env
    raw = env.get(VERIFY_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_VERIFY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{VERIFY_TIMEOUT_ENV} must be a number of seconds >= 0, got {raw!r}")
    return value


def _poll_interval(timeout_s: float) -> float:
    """Short enough that a short timeout still polls several times, long enough that a
    60 s wait on a real server stays well under the API rate limits."""
    return min(2.0, max(0.05, timeout_s / 30))


def missing_summary(report: VerifyReport, *, run_scores: int, untraced: int = 0) -> str:
    """What ``report`` found missing, in one bounded line (counts and a first example)."""
    parts: list[str] = []
    examples: list[str] = []
    if untraced:
        parts.append(f"{untraced} items without a trace")
    if report.missing_traces:
        parts.append(f"{len(report.missing_traces)} of {report.expected_traces} traces")
        examples.append(f"trace {report.missing_traces[0]}")
    if report.missing_scores:
        parts.append(f"{len(report.missing_scores)} of {report.expected_scores} item scores")
        trace_id, name = report.missing_scores[0]
        examples.append(f"{name} on trace {trace_id}")
    if report.missing_run_scores:
        parts.append(f"{len(report.missing_run_scores)} of {run_scores} run scores")
        examples.append(f"run score {report.missing_run_scores[0]}")
    text = "missing " + ", ".join(parts) if parts else "nothing missing"
    if examples:
        text += f" (first: {'; '.join(examples)})"
    if report.errors:
        text += f"; last read error: {report.errors[-1]}"
    return text


def verify_run(
    lf: Langfuse,
    *,
    traces: Mapping[str, Collection[str]],
    experiment_id: str | None,
    run_score_names: Sequence[str],
    since: datetime | None,
    timeout_s: float,
) -> VerifyReport:
    """The read-back for one run: each trace (``traces``: trace id -> its result's score
    names) must carry the scores its own result has (they differ between items, e.g.
    ``zero_fp_pass`` only where the gold is empty), plus the run-level scores on the
    experiment; one deadline, and one walk over the experiment's items per poll."""
    return read_back_run(
        lf,
        traces=traces,
        experiment_id=experiment_id,
        run_score_names=run_score_names,
        since=since,
        timeout_s=timeout_s,
        poll_s=_poll_interval(timeout_s),
        linked=True,
    )
