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
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from extraction_eval.backends.langfuse import (
    LangfuseDatasetBackend,
    base_url_of,
    check_auth,
    close_client,
    connect,
)
from extraction_eval.backends.langfuse.datasets import json_value
from extraction_eval.backends.langfuse.reads import (
    ReadLimits,
    Warn,
    api_pages,
    bound_sdk_reads,
    bounded_reads,
    get_json,
    warn,
)
from extraction_eval.errors import BackendError, ExtractionEvalError, NotFoundError, UsageError
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
_SCORE_TYPES = ("NUMERIC", "BOOLEAN", "CATEGORICAL")
FAILED = "failed"  # a pull cut short by an error: what was read is kept; pulling again redoes it


def _ts(value: Any, what: str) -> datetime:
    """An ISO timestamp from LangFuse, or one line naming what is unreadable."""
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise BackendError(f"{what}: unreadable time {str(value)[:40]!r} from LangFuse") from None


def _dict(value: Any) -> dict[str, Any]:
    """A JSON object from LangFuse, or {} for anything else (a list, null, a number)."""
    return value if isinstance(value, dict) else {}


def _whole(value: Any) -> int | None:
    """A whole number written in ASCII digits (``"²".isdigit()`` is True, ``int("²")`` fails)."""
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else None


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
        found = [e for e in found if _dict(e.get("metadata")).get("dataset") in (dataset, None)]
    if not found:
        where = f" on dataset {dataset!r}" if dataset else ""
        raise NotFoundError(f"no experiment named {name!r}{where} in LangFuse at {base_url_of(lf)}")
    latest = max(found, key=lambda e: str(e.get("endTime") or e.get("startTime")))
    if not isinstance(latest.get("id"), str) or not latest["id"]:
        raise BackendError(f"experiment {name!r} in LangFuse has no id")
    return latest


def _dataset_name(lf: Langfuse, experiment: Mapping[str, Any]) -> str:
    named = _dict(experiment.get("metadata")).get("dataset")
    if isinstance(named, str) and named:
        return named
    wanted = experiment.get("datasetId")
    limits = ReadLimits.from_env()
    for page in range(1, limits.max_pages + 1) if wanted else ():
        body = _dict(get_json(lf, "v2/datasets", {"page": page, "limit": 100}))
        data = body.get("data")
        for ds in data if isinstance(data, list) else []:
            if isinstance(ds, dict) and ds.get("id") == wanted and isinstance(ds.get("name"), str):
                return str(ds["name"])
        total = _dict(body.get("meta")).get("totalPages")
        if not isinstance(total, int) or page >= total:
            break
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
                trace_id, score = _score(s)
                if trace_id is not None and score is not None:
                    out.setdefault(trace_id, []).append(score)
    return out


def _score(s: Mapping[str, Any]) -> tuple[str | None, Score | None]:
    """One v3 score as (trace id, Score); one line and (None, None) for a malformed one."""
    subject = _dict(s.get("subject"))
    trace_id = subject.get("traceId") if subject.get("kind") == "observation" else subject.get("id")
    data_type = s.get("dataType") or "NUMERIC"
    value = s.get("value")
    if data_type == "BOOLEAN":
        value = bool(value)
    try:
        if data_type not in _SCORE_TYPES:
            raise ValueError(f"dataType {str(data_type)[:40]!r} is not one of {_SCORE_TYPES}")
        if not isinstance(trace_id, str) or not isinstance(s.get("name"), str):
            raise ValueError("no trace id or no name")
        comment = s.get("comment")  # quotes labels: may hold a key configured here
        score = Score(
            name=s["name"],
            value=redact(value) if isinstance(value, str) else value,
            data_type=data_type,
            comment=redact(comment) if isinstance(comment, str) else None,
        )
    except ValueError as exc:
        warn(f"reading v3/scores: score {str(s.get('id'))[:60]!r}: {str(exc)[:200]}; skipped")
        return None, None
    return trace_id, score


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


def _error_kind(output: Any) -> str | None:
    kind = output.get("error_kind") if isinstance(output, dict) else None
    return kind[:40] if isinstance(kind, str) else None


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
        error_kind=_error_kind(output) if failed else None,
        scores=scores,
        trace_id=str(row.get("traceId")),
    )


def pull_run(
    store: LocalStore, name: str, *, dataset: str | None = None, warn: Warn | None = None
) -> RunRecord:
    """Experiment ``name`` from LangFuse into the local mirror (``NotFoundError`` when there
    is none; ``UsageError`` when the mirror already has a run of that name). Every read is
    bounded (``backends.langfuse.reads``); ``warn`` gets one line per skipped record or walk
    cut short."""
    with bounded_reads(warn):
        lf = connect(check=False)
        try:
            bound_sdk_reads(lf)  # the key check and the dataset's items are the SDK's reads
            check_auth(lf)
            return _pull(lf, store, name, dataset)
        finally:
            close_client(lf)


