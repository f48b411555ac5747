"""A configuration matrix: one run per (model, prompt label, temperature[, repeat]) cell on one
dataset version, all cells behind one concurrency budget, resumable as a whole.

Local mode puts every cell's items behind ONE pool of ``concurrency`` workers on one event
loop (``run_bounded`` over (cell, item) pairs, interleaved cell by cell), so a slow provider
holds only the workers busy with its own calls and the other cells go on. Each cell is the
ordinary run of ``run-experiment`` (the shared driver: mirrored, scored, finalized), and is
finalized as soon as its own last item ends. LangFuse mode runs the cells one after another,
each as its own experiment on the same dataset (the SDK's ``run_experiment`` owns the event
loop and the concurrency of one experiment at a time).

The table at the end (:func:`matrix_table`) is computed from the stored runs, so a resumed
matrix reports every cell, including those finished by an earlier invocation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import ContextIndex, ScoringConfig
from extraction_eval.evaluators.clustered import RepeatVariance, repeat_variance
from extraction_eval.evaluators.multiple import CORRECTIONS, Correction, adjust_named
from extraction_eval.evaluators.paired import COLUMNS as PAIRED_COLUMNS
from extraction_eval.evaluators.paired import WIDTH as PAIRED_WIDTH
from extraction_eval.evaluators.paired import (
    PairedComparison,
    item_row,
    paired_compare_counts,
)
from extraction_eval.evaluators.repeats import (
    Agreement,
    Spread,
    best_cells,
    canonical_extraction,
    item_agreement,
    spread,
)
from extraction_eval.experiments.budget import (
    Budget,
    CostEstimate,
    check_estimate,
    sum_estimates,
)
from extraction_eval.experiments.config import RunConfig, git_state, package_versions
from extraction_eval.experiments.driver import Driver, ProgressHook, close_pipeline, gc_frozen
from extraction_eval.experiments.prepare import PreparedRun, discard_if_empty, prepare
from extraction_eval.experiments.run import uses_langfuse
from extraction_eval.experiments.runner import rescore, run_bounded
from extraction_eval.types import DatasetItem, ItemResult
from extraction_eval.validation import check_choice, check_int, check_number, check_text

# The matrix table's metrics: headline scores (higher is better, with their CIs), then the
# run's cost, latency and failures (lower is better).
HEADLINE = ("entity_f1", "entity_typed_f1", "relationship_f1")
LOWER_IS_BETTER = ("cost_usd", "latency_p50_ms", "error_rate")
METRICS = HEADLINE + LOWER_IS_BETTER


def temperature_tag(temperature: float) -> str:
    """``t0``, ``t0.7``, ``t1``: the shortest spelling that reads back as the same float."""
    text = repr(float(temperature))
    return "t" + (text[:-2] if text.endswith(".0") else text)


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: its name and parameters, and the full run config."""

    name: str
    model: str
    prompt_label: str | None
    temperature: float
    repeat: int | None
    config: RunConfig

    @property
    def group(self) -> str:
        """The cell without its repeat index: what repeats are compared within."""
        return self.name.rsplit("/", 1)[0] if self.repeat is not None else self.name

    def params(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt_label": self.prompt_label,
            "temperature": self.temperature,
            "repeat": self.repeat,
        }


