"""What decides a finished run's exit, as library calls (``run-experiment`` renders them): the
cost ceiling that stopped it, the thresholds it missed, and the paired comparison with a
baseline run and its regression gate. A notebook gets the same verdict as the CLI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from extraction_eval.analysis.compare.runs import (
    CompareOptions,
    RunComparison,
    compare_runs,
    parse_tolerances,
)
from extraction_eval.analysis.stored import get_run
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue, NotFoundError
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.runner import RunOutcome


@dataclass(frozen=True)
class Baseline:
    """The stored run a new run is compared with when it ends, and the gate's tolerances
    (metric -> allowed drop; empty: compare, no gate)."""

    run: RunRecord
    tolerances: Mapping[str, float] = field(default_factory=dict)


def find_baseline(
    name: str | None, specs: Sequence[str], dataset: str, *, store: LocalStore | None = None
) -> Baseline | None:
    """The baseline asked for, checked before the run: the run must exist on ``dataset``
    and the ``METRIC=TOLERANCE`` specs be valid; tolerances without a baseline are refused."""
    tolerances = parse_tolerances(list(specs))
    if name is None:
        if tolerances:
            raise InvalidValue(
                "fail_on_regression",
                "needs {baseline} RUN (the run to compare with)",
                mentions=("baseline",),
            )
        return None
    try:
        return Baseline(get_run(store or LocalStore(), name, dataset), tolerances)
    except NotFoundError as exc:
        raise InvalidValue("baseline", f"names no stored run: {exc}") from None


@dataclass
class RunChecks:
    """A finished run's verdict. ``budget``: the cost ceiling stopped it (the other checks
    are then not made: the run is incomplete); ``thresholds``: the floors and ceilings it
    missed; ``baseline``: the paired comparison with the baseline (its ``gate`` set when
    tolerances were given)."""

    budget: InvalidValue | None = None
    thresholds: list[str] = field(default_factory=list)
    baseline: RunComparison | None = None

    @property
    def failed(self) -> bool:
        gate = self.baseline.gate if self.baseline is not None else None
        return bool(self.budget or self.thresholds or gate)


def check_run(
    outcome: RunOutcome,
    config: RunConfig,
    baseline: Baseline | None = None,
    *,
    store: LocalStore | None = None,
) -> RunChecks:
    """The checks ``run-experiment`` ends with: budget, ``fail_under`` / ``fail_over``, then
    the comparison with ``baseline`` (A = the baseline, B = this run)."""
    budget = outcome.budget or {}
    if outcome.stopped_by_budget:
        return RunChecks(
            budget=InvalidValue(
                "max_cost",
                f"{budget['max_cost_usd']:g} reached; {budget['not_run']} items not run"
                " (continue with {resume} and a higher {max_cost})",
                mentions=("resume", "max_cost"),
            )
        )
    checks = RunChecks(thresholds=outcome.failed_thresholds(config.fail_under, config.fail_over))
    if baseline is not None:
        store = store or LocalStore()
        checks.baseline = compare_runs(
            baseline.run,
            store.get_run_by_id(outcome.run.id),
            store=store,
            options=CompareOptions(tolerances=dict(baseline.tolerances), refuse_as="baseline"),
        )
    return checks
