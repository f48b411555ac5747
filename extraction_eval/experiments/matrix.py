"""A configuration matrix: one run per (model, prompt label, temperature[, repeat]) cell on one
dataset version, all cells behind one concurrency budget, resumable as a whole.

Local mode puts every cell's items behind ONE pool of ``concurrency`` workers on one event
loop (``run_bounded`` over (cell, item) pairs, interleaved cell by cell), so a slow provider
holds only the workers busy with its own calls and the other cells go on. Each cell is the
ordinary run of ``run-experiment`` (the shared driver: mirrored, scored, finalized), and is
finalized as soon as its own last item ends. LangFuse mode runs the cells one after another,
each as its own experiment on the same dataset (the SDK's ``run_experiment`` owns the event
loop and the concurrency of one experiment at a time).

The cells are :mod:`extraction_eval.experiments.matrix_config`'s; the table at the end
(:func:`~extraction_eval.analysis.matrix_table.matrix_table`) is computed from the stored
runs, so a resumed matrix reports every cell, including those finished by an earlier
invocation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from extraction_eval.analysis.matrix_table import MatrixTable, matrix_table
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.budget import (
    Budget,
    CostEstimate,
    check_estimate,
    sum_estimates,
)
from extraction_eval.experiments.config import RunConfig, git_state, package_versions
from extraction_eval.experiments.driver import (
    STOPPED_BUDGET,
    Driver,
    ProgressHook,
    close_pipeline,
    gc_frozen,
)
from extraction_eval.experiments.matrix_config import NOT_STARTED, Cell, CellOutcome, MatrixConfig
from extraction_eval.experiments.prepare import PreparedRun, discard_if_empty, prepare
from extraction_eval.experiments.run import uses_langfuse
from extraction_eval.experiments.runner import run_bounded
from extraction_eval.types import DatasetItem, ItemResult


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

    def budget_stop(self) -> InvalidValue | None:
        """When the matrix's cost ceiling left cells with items not run: what to say (the
        fields named, the CLI shows its flags); None otherwise."""
        stopped = [c.cell.name for c in self.cells if c.run.status == STOPPED_BUDGET]
        if not stopped:
            return None
        return InvalidValue(
            "max_cost",
            f"{self.config.base.max_cost:g} reached; {len(stopped)} cells have items not run"
            " (continue with {resume} and a higher {max_cost})",
            mentions=("resume", "max_cost"),
        )


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
                dataset_schema=info.schema,
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
    from extraction_eval.backends.langfuse import (
        close_client,
        verify_timeout_s,
    )
    from extraction_eval.experiments import langfuse_mode as lfm
    from extraction_eval.experiments.driver import NoProgress

    progress = progress or NoProgress()
    matrix = matrix.named()
    base = matrix.base
    cells = matrix.cells()
    _check_names(store, matrix, cells)
    timeout_s = verify_timeout_s() if base.verify else 0.0
    lf, server_warnings = lfm.connect_for_run()  # keys, server, version; before any spend
    try:
        dataset = lfm.load_bounded(lf, base.dataset, base.dataset_version)  # read bounds
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
                    warnings=server_warnings,
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