@dataclass(frozen=True)
class MatrixConfig:
    """The axes of a matrix and what every cell shares (``base``: dataset, scoring,
    concurrency, limit, backend, timeout, prices...; its name, model, prompt label and
    temperature are replaced per cell).

    ``name`` is the prefix of every cell's run name, ``{name}/{model}/{label}/t{temp}[/r{k}]``
    (label ``bundled`` when no label is asked for). ``repeats`` > 1 runs each cell that many
    times, differing only in the repeat index of the response-cache key.
    """

    models: tuple[str, ...]
    prompt_labels: tuple[str | None, ...] = (None,)
    temperatures: tuple[float, ...] = (0.0,)
    repeats: int = 1
    name: str | None = None
    base: RunConfig = field(default_factory=RunConfig)
    # how the cells × metrics comparisons with the best cell are corrected (multiple.py)
    correction: Correction = "holm"

    def __post_init__(self) -> None:
        """Refuse axes that cannot make a matrix, before anything is read or written."""
        if not self.models:
            raise InvalidValue("model", "is needed at least once (one per model of the matrix)")
        for model in self.models:
            check_text("model", model)
        for label in self.prompt_labels:
            if label is not None:
                check_text("prompt_label", label)
        if not self.prompt_labels:
            raise InvalidValue("prompt_label", "needs at least one value (or none given at all)")
        if not self.temperatures:
            raise InvalidValue("temperature", "needs at least one value")
        for temperature in self.temperatures:
            check_number("temperature", temperature, minimum=0.0)
        _no_duplicates("model", self.models)
        _no_duplicates("prompt_label", self.prompt_labels)
        _no_duplicates("temperature", [float(t) for t in self.temperatures])
        check_int("repeats", self.repeats, minimum=1)
        if self.name is not None:
            check_text("name", self.name)
        if self.base.name is not None:
            raise InvalidValue("name", "is the matrix's prefix: set MatrixConfig.name")
        if self.base.retry_errors:
            raise InvalidValue("retry_errors", "is not supported by a matrix (use resume)")
        if self.base.resume and self.name is None:
            raise InvalidValue(
                "resume", "needs the matrix's {name} (the prefix of its runs)", mentions=("name",)
            )
        _distinct_names(self.models, self.prompt_labels)
        check_choice("correction", self.correction, CORRECTIONS)

    def named(self) -> MatrixConfig:
        """This config with a prefix (``matrix-<timestamp>`` when none was given)."""
        if self.name is not None:
            return self
        return replace(self, name=f"matrix-{datetime.now(UTC):%Y%m%dT%H%M%SZ}")

    def cells(self) -> list[Cell]:
        """Every cell, in axis order (model, label, temperature, repeat)."""
        prefix = self.named().name
        repeats: list[int | None] = (
            [None] if self.repeats == 1 else list(range(1, self.repeats + 1))
        )
        out = []
        for model in self.models:
            for label in self.prompt_labels:
                for temperature in self.temperatures:
                    for repeat in repeats:
                        parts = [prefix, model, label or "bundled", temperature_tag(temperature)]
                        if repeat is not None:
                            parts.append(f"r{repeat}")
                        pipeline = replace(
                            self.base.pipeline,
                            model=model,
                            prompt_label=label,
                            temperature=float(temperature),
                            repeat=repeat or 0,  # 0: no repeat (the cache key as always)
                        )
                        name = "/".join(str(p) for p in parts)
                        config = replace(self.base, name=name, pipeline=pipeline)
                        out.append(Cell(name, model, label, float(temperature), repeat, config))
        return out


def _distinct_names(models: Sequence[str], labels: Sequence[str | None]) -> None:
    """Two cells must not share a run name: no label and a label ``bundled``, or a ``/`` in a
    model or label (``a/x`` + ``y`` vs ``a`` + ``x/y``), would make them one run."""
    seen: dict[str, tuple[str, str | None]] = {}
    for model in models:
        for label in labels:
            key = f"{model}/{label or 'bundled'}"
            if key in seen:
                other = seen[key]
                raise InvalidValue(
                    "prompt_label",
                    f"model {model!r} with label {label!r} and model {other[0]!r} with label"
                    f" {other[1]!r} would give two cells the same run name ({key!r})",
                )
            seen[key] = (model, label)


def _no_duplicates(field_name: str, values: Sequence[object]) -> None:
    seen: set[object] = set()
    for value in values:
        if value in seen:
            raise InvalidValue(field_name, f"{value!r} is given twice")
        seen.add(value)


# --- outcome and table ------------------------------------------------------------------------


@dataclass
class CellOutcome:
    """One cell after the matrix: its stored run (with its summary) and what this invocation
    did with it (``ran`` items; ``skipped``: it was finished already and left alone)."""

    cell: Cell
    run: RunRecord
    ran: int = 0
    skipped: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        return self.run.summary or {}


@dataclass
class CellRow:
    """A matrix table row: the run's headline values with their CIs, cost, latency, errors."""

    name: str
    values: dict[str, float | None]  # METRICS
    ci: dict[str, tuple[float, float] | None]  # HEADLINE -> (low, high)
    items: int
    expected_items: int
    errors: int
    status: str


