"""``runs pull``: a LangFuse experiment made elsewhere (CI, a colleague) into the local mirror.

Read through LangFuse's public API, the endpoints a current server serves: ``experiments``
(the run: name, dataset, metadata), ``experiment-items`` (each item's trace, level, input and
output), v3 ``scores`` (each trace's scores, by trace id in chunks) and, for an item whose
output the experiment item lacks, v2 ``observations`` (the trace's root observation). The
items' gold comes from the LangFuse dataset as it was when the experiment started.

The mirror then holds the run like one made here: ``compare``, ``report``, ``runs show
--worst`` and the gate work on it. Its item scores are LangFuse's; the run-level summary is
folded from the results and the gold, exactly as ``runs finalize`` does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    api_errors,
    base_url_of,
    close_client,
    connect,
)
from extraction_eval.backends.langfuse.datasets import json_value
from extraction_eval.backends.langfuse.readback import api_pages
from extraction_eval.errors import NotFoundError, UsageError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.runner import Rescorer, finalize, taxonomy_tags
from extraction_eval.redact import redact
from extraction_eval.types import Extraction, ItemResult, Score

if TYPE_CHECKING:
    from langfuse import Langfuse

    from extraction_eval.backends.local import LocalStore, RunRecord

__all__ = ["get_or_pull", "pull_run"]

_SINCE = "2000-01-01T00:00:00Z"  # experiments need a window start: everything
_PAGE = 100
_TRACE_CHUNK = 20


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def find_experiment(lf: Langfuse, name: str, dataset: str | None) -> dict[str, Any]:
    """The experiment named ``name`` (of ``dataset`` when given; the latest when several)."""
    found = [
        e
        for page in api_pages(
            lf, "experiments", fromStartTime=_SINCE, name=name, fields="core,metadata", limit=_PAGE
        )
        for e in page
        if e.get("name") == name
    ]
    if dataset is not None:
        found = [e for e in found if (e.get("metadata") or {}).get("dataset") in (dataset, None)]
    if not found:
        where = f" on dataset {dataset!r}" if dataset else ""
        raise NotFoundError(f"no experiment named {name!r}{where} in LangFuse at {base_url_of(lf)}")
    return max(found, key=lambda e: str(e.get("endTime") or e.get("startTime")))


def _dataset_name(lf: Langfuse, experiment: Mapping[str, Any]) -> str:
    named = (experiment.get("metadata") or {}).get("dataset")
    if isinstance(named, str) and named:
        return named
    wanted = experiment.get("datasetId")
    page = 1
    while wanted:
        with api_errors(lf, "listing datasets"):
            batch = lf.api.datasets.list(page=page, limit=100)
        for ds in batch.data:
            if ds.id == wanted:
                return str(ds.name)
        if page >= batch.meta.total_pages:
            break
        page += 1
    raise UsageError(f"experiment {experiment.get('name')!r} is not linked to a LangFuse dataset")


def _our_item_id(row: Mapping[str, Any], by_lf_id: Mapping[str, str]) -> str | None:
    meta = json_value(row.get("experimentItemMetadata")) or {}
    if isinstance(meta, dict):
        nested = meta.get("extraction_eval")
        nested = json_value(nested)
        if isinstance(nested, dict) and nested.get("item_id"):
            return str(nested["item_id"])
        if meta.get("extraction_eval.item_id"):  # flattened by the server
            return str(meta["extraction_eval.item_id"])
    return by_lf_id.get(str(row.get("experimentItemId")))


def _scores(lf: Langfuse, trace_ids: Sequence[str]) -> dict[str, list[Score]]:
    out: dict[str, list[Score]] = {}
    for start in range(0, len(trace_ids), _TRACE_CHUNK):
        chunk = trace_ids[start : start + _TRACE_CHUNK]
        for page in api_pages(
            lf, "v3/scores", traceId=",".join(chunk), fields="subject,details", limit=_PAGE
        ):
            for s in page:
                subject = s.get("subject") or {}
                trace_id = (
                    subject.get("traceId")
                    if subject.get("kind") == "observation"
                    else subject.get("id")
                )
                data_type = s.get("dataType") or "NUMERIC"
                value = s.get("value")
                if data_type == "BOOLEAN":
                    value = bool(value)
                comment = s.get("comment")  # quotes labels: may hold a key configured here
                out.setdefault(str(trace_id), []).append(
                    Score(
                        name=str(s.get("name")),
                        value=redact(value) if isinstance(value, str) else value,
                        data_type=data_type,
                        comment=redact(comment) if isinstance(comment, str) else comment,
                    )
                )
    return out


def _root_output(lf: Langfuse, trace_id: str) -> Any:
    """The output of the trace's root observation (v2 observations)."""
    for page in api_pages(
        lf, "v2/observations", traceId=trace_id, fields="core,basic,io", limit=50
    ):
        for obs in page:
            if obs.get("parentObservationId") is None:
                return json_value(obs.get("output"))
        break
    return None


