"""LangFuse mode: the same ``ItemRunner`` driven by the SDK's ``run_experiment``.

What the SDK does, it does: it links every item's trace to its dataset item and to the
experiment (OTel span attributes), derives the experiment id from the run name, runs items
concurrently, posts item scores returned by evaluators, and builds the experiment URL.

What it does not do, we add:

- **Failed items.** The SDK drops an item whose task raises from its result and runs no
  evaluator on it. Our task records every result in the local mirror *first*, posts a failed
  item's scores (``extraction_error`` = 1 with the message as comment) on its trace itself,
  then re-raises so the SDK marks the item's run and task observations level ERROR.
- **Run-level scores over every item** (micro P/R/F1, CIs, ``error_count``, ...) from the
  mirror, on the experiment (``dataset_run_id`` = experiment id), with deterministic score ids
  so a resumed run overwrites them instead of adding a second set.
- **The local mirror** (``LocalStore``): ``runs show``, ``compare``, ``--resume`` and
  ``--retry-errors`` work as in local mode; a resume passes the stored experiment id.
- **Read-back.** The SDK only logs export failures; after the run we poll LangFuse (bounded by
  ``EXTRACTION_EVAL_VERIFY_TIMEOUT`` seconds) for every trace and score of this invocation and
  raise ``VerificationError`` naming what is missing (``--no-verify`` skips it).

Successful items hand their scores to the SDK through an item evaluator: the task parks its
result under the item's trace id and the evaluator (same trace, same asyncio task) takes it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from extraction_eval import __version__
from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    LangfuseTracer,
    RunDataset,
    VerifyReport,
    as_evaluation,
    close_client,
    connect,
    fetch_prompt,
    post_score,
    read_back,
    run_score_id,
)
from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import BackendError, ConfigError
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import (
    PreparedRun,
    ProgressHook,
    _NoProgress,
    discard_if_empty,
    prepare,
)
from extraction_eval.experiments.runner import RunOutcome, finalize
from extraction_eval.prompts.template import PromptTemplate, load_local_prompt
from extraction_eval.types import DatasetItem, ItemResult

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = [
    "DEFAULT_VERIFY_TIMEOUT_S",
    "VERIFY_TIMEOUT_ENV",
    "ItemFailed",
    "VerificationError",
    "experiment_metadata",
    "missing_summary",
    "run_langfuse",
    "verify_run",
    "verify_timeout_s",
]

log = logging.getLogger(__name__)

VERIFY_TIMEOUT_ENV = "EXTRACTION_EVAL_VERIFY_TIMEOUT"
DEFAULT_VERIFY_TIMEOUT_S = 60.0
# Span attribute the SDK propagates onto the task span (and everything under it).
_EXPERIMENT_ID_ATTR = "langfuse.experiment.id"
_PROBE_TRACE_ID = "0" * 32


class ItemFailed(Exception):
    """Raised from the SDK task for a failed item so LangFuse marks its trace ERROR.

    The item's row and scores are already recorded; the SDK only logs this and moves on."""


class VerificationError(BackendError):
    """The run finished and the local mirror has every result, but LangFuse is missing some
    traces or scores after the wait. ``outcome`` is the finished run (print its summary),
    ``report`` says what is missing."""

    def __init__(self, message: str, *, outcome: RunOutcome, report: VerifyReport) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.report = report


class _DropHandledItemFailures(logging.Filter):
    """The SDK logs every raising task as ERROR "Item N failed: ..."; ours are recorded,
    scored and summarised already, so that line is noise (real task crashes still show)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(arg, ItemFailed) for arg in args)


_item_failure_filter = _DropHandledItemFailures()


def _install_log_filter() -> None:
    logger = logging.getLogger("langfuse")
    if _item_failure_filter not in logger.filters:
        logger.addFilter(_item_failure_filter)


# --- settings -------------------------------------------------------------------------------


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


# --- metadata -------------------------------------------------------------------------------


def experiment_metadata(record: Mapping[str, Any]) -> dict[str, str]:
    """The run's parameters as LangFuse experiment metadata (the SDK wants string values)."""
    prompt = record.get("prompt") or {}
    packages = record.get("packages") or {}
    pricing = record.get("pricing") or {}
    meta = {
        "provider": record.get("provider"),
        "model": record.get("model"),
        "temperature": record.get("temperature"),
        "prompt_name": prompt.get("name"),
        "prompt_label": prompt.get("label"),
        "prompt_version": prompt.get("version"),
        "prompt_source": prompt.get("source"),
        "prompt_hash": record.get("prompt_hash"),
        "pipeline": record.get("pipeline_ref"),
        "concurrency": record.get("concurrency"),
        "dataset": record.get("dataset"),
        "extraction_eval_version": __version__,
        "langfuse_sdk_version": packages.get("langfuse"),
        "price_source": pricing.get("source"),
        "price_version": pricing.get("version"),
        "price_model": pricing.get("model_id") or pricing.get("model_ref"),
        "price_input_per_mtok": pricing.get("input_per_mtok"),
        "price_output_per_mtok": pricing.get("output_per_mtok"),
    }
    return {k: str(v) for k, v in meta.items() if v is not None}


