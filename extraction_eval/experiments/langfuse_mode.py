"""LangFuse mode: the shared driver with a LangFuse dataset, prompt, tracer and score sink.

What the SDK does, it does: it links every item's trace to its dataset item and to the
experiment (OTel span attributes), derives the experiment id from the run name, batches the
scores we queue, and builds the experiment URL. Its ``run_experiment`` is the only public way
to get those linked item traces, so in this mode it is the driver's scheduler (see
``_schedule``: the one place its shape is accommodated).

What it does not do, we add:

- **Every item's scores**, ok or failed, posted by our score sink (``LangfuseScores``) on the
  item's trace and task observation as the item finishes, exactly what the mirror records.
  (The SDK runs no evaluator for a task that raises; a failed item's task still raises so the
  SDK marks its run and task observations level ERROR.)
- **Run-level scores over every item** (micro P/R/F1, CIs, ``error_count``, ...) from the
  mirror, on the experiment (``dataset_run_id`` = experiment id), with deterministic score ids
  so a resumed run overwrites them instead of adding a second set.
- **The local mirror** (``LocalStore``): ``runs show``, ``compare``, ``--resume`` and
  ``--retry-errors`` work as in local mode; a resume passes the stored experiment id.
- **Read-back.** The SDK only logs export failures; after the run we poll LangFuse (bounded by
  ``EXTRACTION_EVAL_VERIFY_TIMEOUT`` seconds) for every trace and score of this invocation and
  raise ``VerificationError`` naming what is missing (``--no-verify`` skips it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    LangfuseTracer,
    RunDataset,
    check_server_version,
    close_client,
    connect,
    fetch_prompt,
    post_score,
    run_score_id,
    wire_json,
)
from extraction_eval.backends.langfuse.reads import bound_sdk_reads, bounded_reads
from extraction_eval.backends.langfuse.score_batches import ScoreBatches
from extraction_eval.backends.langfuse.score_configs import ensure_score_configs
from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import ExtractionEvalError, one_line
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.driver import (
    Driver,
    ProgressHook,
    answer_by_batch,
    close_pipeline,
)
from extraction_eval.experiments.interrupts import SigintWatch
from extraction_eval.experiments.langfuse_verify import (
    DEFAULT_VERIFY_TIMEOUT_S,
    VERIFY_TIMEOUT_ENV,
    VerificationError,
    score_delivery_log,
    unverified_line,
    verify_in_langfuse,
    verify_timeout_s,
)
from extraction_eval.experiments.langfuse_workers import (
    LangfuseWorkers,
    run_in_workers,
    start_workers,
)
from extraction_eval.experiments.prepare import PreparedRun, plan, prepare, release_lock
from extraction_eval.experiments.runner import RunOutcome
from extraction_eval.experiments.summary import RunSummary
from extraction_eval.prompts.template import PromptTemplate, load_local_prompt
from extraction_eval.prompts.versions import prompt_requested
from extraction_eval.types import ItemResult, Score
from extraction_eval.version import __version__

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = [
    "DEFAULT_VERIFY_TIMEOUT_S",
    "VERIFY_TIMEOUT_ENV",
    "LangfuseScores",
    "VerificationError",
    "experiment_metadata",
    "post_run_scores",
    "prepare_langfuse_run",
    "run_langfuse",
    "run_prepared",
]

log = logging.getLogger(__name__)

# Span attribute the SDK propagates onto the task span (and everything under it).
_EXPERIMENT_ID_ATTR = "langfuse.experiment.id"
_PROBE_TRACE_ID = "0" * 32


def install_log_filter() -> None:
    """Take the SDK's "Scores will be dropped" lines out of the log (a matrix calls it too):
    the read-back says what really is missing, and repairs it (see ``langfuse_verify``)."""
    score_delivery_log.install(logging.getLogger("langfuse"))


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
        # how items were scored, so `runs pull` elsewhere re-folds the summary the same way
        "scoring": json.dumps(record["scoring"]) if record.get("scoring") else None,
    }
    matrix = record.get("matrix") or {}
    if matrix:  # a matrix cell: the matrix's prefix and the cell's repeat index
        meta["matrix"] = matrix.get("name")
        meta["matrix_repeat"] = (matrix.get("cell") or {}).get("repeat")
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
        log.warning("no LangFuse trace URLs for this run: %s", one_line(exc))
        return None
    if not url or not url.endswith(_PROBE_TRACE_ID):
        return None
    return url[: -len(_PROBE_TRACE_ID)]


# --- the run --------------------------------------------------------------------------------

# Scores per POST (the SDK's default is 15; LANGFUSE_FLUSH_AT, when set, wins). A run posts a
# dozen scores per item, each batch from a background thread on the same GIL as the run's
# event loop: 15 a batch cost ~0.9 ms of CPU per item more (benchmarks/bench_vs_peers.py,
# mode b), with 13 times as many requests. The SDK sizes its span exports with the same
# setting: 100, 512 or 1000 spans an export measured the same exporter CPU (2.0 s for 2,000
# items, 3 spans each: encoding the spans is the cost, not the requests), so one setting it is.
#
# A batch must also be stored within the request timeout: a slow self-hosted server took
# 5-12 s per 500-score batch, past the SDK's 5 s default, so the SDK reported batches as
# "dropped" that had arrived. Smaller batches and a longer timeout: see docs/langfuse.md for
# the measurement.
RUN_FLUSH_AT = 100
RUN_TIMEOUT_S = 30
FLUSH_AT_ENV = "LANGFUSE_FLUSH_AT"
TIMEOUT_ENV = "LANGFUSE_TIMEOUT"


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
    pool = start_workers(config)  # --workers: their imports overlap the setup
    try:
        lf, warnings = connect_for_run()  # keys, server, version before anything is spent
        try:
            return _run(lf, config, store, progress, timeout_s, warnings, pool)
        finally:
            close_client(lf)  # delivers queued spans and scores, also on Ctrl-C
    finally:
        if pool is not None:
            pool.stop()


def connect_for_run() -> tuple[Langfuse, list[str]]:
    """The run's client, checked before anything is spent: keys, server reachable, server
    version (``check_server_version``: refused below v4.59.0 unless allowed, then a warning).
    Score batches and the request timeout are sized for a slow server (``RUN_FLUSH_AT``,
    ``RUN_TIMEOUT_S``); ``LANGFUSE_FLUSH_AT`` / ``LANGFUSE_TIMEOUT`` win when set. No media
    detection (``connect``'s ``detect_media``)."""
    install_log_filter()
    lf = connect(
        flush_at=None if os.environ.get(FLUSH_AT_ENV) else RUN_FLUSH_AT,
        timeout_s=None if os.environ.get(TIMEOUT_ENV) else RUN_TIMEOUT_S,
        detect_media=False,  # a run sends text: see connect
    )
    try:
        warning = check_server_version(lf)
    except BaseException:
        close_client(lf)
        raise
    return lf, [warning] if warning else []


def plan_langfuse(config: RunConfig, *, store: LocalStore) -> PreparedRun:
    """What a LangFuse-mode run would do (its dataset and prompt from LangFuse), without
    running or creating anything: ``--dry-run``'s estimate."""
    install_log_filter()
    lf = connect()
    try:
        dataset = load_bounded(lf, config.dataset, config.dataset_version)
        prompt = _prompt(lf, config, [])
        return plan(
            config,
            store,
            items=dataset.items,
            dataset_version=dataset.version,
            prompt=prompt,
            extra_record={"langfuse_dataset_id": dataset.langfuse_id},
            dataset_schema=dataset.schema,
            detect=False,
        )
    finally:
        close_client(lf)


def load_bounded(lf: Langfuse, dataset: str, version: int | str | None) -> RunDataset:
    """A run's dataset from LangFuse, read within the LangFuse read bounds (the SDK walks
    the item pages up to the ``totalPages`` the server claims: ``backends.langfuse.reads``)."""
    with bounded_reads():
        bound_sdk_reads(lf)
        return LangfuseDatasetBackend(lf).load_for_run(dataset, version=version)


def _prompt(lf: Langfuse, config: RunConfig, warnings: list[str]) -> PromptTemplate:
    pipeline = config.pipeline
    if not prompt_requested(pipeline):  # refuses a label the pipeline would not send
        return load_local_prompt()
    return fetch_prompt(
        lf,
        pipeline.prompt_name,
        label=pipeline.prompt_label,
        version=pipeline.prompt_version,
        warnings=warnings,
    )


def _run(
    lf: Langfuse,
    config: RunConfig,
    store: LocalStore,
    progress: ProgressHook | None,
    verify_timeout: float,
    warnings: Sequence[str] = (),
    pool: LangfuseWorkers | None = None,
) -> RunOutcome:
    dataset = load_bounded(lf, config.dataset, config.dataset_version)
    # with workers the run's process scores no item (unless none starts): no solver import
    prep = prepare_langfuse_run(
        lf, config, store, dataset, warnings=warnings, scores_here=pool is None
    )
    return run_prepared(lf, prep, store, dataset, progress, verify_timeout, pool)


def prepare_langfuse_run(
    lf: Langfuse,
    config: RunConfig,
    store: LocalStore,
    dataset: RunDataset,
    *,
    extra_record: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
    scores_here: bool = True,
) -> PreparedRun:
    """The run's prompt, pipeline and record on a loaded dataset (a matrix loads it once for
    all its cells); nothing is sent to the model yet. ``warnings`` go into its summary;
    ``scores_here``: see ``prepare.plan``."""
    warnings = list(warnings)
    prompt = _prompt(lf, config, warnings)
    prep = prepare(
        config,
        store,
        items=dataset.items,
        dataset_version=dataset.version,
        prompt=prompt,
        tracer=LangfuseTracer(lf, error_level="WARNING"),  # the task span has the ERROR
        backend="langfuse",
        extra_record={"langfuse_dataset_id": dataset.langfuse_id, **(extra_record or {})},
        dataset_schema=dataset.schema,
        scores_here=scores_here,
    )
    prep.warnings.extend(warnings)
    return prep


def run_prepared(
    lf: Langfuse,
    prep: PreparedRun,
    store: LocalStore,
    dataset: RunDataset,
    progress: ProgressHook | None,
    verify_timeout: float,
    pool: LangfuseWorkers | None = None,
) -> RunOutcome:
    """A prepared run as an experiment: scheduled by the SDK (in ``pool``'s worker processes
    when given: ``langfuse_workers``), finalized, read back."""
    try:
        scores = LangfuseScores(lf, store, prep)
    except BaseException:
        release_lock(store, prep)
        raise
    # the results of one turn of the SDK's loop committed together, as in local mode
    driver = Driver(prep, store, progress=progress, scores=scores, group_commits=True)
    # read-back window: a second of slack for clock rounding of span start times
    started = datetime.now(UTC) - timedelta(seconds=1)
    try:
        with driver.running():
            if prep.todo_ids and prep.config.batch:
                asyncio.run(answer_by_batch(prep, store))
            # in worker processes (--workers), else (or none could start) in this one
            in_workers = bool(prep.todo_ids) and pool is not None
            if in_workers and pool is not None:
                in_workers = run_in_workers(lf, driver, scores, dataset, pool)
            if prep.todo_ids and not in_workers:
                _schedule(lf, driver, scores, dataset)
    finally:
        scores.close()  # the batches still queued, also on Ctrl-C
    outcome = driver.outcome(experiment_url=scores.experiment_url)
    outcome.langfuse_observations = dict(scores.observations)  # judged item scores go there too
    if not prep.config.verify:
        outcome.langfuse_verified = unverified_line(score_delivery_log.take())
        return outcome
    recorded = driver.recorded
    outcome.langfuse_verified = verify_in_langfuse(
        lf,
        outcome=outcome,
        store=store,
        traces={r.trace_id: r.score_names for r in recorded.values() if r.trace_id},
        untraced=[item_id for item_id, r in recorded.items() if not r.trace_id],
        observations=scores.observations,
        config_ids=scores.config_ids,
        experiment_id=scores.experiment_id,
        since=started,
        timeout_s=verify_timeout,
    )
    return outcome


def _schedule(lf: Langfuse, driver: Driver, scores: LangfuseScores, dataset: RunDataset) -> None:
    """The driver's items through the SDK's ``run_experiment``: the scheduler of this mode.

    The SDK forces this shape, and only here: it creates the linked item traces only around a
    task it calls itself, on an event loop it creates (``asyncio.run``; so it must be called
    with no loop running), all items at once behind a semaphore of ``max_concurrency``. The
    task is the same two driver steps local mode's loop takes; a failed item's task raises
    after them (its result and scores are recorded and posted already), because a raising
    task is how the SDK marks the item's trace ERROR.
    """
    prep = driver.prep
    todo = list(prep.iter_todo())  # the SDK takes a list (its items are all in memory anyway)
    by_raw_id = {str(dataset.raw_by_id[i.id].id): i for i in todo}
    unfinished = len(todo)
    watch = SigintWatch()  # installed in the SDK's loop: a pipeline's KeyboardInterrupt

    async def task(*, item: Any, **_: Any) -> Any:
        nonlocal unfinished
        watch.install()
        try:
            if not driver.may_start():  # --max-cost reached: no call, no row; --resume runs it
                lf.update_current_span(level="WARNING", status_message=NOT_RUN)
                return {"not_run": NOT_RUN}
            result = await driver.run_item(by_raw_id[str(item.id)])
            driver.record(result)
        finally:
            unfinished -= 1
            if unfinished == 0:  # the model client's connections belong to this loop, which
                watch.remove()
                await close_pipeline(prep.runner.pipeline)  # the SDK closes on return
        return item_output(lf, result)

    extra: dict[str, Any] = {"_dataset_version": dataset.pinned} if dataset.pinned else {}
    try:
        res = lf.run_experiment(
            name=prep.run.name,
            run_name=prep.run.name,
            description=f"extraction-eval run {prep.run.name!r} on {prep.config.dataset!r}"
            f" ({prep.run.config.get('model') or prep.config.pipeline.model})",
            data=[dataset.raw_by_id[i.id] for i in todo],
            task=task,
            max_concurrency=prep.config.concurrency,
            metadata=experiment_metadata(prep.run.config),
            experiment_id=scores.experiment_id,
            **extra,
        )
    finally:
        watch.remove()  # also when the SDK never ran the last task (cancelled)
    scores.experiment_done(res.experiment_id, res.experiment_url)


NOT_RUN = "not run: the run's cost ceiling was reached"


def item_output(lf: Langfuse, result: ItemResult) -> Any:
    """The task's return value: the item trace's output, a JSON object either way, as its
    JSON text (``wire_json``: the SDK puts it on two spans, and would walk it twice).

    A failed item returns too (rather than raising, which the SDK answers by leaving the
    trace without input or metadata and marking two observations ERROR): its task span, the
    item's root observation, is marked ERROR here, the one ERROR observation of the item, so
    LangFuse's error count is ours."""
    if result.ok:
        return wire_json(result.output.model_dump(mode="json") if result.output else {})
    message = result.error or "extraction failed"
    lf.update_current_span(level="ERROR", status_message=message)
    return wire_json({"error": message, "error_kind": result.error_kind})


def _score_configs(lf: Langfuse, prep: PreparedRun) -> Mapping[str, str]:
    """Our score configs in the project (created once); a server that refuses them costs
    the UI its score shapes, not the run: a warning, and scores without a config."""
    try:
        return ensure_score_configs(lf)
    except ExtractionEvalError as exc:
        prep.warnings.append(f"scores sent without LangFuse score configs: {one_line(exc)}")
        return {}


class LangfuseScores:
    """The score sink of LangFuse mode: item scores on the item's trace and task observation
    (in batches, ``ScoreBatches``), run-level scores on the experiment. Also keeps the
    experiment id and URL in the mirror, so a resumed run writes into the same experiment."""

    def __init__(self, lf: Langfuse, store: LocalStore, prep: PreparedRun) -> None:
        self.lf = lf
        self.store = store
        self.prep = prep
        self.experiment_id: str | None = prep.run.experiment_id
        self.experiment_url: str | None = prep.run.config.get("langfuse_experiment_url")
        self._trace_url_prefix = _trace_url_prefix(lf) if prep.todo_ids else None
        self._stored_experiment_id = prep.run.experiment_id
        self.observations: dict[str, str] = {}  # trace id -> the item's task observation
        self.config_ids: Mapping[str, str] = _score_configs(lf, prep) if prep.todo_ids else {}
        self.batches = ScoreBatches(lf, on_unconfirmed=score_delivery_log.add)

    @property
    def trace_url_prefix(self) -> str | None:
        return self._trace_url_prefix  # worker processes make their items' trace URLs

    def bind(self, result: ItemResult) -> ItemResult:
        trace_id = self.lf.get_current_trace_id()
        if self.experiment_id is None:
            self.experiment_id = _current_experiment_id()
            # known from the first finished item: an interrupted run keeps it too
            self._store_experiment()
        prefix = self._trace_url_prefix
        trace_url = f"{prefix}{trace_id}" if prefix and trace_id else None
        return result.model_copy(update={"trace_id": trace_id, "trace_url": trace_url})

    def post_item(self, result: ItemResult) -> None:
        observation_id = self.lf.get_current_observation_id()  # the SDK's task span
        if result.trace_id and observation_id:
            self.observations[result.trace_id] = observation_id  # for a re-post
        self.batches.add_item(
            result.scores,
            trace_id=result.trace_id,
            observation_id=observation_id,
            config_ids=self.config_ids,
        )

    def post_run(self, summary: RunSummary) -> None:
        if self.prep.config.shard is not None:
            # a shard's summary covers its own items: the experiment's run-level scores come
            # from all of them, once, from `runs finalize` (see experiments/shards.py)
            log.info("shard %s: run scores are left to runs finalize", self.prep.config.shard)
        elif self.experiment_id:
            post_run_scores(self.lf, self.experiment_id, summary.run_scores, self.batches)
        else:
            log.warning(
                "no LangFuse experiment id for run %r: run scores not sent", self.prep.run.name
            )
        self.batches.flush()
        self.lf.flush()  # spans, and any batch handed to the SDK's queue

    def close(self) -> None:
        """Post what is queued and stop the batches' thread."""
        self.batches.close()
        self.lf.flush()

    def experiment_done(self, experiment_id: str | None, url: str | None) -> None:
        """What ``run_experiment`` returned, into the mirror before the run is finalized."""
        self.experiment_id = experiment_id or self.experiment_id
        self._store_experiment()
        run = self.prep.run
        if url and url != run.config.get("langfuse_experiment_url"):
            self.store.update_run(run.id, config={**run.config, "langfuse_experiment_url": url})
        self.experiment_url = url or self.experiment_url

    def _store_experiment(self) -> None:
        if self.experiment_id and self.experiment_id != self._stored_experiment_id:
            self.store.update_run(self.prep.run.id, experiment_id=self.experiment_id)
            self._stored_experiment_id = self.experiment_id


def post_run_scores(
    lf: Langfuse,
    experiment_id: str,
    scores: Sequence[Score],
    batches: ScoreBatches | None = None,
) -> None:
    """Run-level scores on the experiment, with deterministic ids: posting them again (a
    resume, a second finalize) replaces them rather than adding a second set. Through
    ``batches`` when given (the run's), else the SDK's queue."""
    for score in scores:
        subject = {
            "dataset_run_id": experiment_id,
            "score_id": run_score_id(experiment_id, score.name),
        }
        if batches is not None:
            batches.add(score, **subject)
        else:
            post_score(lf, score, **subject)