def _pull(lf: Langfuse, store: LocalStore, name: str, dataset: str | None) -> RunRecord:
    experiment = find_experiment(lf, name, dataset)
    dataset_name = _dataset_name(lf, experiment)
    existing = store.get_run(name, dataset_name)
    if existing is not None and not (
        existing.status == FAILED and "pulled_from" in (existing.config or {})
    ):
        raise UsageError(f"the local store already has run {name!r} on {dataset_name!r}")
    started = _ts(experiment.get("startTime"), f"experiment {name!r}")
    loaded = LangfuseDatasetBackend(lf).load_for_run(
        dataset_name, version=started + timedelta(seconds=1)
    )
    by_lf_id = {str(raw.id): our for our, raw in loaded.raw_by_id.items()}
    config = _run_config(lf, experiment)
    scoring_config = _scoring(config, name)  # before the record: it says what was used
    if existing is None:
        run = store.create_run(
            name=name,
            dataset=dataset_name,
            dataset_version=loaded.version,
            config=config,
            backend="langfuse",
            experiment_id=str(experiment["id"]),
        )
    else:  # an earlier pull failed halfway: pulled again into the same run
        run = existing
        store.update_run(
            run.id, config=config, experiment_id=str(experiment["id"]), status="running"
        )
    items = {i.id: i for i in loaded.items}
    scorer = Rescorer(scoring_config, {i.id: i.text for i in loaded.items})
    since = _iso(started - timedelta(minutes=1))
    pages = api_pages(
        lf,
        "experiment-items",
        fromStartTime=since,
        experimentId=experiment["id"],
        fields="core,io,itemMetadata",
        limit=_PAGE,
    )
    try:
        _store_pages(lf, store, run, pages, by_lf_id, items, scorer)
    except ExtractionEvalError as exc:  # what was read is kept; a pull again redoes it
        finalize(store, run, loaded.items, scorer, status=FAILED)
        raise BackendError(
            f"{exc} (the items read so far are stored as run {name!r}, status {FAILED};"
            " runs pull again pulls it anew)"
        ) from None
    finalize(store, run, loaded.items, scorer, status="finished")
    return store.get_run_by_id(run.id)


def _scoring(config: dict[str, Any], name: str) -> ScoringConfig:
    """The scoring the experiment recorded; the defaults (one line, and the record says
    none) when its metadata does not make one."""
    scoring = config["scoring"]
    if not isinstance(scoring, dict):
        return ScoringConfig()
    try:
        return ScoringConfig(**scoring)
    except (TypeError, ValueError) as exc:
        config["scoring"] = None
        warn(
            f"experiment {name!r}: its scoring metadata does not read"
            f" ({str(exc).splitlines()[0][:200]}); scored with the defaults"
        )
        return ScoringConfig()


def _run_config(lf: Langfuse, experiment: Mapping[str, Any]) -> dict[str, Any]:
    """The run record's config from the experiment's metadata (only what reads cleanly)."""
    meta = {k: v for k, v in _dict(experiment.get("metadata")).items() if isinstance(v, str)}
    scoring = json_value(meta.get("scoring"))
    config: dict[str, Any] = {
        **{k: meta[k] for k in ("provider", "model", "pipeline", "prompt_hash") if k in meta},
        "prompt": {
            "name": meta.get("prompt_name"),
            "label": meta.get("prompt_label"),
            "version": _whole(meta.get("prompt_version")),
            "source": meta.get("prompt_source"),
        },
        "scoring": scoring if isinstance(scoring, dict) else None,
        "pulled_from": base_url_of(lf),
    }
    if "temperature" in meta:
        with contextlib.suppress(ValueError):
            config["temperature"] = float(meta["temperature"])
    return config


def _store_pages(
    lf: Langfuse,
    store: LocalStore,
    run: RunRecord,
    pages: Iterable[list[dict[str, Any]]],
    by_lf_id: Mapping[str, str],
    items: Mapping[str, Any],
    scorer: Rescorer,
) -> None:
    """Each page of experiment items into the store as it arrives (never all held): an item
    seen again (a resumed item) is replaced when its trace started later."""
    started: dict[str, str] = {}  # item id -> start time of the row stored for it
    for page in pages:
        latest: dict[str, dict[str, Any]] = {}
        for row in page:
            item_id = _our_item_id(row, by_lf_id)
            trace_id = row.get("traceId")
            if item_id is None or item_id not in items:
                continue
            if not isinstance(trace_id, str) or not trace_id:
                warn(f"reading experiment-items: item {item_id!r} has no trace id; skipped")
                continue
            when = str(row.get("startTime"))
            if item_id not in started or when >= started[item_id]:
                started[item_id] = when  # a resumed item: its latest trace wins
                latest[item_id] = row
        scores = _scores(lf, sorted({str(r["traceId"]) for r in latest.values()}))
        for item_id, row in latest.items():
            output = (
                json_value(row.get("output"))
                if "output" in row
                else _root_output(lf, str(row["traceId"]))
            )
            result = _result(item_id, row, output, scores.get(str(row["traceId"]), []))
            scored = scorer.score(items[item_id], result.output)
            tags = taxonomy_tags(scored)
            store.record_result(run.id, result.model_copy(update={"taxonomy": tags}))


def get_or_pull(
    store: LocalStore, name: str, dataset: str | None = None, warn: Warn | None = None
) -> RunRecord:
    """The stored run ``name``; when the mirror has none and LangFuse is configured, the
    experiment of that name pulled from LangFuse first (``compare`` and ``report``)."""
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.backends.langfuse import langfuse_configured

    try:
        run = get_run(store, name, dataset)
    except NotFoundError:
        if not langfuse_configured():
            raise
    else:  # a pull that failed halfway is pulled again rather than compared as it is
        pulled = "pulled_from" in (run.config or {})
        if run.status != FAILED or not pulled or not langfuse_configured():
            return run
    return pull_run(store, name, dataset=dataset, warn=warn)