@dataclass
class RepeatGroup:
    """A cell's K repeats: run-to-run mean and std of each metric, and per-item agreement."""

    name: str
    runs: list[str]
    spread: dict[str, Spread]
    agreement: Agreement
    # headline metric -> pooled value, cluster-bootstrap CI, item vs run-to-run variance
    variance: dict[str, RepeatVariance] = field(default_factory=dict)


@dataclass
class MatrixTable:
    rows: list[CellRow]
    best: dict[str, tuple[str, ...]]  # metric -> the best row name(s)
    repeats: list[RepeatGroup]
    # headline metric -> the rows NOT significantly different from the best one (paired
    # bootstrap CI of Δ = row − best contains 0; the best rows themselves not listed)
    similar: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # each (metric, cell) comparison with the best: Δ, CI, p raw and adjusted, verdict
    tests: list[dict[str, Any]] = field(default_factory=list)
    correction: Correction = "holm"

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [
                {
                    "name": r.name,
                    "values": r.values,
                    "ci": {k: list(v) if v else None for k, v in r.ci.items()},
                    "items": r.items,
                    "expected_items": r.expected_items,
                    "errors": r.errors,
                    "status": r.status,
                }
                for r in self.rows
            ],
            "best": {k: list(v) for k, v in self.best.items()},
            "not_significantly_different": {k: list(v) for k, v in self.similar.items()},
            "comparisons_with_best": {"correction": self.correction, "tests": self.tests},
            "repeats": [
                {
                    "name": g.name,
                    "runs": g.runs,
                    "spread": {k: vars(s) for k, s in g.spread.items()},
                    "agreement": g.agreement.to_json(),
                    "variance": {k: v.to_json() for k, v in g.variance.items()},
                }
                for g in self.repeats
            ],
        }


@dataclass
class MatrixOutcome:
    config: MatrixConfig
    cells: list[CellOutcome]
    table: MatrixTable
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # LangFuse read-back failures

    @property
    def ran(self) -> int:
        return sum(c.ran for c in self.cells)


def cell_row(name: str, run: RunRecord) -> CellRow:
    summary = run.summary or {}
    values_in: Mapping[str, Any] = summary.get("values") or {}
    values: dict[str, float | None] = {m: _num(values_in.get(m)) for m in HEADLINE}
    values["cost_usd"] = _num(summary.get("cost_usd"))
    values["latency_p50_ms"] = _num(summary.get("latency_p50_ms"))
    values["error_rate"] = _num(values_in.get("error_rate"))
    ci: dict[str, tuple[float, float] | None] = {}
    for metric in HEADLINE:
        low, high = (
            _num(values_in.get(f"{metric}_ci_low")),
            _num(values_in.get(f"{metric}_ci_high")),
        )
        ci[metric] = (low, high) if low is not None and high is not None else None
    return CellRow(
        name=name,
        values=values,
        ci=ci,
        items=int(summary.get("items") or 0),
        expected_items=int(summary.get("expected_items") or 0),
        errors=int(summary.get("errors") or 0),
        status=run.status,
    )


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def matrix_table(
    store: LocalStore,
    cells: Sequence[CellOutcome],
    items: Sequence[DatasetItem],
    scoring: ScoringConfig | None = None,
    correction: Correction = "holm",
) -> MatrixTable:
    """The table of every cell, the best cell per metric, the cells not significantly
    different from the best (headline metrics), and each repeat group's spread and per-item
    agreement (read from the stored results)."""
    rows = [cell_row(c.cell.name, c.run) for c in cells]
    best = best_cells({r.name: r.values for r in rows}, METRICS, lower_is_better=LOWER_IS_BETTER)
    similar, tests = not_significantly_different(
        store, cells, items, best, scoring or ScoringConfig(), correction
    )
    groups: dict[str, list[CellOutcome]] = {}
    for c in cells:
        if c.cell.repeat is not None:
            groups.setdefault(c.cell.group, []).append(c)
    ids = [item.id for item in items]
    by_name = {r.name: r for r in rows}
    repeats = []
    for group, members in groups.items():
        outputs = [_canonical_outputs(_stored(store, m.run, ids)) for m in members]
        repeats.append(
            RepeatGroup(
                name=group,
                runs=[m.cell.name for m in members],
                spread={
                    metric: spread(by_name[m.cell.name].values[metric] for m in members)
                    for metric in METRICS
                },
                agreement=item_agreement(outputs),
                variance=_repeat_variance(store, members, items, scoring or ScoringConfig()),
            )
        )
    return MatrixTable(rows, best, repeats, similar, tests, correction)


