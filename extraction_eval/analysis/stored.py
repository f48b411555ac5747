"""The one way to read a stored run back for an analysis: find it by name, the scoring config
and the gold it was scored with, and the pairing of two runs' items by id.

Every analysis (compare, diff, report, worst) goes through these, so they cannot disagree on
what a run was scored with or against: a LangFuse-mode run's gold is read from LangFuse here,
for every one of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, TypeVar

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import ConfigError, NotFoundError
from extraction_eval.evaluators import GoldView, ScoringConfig
from extraction_eval.types import DatasetItem


def get_run(store: LocalStore, name: str, dataset: str | None = None) -> RunRecord:
    """The stored run of that name; a ``NotFoundError`` naming the known runs otherwise."""
    run = store.get_run(name, dataset)
    if run is None:
        known = ", ".join(sorted({r.name for r in store.list_runs(dataset)})) or "none"
        raise NotFoundError(f"no run named {name!r}; known runs: {known}")
    return run


def run_gold(store: LocalStore, run: RunRecord) -> dict[str, DatasetItem]:
    """The gold a run was scored against: its dataset version's items, from the local store,
    or from LangFuse for a LangFuse-mode run (keys needed)."""
    if run.backend == "langfuse":
        from extraction_eval.backends.langfuse import LangfuseDatasetBackend, langfuse_configured

        if not langfuse_configured():
            raise ConfigError(
                f"run {run.name!r} ran in LangFuse mode: its gold is LangFuse dataset "
                f"{run.dataset!r}; set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY and "
                "LANGFUSE_BASE_URL to compare it"
            )
        backend = LangfuseDatasetBackend.from_env()
        try:
            items = backend.get_items(run.dataset, version=run.dataset_version)
        finally:
            backend.close()
    else:
        items = store.get_items(run.dataset, version=run.dataset_version)
    view = GoldView.of_run(run.config)  # the run's schema, labels and gold confidence floor
    return {item.id: view.item(item) for item in items}


def run_scoring(run: RunRecord) -> ScoringConfig:
    """The scoring config recorded with a run (defaults for fields it does not record)."""
    recorded = run.config.get("scoring") if isinstance(run.config, dict) else None
    if not isinstance(recorded, dict):
        return ScoringConfig()
    known = {f.name for f in dataclasses.fields(ScoringConfig) if f.init}
    kwargs: dict[str, Any] = {k: v for k, v in recorded.items() if k in known}
    if "inverse_pairs" in kwargs:
        kwargs["inverse_pairs"] = tuple(tuple(p) for p in kwargs["inverse_pairs"])
    if "symmetric" in kwargs:
        kwargs["symmetric"] = frozenset(kwargs["symmetric"])
    return ScoringConfig(**kwargs)


def rescored_with(run: RunRecord, **fields: Any) -> RunRecord:
    """``run`` as if it had been scored with ``fields`` (ScoringConfig fields, e.g. an alias
    table): in memory only, so every analysis that reads the run's scoring through
    :func:`run_scoring` (compare, the diff) re-scores with them; the store is not touched."""
    if not fields:
        return run
    scoring = dataclasses.replace(run_scoring(run), **fields)  # checked as any config is
    recorded = run.config.get("scoring") if isinstance(run.config, dict) else None
    updated = dict(recorded) if isinstance(recorded, dict) else {}
    for key in fields:
        value = getattr(scoring, key)
        updated[key] = [list(v) for v in value] if isinstance(value, tuple) else value
    return dataclasses.replace(run, config={**run.config, "scoring": updated})


T = TypeVar("T")
U = TypeVar("U")


def join_by_item_id(
    a: Iterator[tuple[str, T]], b: Iterator[tuple[str, U]]
) -> Iterator[tuple[str, T | None, U | None]]:
    """Merge two streams sorted by item id (the store's ``order_by="item_id"``) into
    (id, A's value or None, B's value or None): the one pairing of two runs' items, so a
    comparison, a diff and a report pair them alike and never hold a run in memory."""
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x[0] < y[0]):
            assert x is not None
            yield x[0], x[1], None
            x = next(a, None)
        elif x is None or y[0] < x[0]:
            yield y[0], None, y[1]
            y = next(b, None)
        else:
            yield x[0], x[1], y[1]
            x, y = next(a, None), next(b, None)


def in_both_runs(
    a: Iterator[tuple[str, T]],
    b: Iterator[tuple[str, U]],
    only_in_a: list[str],
    only_in_b: list[str],
) -> Iterator[tuple[str, T, U]]:
    """:func:`join_by_item_id` keeping the items both runs have; the ids of the others are
    appended to ``only_in_a`` / ``only_in_b`` (what every comparison reports)."""
    for item_id, x, y in join_by_item_id(a, b):
        if y is None:
            only_in_a.append(item_id)
        elif x is None:
            only_in_b.append(item_id)
        else:
            yield item_id, x, y


def run_config_rows(run: RunRecord) -> list[tuple[str, str]]:
    """A run's recorded parameters as (name, value) rows, in a fixed order; absent ones are
    left out. URLs and every value go through :func:`extraction_eval.redact.redact`."""
    from extraction_eval.redact import redact, safe_url

    config = run.config
    pipeline, scoring, prompt = (_section(config, key) for key in ("pipeline", "scoring", "prompt"))
    version = run.dataset_version
    rows: list[tuple[str, Any]] = [
        ("dataset", run.dataset + (f" v{version}" if version is not None else "")),
        ("provider", config.get("provider")),
        ("model", config.get("model")),
        ("temperature", config.get("temperature")),
        ("base URL", safe_url(str(pipeline["base_url"])) if pipeline.get("base_url") else None),
        ("prompt", prompt.get("name")),
        ("prompt label", prompt.get("label")),
        ("prompt version", prompt.get("version")),
        ("prompt hash", config.get("prompt_hash")),
        ("match", scoring.get("match")),
        ("threshold", scoring.get("threshold")),
        ("schema", _schema_text(config.get("schema"))),
        ("response format", _format_text(config.get("response_format_choice"))),
        ("concurrency", config.get("concurrency")),
        ("ci method", scoring.get("ci")),
    ]
    return [(name, redact(str(value))) for name, value in rows if value not in (None, "")]


def _section(config: dict[str, Any], key: str) -> dict[str, Any]:
    value = config.get(key)
    return value if isinstance(value, dict) else {}


def _schema_text(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    parts = []
    for key in ("entity_types", "relationship_types"):
        value = schema.get(key)
        if isinstance(value, list) and value:
            parts.append(f"{key}: " + ", ".join(str(v) for v in value))
    labels = schema.get("labels")
    if isinstance(labels, dict) and labels:
        parts.append("labels: " + ", ".join(f"{k}->{v}" for k, v in labels.items()))
    return "; ".join(parts) or "given"


def _format_text(choice: Any) -> str | None:
    from extraction_eval.llm.formats import FormatChoice

    parsed = FormatChoice.from_json(choice)
    return parsed.summary() if parsed is not None else None