def _current_experiment_id() -> str | None:
    """The experiment id the SDK put on the current (task) span, if any."""
    from opentelemetry import trace as otel_trace

    attributes = getattr(otel_trace.get_current_span(), "attributes", None) or {}
    value = attributes.get(_EXPERIMENT_ID_ATTR)
    return value if isinstance(value, str) and value else None


def _trace_url_prefix(lf: Langfuse) -> str | None:
    """The SDK's trace URL (``get_trace_url``) minus the trace id: one project lookup per run
    (the SDK caches it; ``run_experiment`` needs it too) instead of one call per item."""
    try:
        url = lf.get_trace_url(trace_id=_PROBE_TRACE_ID)
    except Exception as exc:  # a URL is a convenience: never fail a run for it
        log.warning("no LangFuse trace URLs for this run: %s", exc)
        return None
    if not url or not url.endswith(_PROBE_TRACE_ID):
        return None
    return url[: -len(_PROBE_TRACE_ID)]


# --- the run --------------------------------------------------------------------------------


def run_langfuse(
    config: RunConfig,
    *,
    store: LocalStore,
    progress: ProgressHook | None = None,
) -> RunOutcome:
    """Run ``config`` as a LangFuse experiment (blocking); see the module docstring.

    Raises before anything is spent: ``ConfigError`` (keys missing, bad settings),
    ``BackendError`` (keys refused, server unreachable), ``NotFoundError`` (no such dataset).
    After the run: ``VerificationError`` when LangFuse lacks data (unless ``verify=False``).
    """
    timeout_s = verify_timeout_s() if config.verify else 0.0
    _install_log_filter()
    lf = connect()  # checks the keys and the server before anything is spent
    try:
        return _LangfuseRun(lf, config, store, progress or _NoProgress(), timeout_s).run()
    finally:
        close_client(lf)  # delivers queued spans and scores, also on Ctrl-C