def _result(item_id: str, row: Mapping[str, Any], output: Any, scores: list[Score]) -> ItemResult:
    failed = row.get("level") == "ERROR"
    error: str | None = None
    extraction: Extraction | None = None
    if isinstance(output, dict) and "error" in output and set(output) <= {"error", "error_kind"}:
        failed, error = True, str(output.get("error"))
    elif failed:
        error = str(output)[:500] if output else "failed in LangFuse"
    else:
        try:
            extraction = Extraction.model_validate(output if isinstance(output, dict) else {})
        except ValueError as exc:
            failed, error = True, f"unreadable output in LangFuse: {str(exc)[:200]}"
    if extraction is not None:  # what LangFuse holds may quote a key configured here
        extraction, _ = extraction.redacted()
    return ItemResult(
        item_id=item_id,
        output=extraction,
        error=(redact(error) if error else error) if failed else None,
        error_kind=(output.get("error_kind") if isinstance(output, dict) else None)
        if failed
        else None,
        scores=scores,
        trace_id=str(row.get("traceId")),
    )


def pull_run(store: LocalStore, name: str, *, dataset: str | None = None) -> RunRecord:
    """Experiment ``name`` from LangFuse into the local mirror (``NotFoundError`` when there
    is none; ``UsageError`` when the mirror already has a run of that name)."""
    lf = connect()
    try:
        return _pull(lf, store, name, dataset)
    finally:
        close_client(lf)


def _pull(lf: Langfuse, store: LocalStore, name: str, dataset: str | None) -> RunRecord:
    experiment = find_experiment(lf, name, dataset)
    dataset_name = _dataset_name(lf, experiment)
    if store.get_run(name, dataset_name) is not None:
        raise UsageError(f"the local store already has run {name!r} on {dataset_name!r}")
    started = _ts(str(experiment["startTime"]))
    loaded = LangfuseDatasetBackend(lf).load_for_run(
        dataset_name, version=started + timedelta(seconds=1)
    )
    by_lf_id = {str(raw.id): our for our, raw in loaded.raw_by_id.items()}
    latest: dict[str, dict[str, Any]] = {}
    since = _iso(started - timedelta(minutes=1))
    for page in api_pages(
        lf,
        "experiment-items",
        fromStartTime=since,
        experimentId=experiment["id"],
        fields="core,io,itemMetadata",
        limit=_PAGE,
    ):
        for row in page:
            item_id = _our_item_id(row, by_lf_id)
            if item_id is None:
                continue
            kept = latest.get(item_id)
            if kept is None or str(row.get("startTime")) >= str(kept.get("startTime")):
                latest[item_id] = row  # a resumed item: its latest trace wins
    scores = _scores(lf, sorted(str(r["traceId"]) for r in latest.values()))
    meta = {k: v for k, v in (experiment.get("metadata") or {}).items() if isinstance(v, str)}
    scoring = json_value(meta.get("scoring"))
    config: dict[str, Any] = {
        **{k: meta[k] for k in ("provider", "model", "pipeline", "prompt_hash") if k in meta},
        "prompt": {
            "name": meta.get("prompt_name"),
            "label": meta.get("prompt_label"),
            "version": int(meta["prompt_version"])
            if meta.get("prompt_version", "").isdigit()
            else None,
            "source": meta.get("prompt_source"),
        },
        "scoring": scoring if isinstance(scoring, dict) else None,
        "pulled_from": base_url_of(lf),
    }
    if "temperature" in meta:
        with contextlib.suppress(ValueError):
            config["temperature"] = float(meta["temperature"])
    run = store.create_run(
        name=name,
        dataset=dataset_name,
        dataset_version=loaded.version,
        config=config,
        backend="langfuse",
        experiment_id=str(experiment["id"]),
    )
    items = {i.id: i for i in loaded.items}
    scoring_config = ScoringConfig(**scoring) if isinstance(scoring, dict) else ScoringConfig()
    scorer = Rescorer(scoring_config, {i.id: i.text for i in loaded.items})
    for item_id, row in latest.items():
        if item_id not in items:
            continue
        output = (
            json_value(row.get("output"))
            if "output" in row
            else _root_output(lf, str(row["traceId"]))
        )
        result = _result(item_id, row, output, scores.get(str(row["traceId"]), []))
        scored = scorer.score(items[item_id], result.output)
        store.record_result(run.id, result.model_copy(update={"taxonomy": taxonomy_tags(scored)}))
    finalize(store, run, loaded.items, scorer, status="finished")
    return store.get_run_by_id(run.id)


def get_or_pull(store: LocalStore, name: str, dataset: str | None = None) -> RunRecord:
    """The stored run ``name``; when the mirror has none and LangFuse is configured, the
    experiment of that name pulled from LangFuse first (``compare`` and ``report``)."""
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.langfuse import langfuse_configured

    try:
        return get_run(store, name, dataset)
    except NotFoundError:
        if not langfuse_configured():
            raise
    return pull_run(store, name, dataset=dataset)
