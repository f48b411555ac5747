"""Paired comparison of two stored runs: pair items by id, re-score both runs' stored outputs
against the gold of the run's dataset version, and hand the count rows to
:mod:`extraction_eval.evaluators.stats.paired_delta` (bootstrap CI of Δ, McNemar, per type,
the gate). Two entry points: :func:`compare_runs` (the figures) and :func:`compare_and_diff`
(the figures and the item diff, from one pass).

Both runs count under one scoring config (A's), or each under its own with
``CompareOptions.as_recorded`` (to compare scoring choices: a change of match mode shows).
The runner stores each result's count row (and the diff's view of its alignment) tagged
with what it was scored with; a local run's rows scored as this comparison scores are used
as stored, the others (rows stored before
``m008_result_counts``, other settings, another dataset version) are re-scored: the same
figures either way, faster. It streams: the two runs are read in item-id order, a batch at a
time, and only two integer rows per item are kept. Works the same for local and LangFuse-mode
runs (their results are mirrored in the local store); a LangFuse-mode run's gold is read from
LangFuse, and its rows are re-scored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extraction_eval.analysis.compare.counting import (
    PairedCounts,
    count_stored_pairs,
    rescore_pairs,
)
from extraction_eval.analysis.compare.run_diff import DiffFold, RunDiff
from extraction_eval.analysis.stored import run_gold, run_scoring
from extraction_eval.backends.local import LocalStore, RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.evaluators.counts import (
    COLUMNS,
)
from extraction_eval.evaluators.diff_counts import DiffCounts
from extraction_eval.evaluators.stats.intervals import CI_METHODS, CiMethod
from extraction_eval.evaluators.stats.multiple_testing import CORRECTIONS, Correction
from extraction_eval.evaluators.stats.paired_delta import (
    GateFailure,
    PairedComparison,
    check_tolerances,
    regression_gate,
)
from extraction_eval.evaluators.stats.power import PowerAnalysis, analyse
from extraction_eval.evaluators.stats.verdict_rules import MIN_ITEMS
from extraction_eval.limits import MAX_RESAMPLES
from extraction_eval.types import DatasetItem
from extraction_eval.validation import check_choice, check_int

# item id -> the item (text, gold, schema) of a run's dataset version
GoldLoader = Callable[[RunRecord], Mapping[str, DatasetItem]]
_SHOWN_IDS = 20
# how a forced comparison's warning starts (the HTML report shortens it to this)
RUNS_DIFFER = "the runs differ"


@dataclass
class RunComparison:
    """Two stored runs compared on the items both have (``comparison``), and what differs."""

    a: RunRecord
    b: RunRecord
    comparison: PairedComparison
    scoring: ScoringConfig  # A's: both runs' settings, or A's alone when ``as_recorded``
    scoring_b: ScoringConfig | None = None  # B's own settings (``as_recorded``); None: A's
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    not_in_gold: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)  # needed --force
    warnings: list[str] = field(default_factory=list)
    gate: list[GateFailure] | None = None  # set by ``check_gate``
    tolerances: dict[str, float] = field(default_factory=dict)
    # headline metric -> what this comparison could detect (evaluators/stats/power.py)
    power: dict[str, PowerAnalysis] = field(default_factory=dict)

    def check_gate(self, tolerances: Mapping[str, float]) -> list[GateFailure]:
        self.tolerances = {k: float(tolerances[k]) for k in sorted(tolerances)}
        self.gate = regression_gate(self.comparison, self.tolerances)
        return self.gate

    def scored_with(self) -> str:
        """Which settings the runs were scored with, in one line (``compare``'s first)."""
        if self.scoring_b is None:
            return f"both runs scored with A's settings ({self.a.name}): " + _settings(self.scoring)
        return (
            "each run scored with its own recorded settings: A "
            + _settings(self.scoring)
            + "; B "
            + _settings(self.scoring_b)
        )

    def headline(self) -> str:
        """Entity and relationship F1: Δ, its CI and the verdict, in one line."""
        parts = []
        for name in ("entity_f1", "relationship_f1"):
            m = self.comparison.metric(name)
            delta = "—" if m.delta is None else f"{m.delta:+.4f}"
            ci = "" if m.ci_low is None else f" [{m.ci_low:+.4f}, {m.ci_high:+.4f}]"
            parts.append(f"{name} Δ {delta}{ci} {m.verdict}")
        return ", ".join(parts)

    def gate_line(self) -> str | None:
        """The gate's one-line reason (None when no gate was asked for)."""
        if self.gate is None:
            return None
        where = f"{self.b.name!r} vs baseline {self.a.name!r}"
        if self.gate:
            return f"regression gate FAILED ({where}): " + "; ".join(
                g.describe() for g in self.gate
            )
        checked = []
        for name, tol in self.tolerances.items():
            m = self.comparison.metric(name)
            bound = m.ci_high if m.lower_is_better else m.ci_low
            limit = f"<= +{tol:g}" if m.lower_is_better else f">= −{tol:g}"
            side = "high" if m.lower_is_better else "low"
            checked.append(f"{name} Δ CI {side} bound {bound or 0.0:+.4f} {limit}")
        return f"regression gate passed ({where}): " + "; ".join(checked)

    def to_json(self) -> dict[str, Any]:
        def run(r: RunRecord) -> dict[str, Any]:
            return {
                "name": r.name,
                "dataset": r.dataset,
                "dataset_version": r.dataset_version,
                "backend": r.backend,
            }

        def ids(values: list[str]) -> dict[str, Any]:
            return {"count": len(values), "ids": values}

        out: dict[str, Any] = {
            "a": run(self.a),
            "b": run(self.b),
            **self.comparison.to_json(),
            "scoring": _shown_fields(self.scoring),
            # "a": both scored with A's settings (above); "recorded": each with its own
            "scored_as": "a" if self.scoring_b is None else "recorded",
            "scoring_b": _shown_fields(self.scoring_b or self.scoring),
            "scored_with": self.scored_with(),
            "only_in_a": ids(self.only_in_a),
            "only_in_b": ids(self.only_in_b),
            "not_in_gold": ids(self.not_in_gold),
            "differences": self.differences,
            "warnings": self.warnings,
            "power": {k: v.to_json() for k, v in self.power.items()},
        }
        out["gate"] = (
            None
            if self.gate is None
            else {
                "passed": not self.gate,
                "tolerances": self.tolerances,
                "failures": [
                    {"metric": g.metric, "tolerance": g.tolerance, "ci_bound": g.bound}
                    for g in self.gate
                ],
                "reason": self.gate_line(),
            }
        )
        return out


_SHOWN_FIELDS = ("match", "threshold", "span_threshold", "evidence")


def _shown_fields(scoring: ScoringConfig) -> dict[str, Any]:
    """The scoring settings a comparison names (the others are in the run's config)."""
    return {k: v for k, v in scoring.count_fields().items() if k in _SHOWN_FIELDS}


def _settings(scoring: ScoringConfig) -> str:
    """``match=fuzzy, threshold=0.85, ...``; an alias table is named when there is one."""
    parts = [f"{k}={v}" for k, v in _shown_fields(scoring).items()]
    if scoring.alias_groups:
        parts.append(f"aliases={len(scoring.alias_groups)} groups")
    return ", ".join(parts)


def _shown(ids: list[str]) -> str:
    more = len(ids) - _SHOWN_IDS
    return ", ".join(ids[:_SHOWN_IDS]) + (f", ... ({more} more)" if more > 0 else "")


@dataclass(frozen=True)
class CompareOptions:
    """How two stored runs are compared: the bootstrap's ``resamples`` and ``seed``; ``force``
    compares runs of different datasets, versions or item sets (named in the warnings);
    ``tolerances`` (metric -> allowed drop) runs the regression gate; ``top``: the changed
    items the diff lists; ``refuse_as``: the field a refusal names (``baseline`` when a run
    compares itself with its baseline); ``ci``: the interval method (None: the one A was
    run with); ``correction``: how the metrics' p-values are adjusted as one family; fewer
    than ``min_items`` paired items make every verdict ``insufficient``
    (evaluators/stats/verdict_rules.py); ``as_recorded``: each run counts with its own
    recorded scoring settings (default: both with A's, so only the outputs differ). Checked on
    construction, before any work."""

    resamples: int = 10_000
    seed: int = 42
    force: bool = False
    tolerances: Mapping[str, float] | None = None
    top: int = 10
    refuse_as: str = "force"
    ci: CiMethod | None = None
    correction: Correction = "holm"
    min_items: int = MIN_ITEMS
    as_recorded: bool = False

    def __post_init__(self) -> None:
        check_int("resamples", self.resamples, minimum=1, maximum=MAX_RESAMPLES)
        check_int("seed", self.seed, minimum=0)
        check_int("top", self.top, minimum=0)
        if self.ci is not None:
            check_choice("ci", self.ci, CI_METHODS)
        check_choice("correction", self.correction, CORRECTIONS)
        check_int("min_items", self.min_items, minimum=1)
        if self.tolerances:
            check_tolerances(self.tolerances)


def compare_runs(
    a: str | RunRecord,
    b: str | RunRecord,
    *,
    options: CompareOptions | None = None,
    dataset: str | None = None,
    store: LocalStore | None = None,
    gold: GoldLoader | None = None,
) -> RunComparison:
    """Compare stored run A (the baseline) with run B on the items both have, by name or
    record: ``extraction-eval compare A B`` without the item diff (:func:`compare_and_diff`
    adds it). ``store``: the local store (default: ``EXTRACTION_EVAL_HOME``'s).

    Both runs count as scored against A's gold with A's scoring config (an errored item is an
    empty prediction that never passes, as everywhere): the counts stored with a local run's
    results when they were made so, else re-scored from the stored outputs. Different datasets,
    dataset versions or item sets are refused unless ``options.force`` (then named in
    ``warnings``). ``options.tolerances`` runs the regression gate. ``gold`` replaces
    :func:`~extraction_eval.analysis.stored.run_gold` (tests, notebooks)."""
    store, run_a, run_b = _records(a, b, dataset, store)
    options = options or CompareOptions()
    differences, scoring, warnings = _check_datasets(run_a, run_b, options)
    scoring_b = run_scoring(run_b) if options.as_recorded else None
    if gold is None and _counts_readable(run_a):
        paired = count_stored_pairs(store, run_a, run_b, scoring, None, scoring_b)
    else:
        items = (gold or (lambda run: run_gold(store, run)))(run_a)
        paired = rescore_pairs(store, run_a, run_b, items, scoring, scoring_b)
    return _finish_comparison(run_a, run_b, paired, scoring, differences, warnings, options)


def compare_and_diff(
    a: str | RunRecord,
    b: str | RunRecord,
    *,
    options: CompareOptions | None = None,
    dataset: str | None = None,
    store: LocalStore | None = None,
) -> tuple[RunComparison, RunDiff]:
    """:func:`compare_runs` and :func:`~extraction_eval.analysis.compare.run_diff.diff_runs`
    (what ``compare`` shows) from ONE pass over both runs: the same results as calling both.

    Local runs: the count rows stored with each result are used as they are when they were
    scored as this comparison scores (A's settings, the full gold of A's dataset version);
    other rows are re-scored. Only items whose outputs differ are diffed, and only their gold
    (and that of re-scored items) is read."""
    store, run_a, run_b = _records(a, b, dataset, store)
    options = options or CompareOptions()
    if not _counts_readable(run_a):  # gold from LangFuse: the two parts as they are
        from extraction_eval.analysis.compare.run_diff import diff_runs

        result = compare_runs(run_a, run_b, store=store, options=options)
        return result, diff_runs(store, run_a, run_b, top=options.top)
    differences, scoring, warnings = _check_datasets(run_a, run_b, options)
    cfg = run_scoring(run_a)
    diff = RunDiff(run_a.name, run_b.name, cfg, cfg != run_scoring(run_b), DiffCounts(), [])
    fold = DiffFold(diff, options.top)
    scoring_b = run_scoring(run_b) if options.as_recorded else None
    paired = count_stored_pairs(store, run_a, run_b, scoring, fold, scoring_b)
    result = _finish_comparison(run_a, run_b, paired, scoring, differences, warnings, options)
    diff.only_in_a, diff.only_in_b = list(paired.only_in_a), list(paired.only_in_b)
    diff.no_gold = list(paired.not_in_gold)
    return result, fold.finish()


def _records(
    a: str | RunRecord, b: str | RunRecord, dataset: str | None, store: LocalStore | None
) -> tuple[LocalStore, RunRecord, RunRecord]:
    """The store (default: ``EXTRACTION_EVAL_HOME``'s) and both runs, named or given."""
    from extraction_eval.analysis.stored import get_run

    store = store if store is not None else LocalStore()
    run_a = a if isinstance(a, RunRecord) else get_run(store, a, dataset)
    run_b = b if isinstance(b, RunRecord) else get_run(store, b, dataset)
    return store, run_a, run_b


def _compare_counted(
    a: RunRecord, b: RunRecord, paired: PairedCounts, options: CompareOptions
) -> RunComparison:
    """:func:`compare_runs` from the counts of a :class:`PairedPass` a caller of this package
    fed with both runs' stored rows (``along``: the HTML report, as it reads them): the same
    result."""
    differences, scoring, warnings = _check_datasets(a, b, options)
    return _finish_comparison(a, b, paired, scoring, differences, warnings, options)


def _counts_readable(a: RunRecord) -> bool:
    """A local run of a numbered dataset version: its gold (and stored counts) are the store's."""
    return a.backend == "local" and isinstance(a.dataset_version, int)


def _check_datasets(
    a: RunRecord, b: RunRecord, options: CompareOptions
) -> tuple[list[str], ScoringConfig, list[str]]:
    """Refuse different datasets (unless ``force``); A's scoring config; a warning when B
    was scored differently."""
    differences = []
    if a.dataset != b.dataset:
        differences.append(f"dataset {a.dataset!r} vs {b.dataset!r}")
    elif a.dataset_version != b.dataset_version:
        differences.append(f"dataset version {a.dataset_version} vs {b.dataset_version}")
    if differences and not options.force:
        raise _refusal(options.refuse_as, a, b, differences)
    scoring = run_scoring(a)
    warnings = []
    b_scoring = run_scoring(b)
    if b_scoring.count_fields() != scoring.count_fields() and not options.as_recorded:
        changed = sorted(
            k for k, v in scoring.count_fields().items() if b_scoring.count_fields().get(k) != v
        )
        warnings.append(
            f"the runs were scored with different settings ({', '.join(changed)}); both are "
            f"re-scored here with {a.name!r}'s"
        )
    return differences, scoring, warnings


def _finish_comparison(
    a: RunRecord,
    b: RunRecord,
    paired: PairedCounts,
    scoring: ScoringConfig,
    differences: list[str],
    warnings: list[str],
    options: CompareOptions,
) -> RunComparison:
    """Refuse different item sets (unless ``force``), then the bootstrap and the gate."""
    acc, only_in_a, only_in_b, not_in_gold = (
        paired.accumulator,
        paired.only_in_a,
        paired.only_in_b,
        paired.not_in_gold,
    )
    if only_in_a or only_in_b:
        differences.append(
            f"item set: {len(only_in_a)} items only in {a.name!r}, "
            f"{len(only_in_b)} only in {b.name!r}"
        )
        if not options.force:
            raise _refusal(
                options.refuse_as,
                a,
                b,
                differences,
                (f" (only in A: {_shown(only_in_a)})" if only_in_a else "")
                + (f" (only in B: {_shown(only_in_b)})" if only_in_b else ""),
            )
    if differences:
        warnings.insert(0, f"{RUNS_DIFFER} (compared anyway, forced): " + "; ".join(differences))
    if not_in_gold:
        warnings.append(
            f"{len(not_in_gold)} items are not in {a.name!r}'s dataset version and were left "
            f"out: {_shown(not_in_gold)}"
        )
    result = RunComparison(
        a=a,
        b=b,
        comparison=acc.compare(
            resamples=options.resamples,
            seed=options.seed,
            confidence=scoring.confidence,
            method=options.ci or scoring.ci,
            correction=options.correction,
            min_items=options.min_items,
        ),
        scoring=scoring,
        scoring_b=run_scoring(b) if options.as_recorded else None,
        only_in_a=only_in_a,
        only_in_b=only_in_b,
        not_in_gold=not_in_gold,
        differences=differences,
        warnings=warnings,
    )
    rows_a, rows_b = acc.matrices(canonical=True)
    if acc.n >= options.min_items:  # below it the MDE would be a number without meaning
        for name in ("entity_f1", "relationship_f1"):
            result.power[name] = analyse(
                rows_a, rows_b, COLUMNS, name, alpha=1.0 - scoring.confidence
            )
    if options.tolerances:
        result.check_gate(options.tolerances)
    return result


def _refusal(
    field: str, a: RunRecord, b: RunRecord, differences: list[str], detail: str = ""
) -> InvalidValue:
    what = "; ".join(differences) + detail
    if field == "force":
        return InvalidValue("force", f"is needed to compare {a.name!r} with {b.name!r}: {what}")
    return InvalidValue(field, f"{a.name!r} cannot be compared with {b.name!r}: {what}")


def parse_tolerances(specs: list[str]) -> dict[str, float]:
    """``NAME=TOLERANCE`` pairs (``entity_f1=0.01``) into a checked mapping."""
    out = tolerance_specs(specs)
    check_tolerances(out)
    return out


def tolerance_specs(specs: Sequence[str]) -> dict[str, float]:
    """``NAME=TOLERANCE`` pairs as a mapping, whatever the metrics are (the caller checks
    the names): each a number, none named twice (the gate would keep only one)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, raw = spec.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidValue("fail_on_regression", f"expects METRIC=TOLERANCE, got {spec!r}")
        try:
            value = float(raw)
        except ValueError:
            raise InvalidValue(
                "fail_on_regression", f"{name}: tolerance must be a number, got {raw.strip()!r}"
            ) from None
        if name in out:
            raise InvalidValue("fail_on_regression", f"{name} given twice")
        out[name] = value
    return out
