"""Do the intervals keep their promise? A coverage simulation on synthetic populations,
using the project's own bootstrap and paired-comparison functions. Printed, not asserted.

Population: 20,000 documents with heterogeneous per-document counts: each has 1 + Poisson(λ)
gold entities (λ ~ Gamma(2, 1.5)), a per-document difficulty (recall p ~ Beta(4, 1.5)) and
Poisson(μ) false positives (μ ~ Gamma(1, 0.6)). A "run" draws each document's tp ~
Binomial(gold, p) and fp ~ Poisson(μ) once. For each N, replicates draw N documents without
replacement and ask:

1. **Run CI coverage**: how often the 95 % CI of micro entity F1 (and precision) of run A on
   the N documents contains the population's F1 (precision): percentile vs expanded, the
   same resamples.
2. **Null false-positive rate**: runs A and B drawn independently from the same per-document
   model (true Δ = 0): how often the paired verdict on entity F1 says improved / regressed,
   as the interval alone decides (correction none, the minimum-evidence floor lowered to 1),
   and with the defaults (Holm over every compared metric and McNemar, floor 10 items); and
   how often ANY of the compared metrics gets a verdict (the family-wise error) without and
   with the correction.
3. **Power**: B's recall per document is raised (p → p + 0.04, capped): the empirical rate of
   "improved" vs the power :mod:`extraction_eval.evaluators.stats.power` predicts from each
   replicate's own sample (its measured sd of the difference) for the population's true Δ.

Monte-Carlo error: ± 1.96 · √(c (1 − c) / R) for R replicates.

    nice -n 5 .venv/bin/python benchmarks/bench_coverage.py [--replicates 1000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from extraction_eval.evaluators.counts import COLUMNS, WIDTH
from extraction_eval.evaluators.stats.bootstrap import bootstrap_prf
from extraction_eval.evaluators.stats.paired_delta import paired_compare_counts
from extraction_eval.evaluators.stats.power import analyse

POP = 20_000
NS = (10, 30, 100, 300)
COL = {c: i for i, c in enumerate(COLUMNS)}


def population(rng: np.random.Generator) -> dict[str, NDArray[np.float64]]:
    lam = rng.gamma(2.0, 1.5, POP)
    return {
        "gold": 1 + rng.poisson(lam),
        "p": rng.beta(4.0, 1.5, POP),
        "mu": rng.gamma(1.0, 0.6, POP),
    }


def draw_run(
    pop: dict[str, NDArray[np.float64]], rng: np.random.Generator, shift: float = 0.0
) -> NDArray[np.int64]:
    """(POP × 3) tp, fp, fn of one run over the whole population."""
    p = np.clip(pop["p"] + shift, 0.0, 1.0)
    tp = rng.binomial(pop["gold"].astype(np.int64), p)
    fp = rng.poisson(pop["mu"])
    fn = pop["gold"] - tp
    return np.stack([tp, fp, fn], axis=1).astype(np.int64)


def f1(rows: NDArray[np.int64]) -> float:
    tp, fp, fn = rows.sum(axis=0)
    return float(2 * tp / (2 * tp + fp + fn))


def precision(rows: NDArray[np.int64]) -> float:
    tp, fp, _ = rows.sum(axis=0)
    return float(tp / (tp + fp))


def wide(rows: NDArray[np.int64]) -> NDArray[np.int64]:
    """Count rows in the paired layout (entity columns; the rest 0; 'right' per item)."""
    out = np.zeros((rows.shape[0], WIDTH), dtype=np.int64)
    out[:, COL["entity_tp"] : COL["entity_fn"] + 1] = rows
    out[:, COL["entity_typed_tp"] : COL["entity_typed_fn"] + 1] = rows
    out[:, COL["right"]] = (rows[:, 1] == 0) & (rows[:, 2] == 0)
    return out


def mc(c: float, r: int) -> float:
    return 1.96 * math.sqrt(max(c * (1 - c), 1e-12) / r)


def coverage(pop_run: NDArray[np.int64], args: argparse.Namespace) -> None:
    truth_f1, truth_p = f1(pop_run), precision(pop_run)
    print(f"\n1. run CI coverage of micro entity F1 = {truth_f1:.4f} (precision {truth_p:.4f})")
    print(f"   nominal 95 %; {args.replicates} replicates × {args.resamples} resamples")
    print("      N   method       F1 coverage      P coverage   F1 misses above / below")
    rng = np.random.default_rng(args.seed)
    for n in NS:
        hits = {m: [0, 0, 0, 0] for m in ("percentile", "expanded")}
        for r in range(args.replicates):
            sample = pop_run[rng.choice(POP, n, replace=False)]
            for method in hits:
                ci = bootstrap_prf(
                    {"e": sample},
                    resamples=args.resamples,
                    seed=r,
                    method=method,  # type: ignore[arg-type]
                )
                assert ci is not None
                lo, hi = ci["e"]["f1"]
                plo, phi = ci["e"]["precision"]
                h = hits[method]
                h[0] += lo <= truth_f1 <= hi
                h[1] += plo <= truth_p <= phi
                h[2] += lo > truth_f1
                h[3] += hi < truth_f1
        for method, (cf, cp, above, below) in hits.items():
            a, b = cf / args.replicates, cp / args.replicates
            print(
                f"   {n:4d}   {method:10s}  {a:6.3f} ± {mc(a, args.replicates):.3f}"
                f"   {b:6.3f} ± {mc(b, args.replicates):.3f}   {above:5d} / {below}"
            )


def null_rate(pop: dict[str, NDArray[np.float64]], args: argparse.Namespace) -> None:
    print("\n2. null false-positive rate of the paired verdict on entity F1 (true Δ = 0)")
    print("   A and B drawn independently per replicate from the same per-document model")
    print("   entity F1: the interval alone / defaults; any metric: no correction / Holm")
    print("      N   method       F1, CI alone     F1, defaults     any, none        any, Holm")
    rng = np.random.default_rng(args.seed + 1)
    claims = ("improved", "regressed")
    for n in NS:
        rates = {m: [0, 0, 0, 0] for m in ("percentile", "expanded")}
        for r in range(args.replicates):
            idx = rng.choice(POP, n, replace=False)
            sub = {k: v[idx] for k, v in pop.items()}
            a, b = wide(_draw(sub, rng)), wide(_draw(sub, rng))
            for method, counts in rates.items():
                raw = paired_compare_counts(
                    a, b, resamples=args.resamples, seed=r, method=method,  # type: ignore[arg-type]
                    correction="none", min_items=1,
                )  # fmt: skip
                default = paired_compare_counts(
                    a,
                    b,
                    resamples=args.resamples,
                    seed=r,
                    method=method,  # type: ignore[arg-type]
                )
                counts[0] += raw.metric("entity_f1").verdict in claims
                counts[1] += default.metric("entity_f1").verdict in claims
                counts[2] += any(m.verdict in claims for m in raw.metrics)
                counts[3] += any(m.verdict in claims for m in default.metrics)
        for method, counts in rates.items():
            cells = [c / args.replicates for c in counts]
            print(
                f"   {n:4d}   {method:10s}"
                + "".join(f"  {x:6.3f} ± {mc(x, args.replicates):.3f}" for x in cells)
            )


def _draw(
    sub: dict[str, NDArray[np.float64]], rng: np.random.Generator, shift: float = 0.0
) -> NDArray[np.int64]:
    p = np.clip(sub["p"] + shift, 0.0, 1.0)
    tp = rng.binomial(sub["gold"].astype(np.int64), p)
    fp = rng.poisson(sub["mu"])
    return np.stack([tp, fp, sub["gold"] - tp], axis=1).astype(np.int64)


def power(pop: dict[str, NDArray[np.float64]], args: argparse.Namespace) -> None:
    shift = args.shift
    rng = np.random.default_rng(args.seed + 2)
    pa, pb = draw_run(pop, rng), draw_run(pop, rng, shift)
    true_delta = f1(pb) - f1(pa)
    print(
        f"\n3. power: B's per-document recall + {shift} (population Δ entity F1 ="
        f" {true_delta:+.4f}); predicted = mean over replicates of evaluators/stats/power.py's"
        " power from the replicate's own sample"
    )
    print("      N   method       empirical        predicted")
    for n in NS:
        found = {m: 0 for m in ("percentile", "expanded")}
        predicted = []
        for r in range(args.replicates):
            idx = rng.choice(POP, n, replace=False)
            sub = {k: v[idx] for k, v in pop.items()}
            a, b = wide(_draw(sub, rng)), wide(_draw(sub, rng, shift))
            analysis = analyse(a, b, COLUMNS, "entity_f1", delta=abs(true_delta))
            predicted.append(analysis.power_at_delta or 0.0)
            for method in found:
                m = paired_compare_counts(
                    a, b, resamples=args.resamples, seed=r, method=method,  # type: ignore[arg-type]
                    correction="none", min_items=1,
                ).metric("entity_f1")  # fmt: skip
                found[method] += m.verdict == "improved"
        pred = float(np.mean(predicted))
        for method, k in found.items():
            e = k / args.replicates
            print(
                f"   {n:4d}   {method:10s}  {e:6.3f} ± {mc(e, args.replicates):.3f}   {pred:6.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shift", type=float, default=0.04)
    parser.add_argument("--only", choices=("coverage", "null", "power"), default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    print(
        f"# bench_coverage.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, python"
        f" {platform.python_version()}, numpy {np.__version__}; {args.replicates} replicates,"
        f" {args.resamples} resamples, seed {args.seed}"
    )
    rng = np.random.default_rng(args.seed)
    pop = population(rng)
    pop_run = draw_run(pop, rng)
    print(
        f"population: {POP} documents, {int(pop['gold'].sum())} gold entities"
        f" ({pop['gold'].mean():.2f} per document, max {int(pop['gold'].max())})"
    )
    if args.only in (None, "coverage"):
        coverage(pop_run, args)
    if args.only in (None, "null"):
        null_rate(pop, args)
    if args.only in (None, "power"):
        power(pop, args)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