class _LangfuseRun:
    def __init__(
        self,
        lf: Langfuse,
        config: RunConfig,
        store: LocalStore,
        progress: ProgressHook,
        verify_timeout: float,
    ) -> None:
        self.lf = lf
        self.config = config
        self.store = store
        self.progress = progress
        self.verify_timeout = verify_timeout
        # this invocation: item id -> result (with its trace id) as recorded in the mirror
        self.recorded: dict[str, ItemResult] = {}
        self.mirror_errors: list[str] = []
        self.experiment_id: str | None = None
        self._parked: dict[str, ItemResult] = {}  # trace id -> result, task -> evaluator
        self._sized_loop: asyncio.AbstractEventLoop | None = None
        self._trace_url_prefix: str | None = None

    # before spending -------------------------------------------------------------------------

    def _load_dataset(self) -> RunDataset:
        return LangfuseDatasetBackend(self.lf).load_for_run(
            self.config.dataset, version=self.config.dataset_version
        )

    def _prompt(self, warnings: list[str]) -> PromptTemplate:
        pipeline = self.config.pipeline
        if pipeline.prompt_label is None and pipeline.prompt_version is None:
            return load_local_prompt()
        return fetch_prompt(
            self.lf,
            pipeline.prompt_name,
            label=pipeline.prompt_label,
            version=pipeline.prompt_version,
            warnings=warnings,
        )

    # the SDK's callbacks ---------------------------------------------------------------------

    def _make_task(self, prep: PreparedRun, by_raw_id: Mapping[str, DatasetItem]) -> Any:
        lf, store, run_id = self.lf, self.store, prep.run.id

        async def task(*, item: Any, **_: Any) -> Any:
            self._size_thread_pool()
            ours = by_raw_id[str(item.id)]
            result = await prep.runner.run_item(ours)
            trace_id = lf.get_current_trace_id()
            observation_id = lf.get_current_observation_id()  # the SDK's task span
            if self.experiment_id is None:
                self.experiment_id = _current_experiment_id()
                if self.experiment_id and self.experiment_id != prep.run.experiment_id:
                    # known from the first finished item: an interrupted run keeps it too
                    store.update_run(run_id, experiment_id=self.experiment_id)
            prefix = self._trace_url_prefix
            trace_url = f"{prefix}{trace_id}" if prefix and trace_id else None
            result = result.model_copy(update={"trace_id": trace_id, "trace_url": trace_url})
            try:  # the mirror first: never lose an item (in a thread: SQLite blocks)
                await asyncio.shield(asyncio.to_thread(store.record_result, run_id, result))
            except asyncio.CancelledError:
                # Ctrl-C during the write: the row still lands (the loop waits for its
                # thread) and no evaluator will run, so score the trace here to match it.
                for score in result.scores:
                    post_score(lf, score, trace_id=trace_id, observation_id=observation_id)
                raise
            except Exception as exc:  # reported after the run; LangFuse still gets the item
                self.mirror_errors.append(f"{ours.id}: {exc}")
            self.recorded[ours.id] = result
            self.progress.advance(result)
            if not result.ok:
                # No evaluator runs for a failed task: score its trace here, then raise so
                # the SDK marks the run and task observations ERROR (LangFuse's error count).
                for score in result.scores:
                    post_score(lf, score, trace_id=trace_id, observation_id=observation_id)
                raise ItemFailed(result.error or "extraction failed")
            if trace_id:
                self._parked[trace_id] = result
            return result.output.model_dump(mode="json") if result.output else None

        return task

    def _size_thread_pool(self) -> None:
        """Give the SDK's event loop a thread pool as wide as ``--concurrency``.

        Sync pipelines run in ``asyncio.to_thread``, i.e. the loop's default executor, which
        has min(32, CPUs + 4) workers: on a 2-CPU machine at most 6 sync calls would overlap
        whatever ``--concurrency`` says. The loop is created inside ``run_experiment``, so
        this runs in the first task (before any of our thread work) and once per loop.
        """
        loop = asyncio.get_running_loop()
        if self._sized_loop is loop:
            return
        self._sized_loop = loop
        workers = self.config.concurrency + 4  # + the mirror writes and the SDK's own calls
        if workers > min(32, (os.cpu_count() or 1) + 4):
            loop.set_default_executor(
                ThreadPoolExecutor(max_workers=workers, thread_name_prefix="extraction-eval")
            )

    def _make_evaluator(self) -> Any:
        lf, parked = self.lf, self._parked

        def extraction_eval_scores(**_: Any) -> list[Any]:
            """Item evaluator: the scores of the result its task parked under this trace."""
            trace_id = lf.get_current_trace_id()
            result = parked.pop(trace_id, None) if trace_id else None
            return [as_evaluation(s) for s in result.scores] if result else []

        return extraction_eval_scores

    # the run ---------------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        config = self.config
        dataset = self._load_dataset()
        warnings: list[str] = []
        prompt = self._prompt(warnings)
        prep = prepare(
            config,
            self.store,
            items=dataset.items,
            dataset_version=dataset.version,
            prompt=prompt,
            tracer=LangfuseTracer(self.lf),
            backend="langfuse",
            extra_record={"langfuse_dataset_id": dataset.langfuse_id},
        )
        prep.warnings.extend(warnings)
        self.experiment_id = prep.run.experiment_id
        self._trace_url_prefix = _trace_url_prefix(self.lf) if prep.todo else None
        by_raw_id = {str(dataset.raw_by_id[i.id].id): i for i in prep.todo}
        data = [dataset.raw_by_id[i.id] for i in prep.todo]
        # read-back window: a second of slack for clock rounding of span start times
        started = datetime.now(UTC) - timedelta(seconds=1)
        self.progress.start(total=len(prep.items), done=len(prep.items) - len(prep.todo))

        experiment_url = prep.run.config.get("langfuse_experiment_url")
        status = "interrupted"
        try:
            if data:
                extra: dict[str, Any] = (
                    {"_dataset_version": dataset.pinned} if dataset.pinned else {}
                )
                res = self.lf.run_experiment(
                    name=prep.run.name,
                    run_name=prep.run.name,
                    description=f"extraction-eval run {prep.run.name!r} on {config.dataset!r}"
                    f" ({config.pipeline.model})",
                    data=data,
                    task=self._make_task(prep, by_raw_id),
                    evaluators=[self._make_evaluator()],
                    max_concurrency=config.concurrency,
                    metadata=experiment_metadata(prep.run.config),
                    experiment_id=self.experiment_id,
                    **extra,
                )
                self.experiment_id = res.experiment_id or self.experiment_id
                experiment_url = res.experiment_url or experiment_url
            status = "finished"
        finally:
            # died before its first item (the exception goes on): the run is deleted
            discarded = status != "finished" and discard_if_empty(self.store, prep)
            if not discarded:
                results, summary = self._close_run(prep, status, experiment_url)

        lost = [i.id for i in prep.todo if i.id not in self.recorded]
        if lost:  # cannot happen unless the SDK dropped a task before it ran: say so
            prep.warnings.append(
                f"{len(lost)} items produced no result in this run ({', '.join(lost[:5])});"
                " run again with --resume"
            )
        if self.mirror_errors:
            raise BackendError(
                f"{len(self.mirror_errors)} results could not be written to the local store"
                f" (first: {self.mirror_errors[0]})"
            )
        run = self.store.get_run(prep.run.name, prep.run.dataset) or prep.run
        outcome = RunOutcome(
            run=run,
            results=results,
            summary=summary,
            ran=len(prep.todo),
            warnings=prep.warnings,
            experiment_url=experiment_url,
        )
        if config.verify:
            self._verify(outcome, started)
        return outcome

    def _close_run(
        self, prep: PreparedRun, status: str, experiment_url: str | None
    ) -> tuple[list[ItemResult], Any]:
        """Mirror and LangFuse both get the final state: finished, or interrupted (Ctrl-C)."""
        if self.experiment_id and self.experiment_id != prep.run.experiment_id:
            self.store.update_run(prep.run.id, experiment_id=self.experiment_id)
        if experiment_url and experiment_url != prep.run.config.get("langfuse_experiment_url"):
            self.store.update_run(
                prep.run.id,
                config={**prep.run.config, "langfuse_experiment_url": experiment_url},
            )
        results, summary = finalize(self.store, prep.run, prep.items, prep.runner, status=status)
        if self.experiment_id:
            for score in summary.run_scores:
                post_score(
                    self.lf,
                    score,
                    dataset_run_id=self.experiment_id,
                    score_id=run_score_id(self.experiment_id, score.name),
                )
        else:
            log.warning("no LangFuse experiment id for run %r: run scores not sent", prep.run.name)
        self.lf.flush()
        return results, summary

    def _verify(self, outcome: RunOutcome, since: datetime) -> None:
        run_names = [s.name for s in outcome.summary.run_scores] if self.experiment_id else []
        traces = {r.trace_id: r for r in self.recorded.values() if r.trace_id}
        untraced = [r.item_id for r in self.recorded.values() if not r.trace_id]
        report = verify_run(
            self.lf,
            traces=traces,
            experiment_id=self.experiment_id,
            run_score_names=run_names,
            since=since,
            timeout_s=self.verify_timeout,
        )
        if untraced or not report.ok:
            run = outcome.run
            missing = missing_summary(report, run_scores=len(run_names), untraced=len(untraced))
            raise VerificationError(
                f"LangFuse is missing data from run {run.name!r}"
                f" (experiment {self.experiment_id}): {missing};"
                f" every result is in the local store (runs show {run.name})",
                outcome=outcome,
                report=report,
            )
        log.info("%s", report.lines()[0])


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
    traces: Mapping[str, ItemResult],
    experiment_id: str | None,
    run_score_names: Sequence[str],
    since: datetime | None,
    timeout_s: float,
) -> VerifyReport:
    """``read_back`` for one run: each trace must carry the scores its own result has (they
    differ between items, e.g. ``zero_fp_pass`` only where the gold is empty), plus the
    run-level scores on the experiment; one deadline for everything."""
    deadline = time.monotonic() + timeout_s
    poll_s = _poll_interval(timeout_s)
    groups: dict[tuple[str, ...], list[str]] = {}
    for trace_id, result in traces.items():
        names = tuple(sorted({s.name for s in result.scores}))
        groups.setdefault(names, []).append(trace_id)
    if not groups:
        groups[()] = []
    reports: list[VerifyReport] = []
    for index, (names, trace_ids) in enumerate(sorted(groups.items())):
        first = index == 0
        reports.append(
            read_back(
                lf,
                trace_ids=sorted(trace_ids),
                score_names=names,
                experiment_id=experiment_id if first else None,
                run_score_names=run_score_names if first else (),
                since=since,
                timeout_s=max(deadline - time.monotonic(), 0.0),
                poll_s=poll_s,
            )
        )
    return VerifyReport(
        expected_traces=sum(r.expected_traces for r in reports),
        expected_scores=sum(r.expected_scores for r in reports),
        missing_traces=tuple(sorted(t for r in reports for t in r.missing_traces)),
        missing_scores=tuple(sorted(s for r in reports for s in r.missing_scores)),
        missing_run_scores=reports[0].missing_run_scores,
        waited_s=round(sum(r.waited_s for r in reports), 3),
        errors=tuple(e for r in reports for e in r.errors)[-5:],
    )