def not_significantly_different(
    store: LocalStore,
    cells: Sequence[CellOutcome],
    items: Sequence[DatasetItem],
    best: Mapping[str, tuple[str, ...]],
    scoring: ScoringConfig,
    correction: Correction = "holm",
) -> tuple[dict[str, tuple[str, ...]], list[dict[str, Any]]]:
    """Per headline metric, the cells not significantly different from the best: the paired
    bootstrap CI of Δ (cell − best) contains 0, or the comparison's p-value, adjusted over
    every (metric, cell) comparison of the matrix (``correction``), is not below α, or the
    evidence is insufficient (too few shared items). On the items both runs have a result,
    each bootstrap replicate draws the same items for both (``evaluators/paired.py``;
    ``scoring``'s resamples, seed, confidence and CI method). With several tied best cells,
    the first (by name) is the reference. One comparison per (reference, cell) pair serves
    every metric. Also returns each comparison (Δ, CI, raw and adjusted p, verdict)."""
    by_name = {c.cell.name: c for c in cells}
    context = ContextIndex({item.id: item.text for item in items})
    rows: dict[str, tuple[NDArray[np.int64], NDArray[np.bool_]]] = {}

    def counts(name: str) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        if name not in rows:
            rows[name] = _count_rows(store, by_name[name].run, items, scoring, context)
        return rows[name]

    compared: dict[tuple[str, str], PairedComparison] = {}
    tests: list[dict[str, Any]] = []
    for metric in HEADLINE:
        if not best.get(metric) or scoring.resamples == 0:
            continue
        reference = best[metric][0]
        ref_rows, ref_present = counts(reference)
        for name in by_name:
            if name in best[metric]:
                continue
            key = (reference, name)
            if key not in compared:
                other, present = counts(name)
                both = ref_present & present
                compared[key] = paired_compare_counts(
                    ref_rows[both],
                    other[both],
                    resamples=scoring.resamples,
                    seed=scoring.seed,
                    confidence=scoring.confidence,
                    method=scoring.ci,
                    correction="none",  # corrected below, over the whole matrix
                )
            m = compared[key].metric(metric)
            tests.append(
                {
                    "metric": metric,
                    "cell": name,
                    "best": reference,
                    "items": compared[key].items,
                    "delta": m.delta,
                    "ci": None if m.ci_low is None else [m.ci_low, m.ci_high],
                    "test": "paired bootstrap",
                    "p_value": m.p_value,
                    "verdict_uncorrected": m.verdict,
                }
            )
    adjusted = adjust_named({str(i): t["p_value"] for i, t in enumerate(tests)}, correction)
    alpha = 1.0 - scoring.confidence
    out: dict[str, tuple[str, ...]] = {metric: () for metric in HEADLINE}
    for i, t in enumerate(tests):
        t["p_adjusted"] = adjusted[str(i)]
        verdict = t["verdict_uncorrected"]
        p_adj = t["p_adjusted"]
        # as MetricComparison.verdict: a p the correction raised to α or above drops the claim
        kept = correction == "none" or p_adj is None or p_adj < alpha
        if verdict in ("improved", "regressed") and not kept:
            verdict = "no significant change"  # a difference the correction does not keep
        t["verdict"] = verdict
        if t["verdict"] not in ("improved", "regressed"):
            out[t["metric"]] += (t["cell"],)
    return out, tests


