"""LangFuse mode: the same ``ItemRunner`` driven by the SDK's ``run_experiment``.

The SDK links each item's trace to its dataset item and experiment (OTel attributes) and
batches the scores; we keep what it does not: failed items (the SDK drops them from its result
and runs no evaluator on them), run-level aggregates over every item, a local mirror of the run,
and a read-back that everything arrived (the SDK only logs export failures).
"""

from __future__ import annotations

import contextvars
import logging
from datetime import UTC, datetime
from typing import Any

from extraction_eval import __version__
from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    LangfuseTracer,
    close_client,
    connect,
    fetch_prompt,
    read_back,
    to_dataset_item,
)
from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import BackendError, NotFoundError
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import ProgressHook, _NoProgress, prepare
from extraction_eval.experiments.runner import RunOutcome, finalize
from extraction_eval.prompts.template import load_local_prompt
from extraction_eval.types import ItemResult, Score

log = logging.getLogger(__name__)

# The task and the evaluators of one item run in the same asyncio task inside the SDK, so
# the evaluator finds the result its task produced here (and only that one).
_current_result: contextvars.ContextVar[ItemResult | None] = contextvars.ContextVar(
    "extraction_eval_current_result", default=None
)


def _evaluation(score: Score) -> Any:
    from langfuse import Evaluation

    return Evaluation(
        name=score.name, value=score.value, comment=score.comment, data_type=score.data_type
    )


def _experiment_metadata(record: dict[str, Any]) -> dict[str, str]:
    prompt = record.get("prompt") or {}
    meta = {
        "provider": record.get("provider"),
        "model": record.get("model"),
        "temperature": record.get("temperature"),
        "prompt_name": prompt.get("name"),
        "prompt_label": prompt.get("label"),
        "prompt_version": prompt.get("version"),
        "prompt_source": prompt.get("source"),
        "concurrency": record.get("concurrency"),
        "extraction_eval_version": __version__,
    }
    return {k: str(v) for k, v in meta.items() if v is not None}


def run_langfuse(
    config: RunConfig,
    *,
    store: LocalStore,
    progress: ProgressHook | None = None,
) -> RunOutcome:
    progress = progress or _NoProgress()
    lf = connect()  # checks the keys and the server before anything is spent
    try:
        return _run(lf, config, store, progress)
    finally:
        close_client(lf)  # delivers traces and scores, also on Ctrl-C


def _run(lf: Any, config: RunConfig, store: LocalStore, progress: ProgressHook) -> RunOutcome:
    started = datetime.now(UTC)
    try:
        dataset = lf.get_dataset(config.dataset)
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            raise NotFoundError(f"dataset {config.dataset!r} not found in LangFuse") from None
        raise BackendError(f"could not load dataset {config.dataset!r}: {exc}") from None

    lf_items = {}
    items = []
    for lf_item in dataset.items:
        if str(getattr(lf_item, "status", "")).upper().endswith("ARCHIVED"):
            continue
        item = to_dataset_item(lf_item)
        lf_items[item.id] = lf_item
        items.append(item)

    warnings: list[str] = []
    if config.pipeline.prompt_label is not None:
        prompt = fetch_prompt(lf, config.pipeline.prompt_name, label=config.pipeline.prompt_label)
        if prompt.source == "fallback":
            warnings.append(
                f"could not fetch prompt {config.pipeline.prompt_name!r} with label "
                f"{config.pipeline.prompt_label!r} from LangFuse; using the local template "
                "(prompt_source=fallback)"
            )
    else:
        prompt = load_local_prompt()

    version = LangfuseDatasetBackend(lf).get_dataset(config.dataset).version
    prep = prepare(
        config,
        store,
        items=items,
        dataset_version=version,
        prompt=prompt,
        tracer=LangfuseTracer(lf),
        backend="langfuse",
        extra_record={"langfuse_dataset_id": getattr(dataset, "id", None)},
    )
    prep.warnings.extend(warnings)
    progress.start(total=len(prep.items), done=len(prep.items) - len(prep.todo))
    trace_ids: dict[str, str] = {}

    async def task(*, item: Any, **_: Any) -> Any:
        ours = to_dataset_item(item)
        result = await prep.runner.run_item(ours)
        trace_id = lf.get_current_trace_id()
        observation_id = lf.get_current_observation_id()
        result = result.model_copy(update={"trace_id": trace_id})
        store.record_result(prep.run.id, result)
        if trace_id:
            trace_ids[ours.id] = trace_id
        progress.advance(result)
        if not result.ok:
            # The SDK runs no evaluator for a failed task: put its scores on the trace
            # ourselves, then raise so the trace is marked ERROR like LangFuse expects.
            for score in result.scores:
                lf.create_score(
                    trace_id=trace_id,
                    observation_id=observation_id,
                    name=score.name,
                    value=score.value,
                    data_type=score.data_type,
                    comment=score.comment,
                )
            raise RuntimeError(result.error)
        _current_result.set(result)
        return result.output.model_dump(mode="json") if result.output else None

    def item_scores(**_: Any) -> list[Any]:
        result = _current_result.get()
        return [_evaluation(s) for s in result.scores] if result else []

    meta = _experiment_metadata(prep.run.config)
    status = "interrupted"
    experiment_id = prep.run.experiment_id
    experiment_url = None
    try:
        res = lf.run_experiment(
            name=config.dataset,
            run_name=prep.run.name,
            description=f"extraction-eval run {prep.run.name}",
            data=[lf_items[i.id] for i in prep.todo],
            task=task,
            evaluators=[item_scores],
            max_concurrency=config.concurrency,
            metadata=meta,
            experiment_id=experiment_id,
        )
        experiment_id, experiment_url = res.experiment_id, res.experiment_url
        status = "finished"
    finally:
        if experiment_id and experiment_id != prep.run.experiment_id:
            store.update_run(prep.run.id, experiment_id=experiment_id)
        results, summary = finalize(store, prep.run, prep.items, prep.runner, status=status)

    for score in summary.run_scores:
        lf.create_score(
            dataset_run_id=experiment_id,
            name=score.name,
            value=score.value,
            data_type=score.data_type,
            comment=score.comment,
        )
    lf.flush()

    if config.verify and trace_ids:
        expected = sorted({s.name for r in results for s in r.scores})
        report = read_back(
            lf,
            trace_ids=sorted(trace_ids.values()),
            score_names=expected,
            experiment_id=experiment_id,
            run_score_names=[s.name for s in summary.run_scores],
            since=started,
        )
        if not report.ok:
            raise BackendError(f"LangFuse is missing data from run {prep.run.name!r}: {report}")

    run = store.get_run(prep.run.name, prep.run.dataset) or prep.run
    return RunOutcome(
        run=run,
        results=results,
        summary=summary,
        ran=len(prep.todo),
        warnings=prep.warnings,
        experiment_url=experiment_url,
    )
