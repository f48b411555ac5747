"""What decides a finished run's exit, as library calls (``run-experiment`` renders them): the
cost ceiling that stopped it, the thresholds it missed, and the paired comparison with a
baseline run and its regression gate. A notebook gets the same verdict as the CLI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.analysis.compare.runs import (
    CompareOptions,
    RunComparison,
    compare_runs,
    parse_tolerances,
    tolerance_specs,
)
from extraction_eval.analysis.protocols_run import paired_run_protocols, run_protocols
from extraction_eval.analysis.stored import get_run, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue, NotFoundError
from extraction_eval.evaluators.protocols import Protocols
from extraction_eval.evaluators.protocols.paired import (
    gate_names,
    is_protocol_metric,
    protocol_gate,
)
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.runner import RunOutcome


@dataclass(frozen=True)
class Baseline:
    """The stored run a new run is compared with when it ends, and the gate's tolerances
    (metric -> allowed drop; empty: compare, no gate); ``protocol_tolerances`` gate protocol
    metrics (``semeval.strict.f1``), compared on the protocols the run is scored with."""

    run: RunRecord
    tolerances: Mapping[str, float] = field(default_factory=dict)
    protocol_tolerances: Mapping[str, float] = field(default_factory=dict)


def _protocol_tolerances(specs: Sequence[str], protocols: Sequence[str]) -> dict[str, float]:
    """The ``METRIC=TOLERANCE`` specs naming protocol metrics, checked: each must be a metric
    of a chosen protocol (its precision, recall or F1), with a tolerance in [0, 1]."""
    known = gate_names(protocols)
    out = tolerance_specs(specs)
    for name, value in out.items():
        if not protocols:
            raise InvalidValue(
                "fail_on_regression",
                f"{name} is a protocol metric: it needs {{protocol}} (e.g. semeval)",
                mentions=("protocol",),
            )
        if name not in known:
            raise InvalidValue(
                "fail_on_regression",
                f"unknown protocol metric {name!r}; with these protocols: {', '.join(known)}",
            )
        if not 0 <= value <= 1:
            raise InvalidValue(
                "fail_on_regression", f"{name}: tolerance must be between 0 and 1, got {value:g}"
            )
    return out


def find_baseline(
    name: str | None,
    specs: Sequence[str],
    dataset: str,
    *,
    protocols: Sequence[str] = (),
    store: LocalStore | None = None,
) -> Baseline | None:
    """The baseline asked for, checked before the run: the run must exist on ``dataset``
    and the ``METRIC=TOLERANCE`` specs be valid (a protocol metric one of ``protocols``');
    tolerances without a baseline are refused."""
    on_protocols = [s for s in specs if is_protocol_metric(s.partition("=")[0].strip())]
    tolerances = parse_tolerances([s for s in specs if s not in on_protocols])
    protocol_tolerances = _protocol_tolerances(on_protocols, protocols)
    if name is None:
        if tolerances or protocol_tolerances:
            raise InvalidValue(
                "fail_on_regression",
                "needs {baseline} RUN (the run to compare with)",
                mentions=("baseline",),
            )
        return None
    try:
        if store is None:
            with LocalStore() as own:  # opened for this lookup only
                run = get_run(own, name, dataset)
        else:
            run = get_run(store, name, dataset)
        return Baseline(run, tolerances, protocol_tolerances)
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
    # ``protocols`` asked for: this run's blocks; with a baseline, B against A on each
    # protocol metric (``paired``) and the protocol gate's failures (one line each)
    protocols: Protocols | None = None
    protocols_paired: dict[str, dict[str, Any]] | None = None
    protocol_failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        gate = self.baseline.gate if self.baseline is not None else None
        return bool(self.budget or self.thresholds or gate or self.protocol_failures)


def check_run(
    outcome: RunOutcome,
    config: RunConfig,
    baseline: Baseline | None = None,
    *,
    protocols: Sequence[str] = (),
    train: str | Path | None = None,
    store: LocalStore | None = None,
) -> RunChecks:
    """The checks ``run-experiment`` ends with: budget, ``fail_under`` / ``fail_over``, then
    the comparison with ``baseline`` (A = the baseline, B = this run); with ``protocols``
    (``train``: DocRED's training documents), this run's protocol blocks and, with a
    baseline, the paired protocol figures and their gate."""
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
    if store is None and (baseline is not None or protocols):
        with LocalStore() as own:  # opened for these checks: closed after them
            return check_run(outcome, config, baseline, protocols=protocols, train=train, store=own)
    checks = RunChecks(thresholds=outcome.failed_thresholds(config.fail_under, config.fail_over))
    if baseline is not None:
        assert store is not None
        checks.baseline = compare_runs(
            baseline.run,
            store.get_run_by_id(outcome.run.id),
            store=store,
            options=CompareOptions(tolerances=dict(baseline.tolerances), refuse_as="baseline"),
        )
    if protocols:
        assert store is not None
        _check_protocols(checks, store, outcome.run.id, baseline, protocols, train)
    return checks


def _check_protocols(
    checks: RunChecks,
    store: LocalStore,
    run_id: int,
    baseline: Baseline | None,
    protocols: Sequence[str],
    train: str | Path | None,
) -> None:
    """This run's protocols, and B against A on them with the same bootstrap settings as the
    baseline comparison (the baseline's interval method); the gate on the named metrics."""
    checks.protocols = run_protocols(store, store.get_run_by_id(run_id), protocols, train=train)
    if baseline is None:
        return
    base = run_protocols(store, baseline.run, protocols, train=train)
    options = CompareOptions()
    checks.protocols_paired = paired_run_protocols(
        base,
        checks.protocols,
        resamples=options.resamples,
        seed=options.seed,
        method=run_scoring(baseline.run).ci,
    )
    if baseline.protocol_tolerances:
        checks.protocol_failures = protocol_gate(
            checks.protocols_paired, baseline.protocol_tolerances
        )