def _repeat_variance(
    store: LocalStore,
    members: Sequence[CellOutcome],
    items: Sequence[DatasetItem],
    scoring: ScoringConfig,
) -> dict[str, RepeatVariance]:
    """Each headline metric of a repeated cell pooled over its K runs, on the items every run
    has a result for: cluster-bootstrap CI by item, and the item vs run-to-run split."""
    context = ContextIndex({item.id: item.text for item in items})
    rows = [_count_rows(store, m.run, items, scoring, context) for m in members]
    present = np.logical_and.reduce([p for _, p in rows])
    if not present.any() or scoring.resamples == 0:
        return {}
    out = {}
    for metric, group in (("entity_f1", "entity"), ("entity_typed_f1", "entity_typed"),
                          ("relationship_f1", "relationship")):  # fmt: skip
        cols = [PAIRED_COLUMNS.index(f"{group}_{c}") for c in ("tp", "fp", "fn")]
        out[metric] = repeat_variance(
            [r[present][:, cols] for r, _ in rows],
            "f1",
            resamples=scoring.resamples,
            seed=scoring.seed,
            confidence=scoring.confidence,
            method=scoring.ci,
        )
    return out


def _count_rows(
    store: LocalStore,
    run: RunRecord,
    items: Sequence[DatasetItem],
    scoring: ScoringConfig,
    context: ContextIndex,
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """The run's per-item count rows (``paired.item_row``) in dataset order, re-scored from
    the stored results as ``finalize`` does (against the gold the run trusted, with
    ``--min-gold-confidence``), and which items have a result."""
    trust = run.config.get("min_gold_confidence")
    trusted = float(trust) if isinstance(trust, (int, float)) else None
    index = {item.id: i for i, item in enumerate(items)}
    matrix = np.zeros((len(items), PAIRED_WIDTH), dtype=np.int64)
    present = np.zeros(len(items), dtype=np.bool_)
    for result in _stored(store, run, [item.id for item in items]):
        i = index[result.item_id]
        item = items[i]
        score = rescore(item, result.output, scoring, context, trusted)
        matrix[i] = item_row(score, schema_failure=result.error_kind == "schema")
        present[i] = True
    return matrix, present


def _stored(store: LocalStore, run: RunRecord, ids: Sequence[str]) -> Iterator[ItemResult]:
    """The run's stored results; none for a cell that never started (its run was deleted)."""
    if run.status == NOT_STARTED:
        return iter(())
    return store.iter_item_results(run.id, ids)


def _canonical_outputs(results: Any) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for result in results:
        assert isinstance(result, ItemResult)
        out[result.item_id] = canonical_extraction(result.output) if result.ok else None
    return out


# --- running ----------------------------------------------------------------------------------


def _matrix_record(
    matrix: MatrixConfig, cell: Cell, shared: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the run record (and, in LangFuse mode, the experiment metadata) says of the
    matrix: its prefix and the cell's parameters; plus ``shared`` (see :func:`_shared_record`)."""
    matrix_part = {
        "name": matrix.name,
        "cell": cell.params(),
        "repeats": matrix.repeats,
        "max_cost": matrix.base.max_cost,  # one ceiling for the whole matrix
    }
    return {**(shared or {}), "matrix": matrix_part}


def _shared_record() -> dict[str, Any]:
    """The parts of a run record that are the same for every cell, read once per matrix:
    the package versions and the git state (two ``git`` subprocesses per run otherwise)."""
    return {"packages": package_versions(), "git": git_state()}


def _check_names(store: LocalStore, matrix: MatrixConfig, cells: Sequence[Cell]) -> None:
    """A cell whose run exists needs ``resume``: refused before any cell is created."""
    if matrix.base.resume:
        return
    for cell in cells:
        if store.get_run(cell.name, matrix.base.dataset) is not None:
            raise InvalidValue(
                "resume",
                f"is needed to continue matrix {matrix.name!r}: run {cell.name!r} on dataset"
                f" {matrix.base.dataset!r} exists already (or choose another {{name}})",
                mentions=("name",),
            )


def _finished(store: LocalStore, cell: Cell, items: Sequence[DatasetItem]) -> RunRecord | None:
    """The cell's run when it is finished with a result for every item (left alone)."""
    run = store.get_run(cell.name, cell.config.dataset)
    if run is None or run.status != "finished" or run.summary is None:
        return None
    return run if store.count_results(run.id) >= len(items) else None


class _Forward:
    """A cell's progress: the matrix shows one bar over all cells (started once)."""

    def __init__(self, progress: ProgressHook) -> None:
        self._progress = progress

    def start(self, *, total: int, done: int) -> None:
        return None

    def advance(self, result: ItemResult) -> None:
        self._progress.advance(result)


def _limited(base: RunConfig, items: Sequence[DatasetItem]) -> list[DatasetItem]:
    """The items every cell runs: the first ``limit``, then this process's ``shard``."""
    out = list(items)[: base.limit] if base.limit is not None else list(items)
    return base.shard.select(out) if base.shard is not None else out


async def arun_matrix_local(
    matrix: MatrixConfig,
    *,
    store: LocalStore | None = None,
    progress: ProgressHook | None = None,
) -> MatrixOutcome:
    """Local mode (await this from a notebook); see the module docstring."""
    from extraction_eval.experiments.driver import NoProgress

    store = store or LocalStore()
    progress = progress or NoProgress()
    matrix = matrix.named()
    base = matrix.base
    cells = matrix.cells()
    _check_names(store, matrix, cells)
    info = store.get_dataset(base.dataset)  # the version is resolved once, for every cell
    version = base.dataset_version or info.version
    items = store.get_items(base.dataset, version=base.dataset_version)
    limited = _limited(base, items)
    outcomes: dict[str, CellOutcome] = {}
    preps: list[tuple[Cell, PreparedRun]] = []
    shared = _shared_record()
    providers: dict[tuple[str, ...], Any] = {}  # one client per model, shared by its cells
    try:
        for cell in cells:
            done = _finished(store, cell, limited) if base.resume else None
            if done is not None:
                outcomes[cell.name] = CellOutcome(cell, done, skipped=True)
                continue
            key = _provider_key(cell)
            prep = prepare(
                replace(cell.config, max_cost=None),  # the ceiling is the matrix's: below
                store,
                items=items,
                dataset_version=version,
                extra_record=_matrix_record(matrix, cell, shared),
                provider=providers.get(key),
            )
            provider = getattr(prep.runner.pipeline, "provider", None)
            if provider is not None:
                providers.setdefault(key, provider)
            preps.append((cell, prep))
        share_budget(base.max_cost, [prep for _, prep in preps])
    except BaseException:  # a refused cell: the runs this invocation created go again
        for _, prep in preps:
            discard_if_empty(store, prep)
        await _close_pipelines([prep for _, prep in preps])
        raise
    drivers = [(cell, Driver(prep, store, progress=_Forward(progress))) for cell, prep in preps]
    progress.start(
        total=sum(len(p.item_ids) for _, p in preps),
        done=sum(len(p.item_ids) - len(p.todo_ids) for _, p in preps),
    )
    await _run_cells([d for _, d in drivers], base.concurrency)
    for cell, driver in drivers:
        if store.get_run(cell.name, base.dataset) is None:  # the ceiling came first: deleted
            outcomes[cell.name] = _not_started(cell, driver.prep)
            continue
        outcome = driver.outcome()
        outcomes[cell.name] = CellOutcome(
            cell, outcome.run, ran=outcome.ran, warnings=outcome.warnings
        )
    ordered = [outcomes[cell.name] for cell in cells]
    warnings = [f"{c.cell.name}: {w}" for c in ordered for w in c.warnings]
    table = matrix_table(store, ordered, limited, base.scoring, matrix.correction)
    return MatrixOutcome(matrix, ordered, table, warnings)


NOT_STARTED = "not started: budget"


def _not_started(cell: Cell, prep: PreparedRun) -> CellOutcome:
    """A cell none of whose items started before the matrix's ceiling was reached: its run
    was deleted (as any run that recorded nothing); ``--resume`` with a higher ceiling runs
    it."""
    run = replace(prep.run, status=NOT_STARTED, summary=None)
    return CellOutcome(cell, run, warnings=[f"{NOT_STARTED}; resume it with a higher ceiling"])


def share_budget(max_cost: float | None, preps: Sequence[PreparedRun]) -> Budget | None:
    """``--max-cost`` for the whole matrix: the cells' estimates summed (plus what resumed
    cells spent already) are refused above it before any call (``InvalidValue``), and one
    ceiling is shared by every cell while they run (no new item of any cell starts once the
    matrix's spend reaches it)."""
    if max_cost is None:
        return None
    spent = sum(float((p.run.summary or {}).get("cost_usd") or 0.0) for p in preps if not p.created)
    total = sum_estimates(p.estimate for p in preps if p.estimate is not None)
    check_estimate(max_cost, total, spent)
    budget = Budget(max_cost, spent)
    for prep in preps:
        prep.budget = budget
    return budget


def estimate_matrix(
    matrix: MatrixConfig, *, store: LocalStore | None = None
) -> list[tuple[Cell, CostEstimate]]:
    """Each cell's cost estimate (``--dry-run``; sum them with ``sum_estimates``): the same
    setup checks as a run, cells finished earlier left out on ``resume``; no model call,
    nothing created or changed."""
    from extraction_eval.experiments.run import estimate_run

    store = store or LocalStore()
    matrix = matrix.named()
    cells = matrix.cells()
    _check_names(store, matrix, cells)
    out = []
    for cell in cells:
        config = replace(cell.config, max_cost=None)
        if matrix.base.resume and not uses_langfuse(config):
            items = _limited(
                config, store.get_items(config.dataset, version=config.dataset_version)
            )
            if _finished(store, cell, items) is not None:
                continue
        out.append((cell, estimate_run(config, store=store)))
    return out


def _provider_key(cell: Cell) -> tuple[str, ...]:
    """Cells with equal keys can share one provider (its client and connection pool): the
    provider depends only on these (``llm/registry.make_provider``)."""
    p = cell.config.pipeline
    return (p.model, p.base_url or "", json.dumps(p.extra, sort_keys=True, default=str))


async def _close_pipelines(preps: Sequence[PreparedRun]) -> None:
    """Close every pipeline once per distinct provider (cells may share one)."""
    closed: set[int] = set()
    for prep in preps:
        provider = getattr(prep.runner.pipeline, "provider", None)
        if provider is not None:
            if id(provider) in closed:
                continue
            closed.add(id(provider))
        await close_pipeline(prep.runner.pipeline)


def interleave(todos: Sequence[Sequence[DatasetItem]]) -> list[tuple[int, DatasetItem]]:
    """(cell index, item) pairs, one item of each cell in turn: every cell progresses from
    the start, and a slow cell's calls are spread over the whole queue."""
    out: list[tuple[int, DatasetItem]] = []
    longest = max((len(t) for t in todos), default=0)
    for position in range(longest):
        for index, todo in enumerate(todos):
            if position < len(todo):
                out.append((index, todo[position]))
    return out


async def _run_cells(drivers: Sequence[Driver], concurrency: int) -> None:
    """Every cell's items through one pool of ``concurrency`` workers. Each cell is closed
    (finalized) when its own last item is recorded; on an interruption the cells still open
    are finalized as interrupted (or deleted when they recorded nothing) and it goes on."""
    with gc_frozen():  # once for all cells: a cell that closes early must not thaw the rest
        await _run_cell_pool(drivers, concurrency)


async def _run_cell_pool(drivers: Sequence[Driver], concurrency: int) -> None:
    remaining = [len(d.prep.todo_ids) for d in drivers]
    open_cells = {i: d.running() for i, d in enumerate(drivers)}
    for cm in open_cells.values():
        cm.__enter__()
    for index in [i for i, left in enumerate(remaining) if left == 0]:
        open_cells.pop(index).__exit__(None, None, None)

    async def run_unit(unit: tuple[int, DatasetItem]) -> tuple[int, ItemResult]:
        index, item = unit
        return index, await drivers[index].run_item(item)

    def record(done: tuple[int, ItemResult]) -> None:
        index, result = done
        drivers[index].record(result)
        remaining[index] -= 1
        if remaining[index] == 0:
            open_cells.pop(index).__exit__(None, None, None)

    units = interleave([list(d.prep.iter_todo()) for d in drivers])  # the matrix holds them
    try:
        may_start = drivers[0].may_start if drivers and drivers[0].prep.budget else None
        await run_bounded(
            units, run_unit, concurrency=concurrency, on_result=record, may_start=may_start
        )
    except BaseException as exc:
        for index in sorted(open_cells):
            try:
                open_cells[index].__exit__(type(exc), exc, exc.__traceback__)
            except BaseException as again:
                if again is not exc:
                    raise
        open_cells.clear()
        raise
    finally:
        await _close_pipelines([d.prep for d in drivers])
    for index in sorted(open_cells):  # cannot happen: every unit was recorded
        open_cells.pop(index).__exit__(None, None, None)


def run_matrix(
    matrix: MatrixConfig,
    *,
    store: LocalStore | None = None,
    progress: ProgressHook | None = None,
) -> MatrixOutcome:
    """Run every cell to the end (blocking). LangFuse mode when keys are configured (each
    cell an experiment on the same dataset), else local mode with one shared pool."""
    if uses_langfuse(matrix.base):
        return run_matrix_langfuse(matrix, store=store or LocalStore(), progress=progress)
    return asyncio.run(arun_matrix_local(matrix, store=store, progress=progress))


def run_matrix_langfuse(
    matrix: MatrixConfig, *, store: LocalStore, progress: ProgressHook | None = None
) -> MatrixOutcome:
    """LangFuse mode: every cell an experiment on the same dataset (loaded once), with the
    cell's parameters in the experiment metadata. Every cell is prepared (prompt, pipeline,
    run record) before the first one runs, so a refused cell costs nothing; then the cells
    run one after another. A cell whose read-back misses data is reported in ``problems``
    and the next cell goes on."""
    from extraction_eval.backends.langfuse import LangfuseDatasetBackend, close_client, connect
    from extraction_eval.experiments import langfuse_mode as lfm
    from extraction_eval.experiments.driver import NoProgress

    progress = progress or NoProgress()
    matrix = matrix.named()
    base = matrix.base
    cells = matrix.cells()
    _check_names(store, matrix, cells)
    timeout_s = lfm.verify_timeout_s() if base.verify else 0.0
    lfm.install_log_filter()
    lf = connect()  # checks the keys and the server before anything is spent
    try:
        dataset = LangfuseDatasetBackend(lf).load_for_run(
            base.dataset, version=base.dataset_version
        )
        limited = _limited(base, dataset.items)
        outcomes: dict[str, CellOutcome] = {}
        preps: list[tuple[Cell, PreparedRun]] = []
        shared = _shared_record()
        try:
            for cell in cells:
                done = _finished(store, cell, limited) if base.resume else None
                if done is not None:
                    outcomes[cell.name] = CellOutcome(cell, done, skipped=True)
                    continue
                prep = lfm.prepare_langfuse_run(
                    lf,
                    replace(cell.config, max_cost=None),  # the matrix's ceiling: below
                    store,
                    dataset,
                    extra_record=_matrix_record(matrix, cell, shared),
                )
                preps.append((cell, prep))
            share_budget(base.max_cost, [prep for _, prep in preps])
        except BaseException:
            for _, prep in preps:
                discard_if_empty(store, prep)
            raise
        progress.start(
            total=sum(len(p.item_ids) for _, p in preps),
            done=sum(len(p.item_ids) - len(p.todo_ids) for _, p in preps),
        )
        problems: list[str] = []
        for position, (cell, prep) in enumerate(preps):
            budget = prep.budget
            if budget is not None and budget.exhausted:  # the ceiling came first
                budget.held_back += 1
                discard_if_empty(store, prep)
                outcomes[cell.name] = _not_started(cell, prep)
                continue
            try:
                outcome = lfm.run_prepared(lf, prep, store, dataset, _Forward(progress), timeout_s)
            except lfm.VerificationError as exc:
                outcome = exc.outcome
                problems.append(f"{cell.name}: {exc}")
            except BaseException:  # cells not started yet leave nothing behind
                for _, later in preps[position + 1 :]:
                    discard_if_empty(store, later)
                raise
            outcomes[cell.name] = CellOutcome(
                cell, outcome.run, ran=outcome.ran, warnings=outcome.warnings
            )
    finally:
        close_client(lf)  # delivers queued spans and scores, also on Ctrl-C
    ordered = [outcomes[cell.name] for cell in cells]
    warnings = [f"{c.cell.name}: {w}" for c in ordered for w in c.warnings]
    table = matrix_table(store, ordered, limited, base.scoring, matrix.correction)
    return MatrixOutcome(matrix, ordered, table, warnings, problems)
