"""Agreement between the models that voted a gold set: Krippendorff's α on the kept /
left-out decisions, per object type, so users see how contested their gold is.

**Krippendorff's α, nominal** (Krippendorff 2011, "Computing Krippendorff's Alpha-
Reliability"): units are rated by coders, some values missing. Only *pairable* values count
(units with at least two values). The coincidence matrix o_ck sums, over units u with m_u
values, the ordered pairs of values (c, k) from different coders divided by m_u − 1;
n_c = Σ_k o_ck, n = Σ_c n_c. Then

    α = 1 − (n − 1) · Σ_{c≠k} o_ck / Σ_{c≠k} n_c · n_k

1 is perfect agreement, 0 agreement at chance level, below 0 systematic disagreement. α is
undefined (None) when every pairable value is the same (no variation to agree on).

**For a gold build**, a unit is a candidate object of an item (an entity or relationship some
model produced, clustered by the scorer's own alignment); each model that answered on the
item is a coder with value 1 (produced it) or 0 (did not); a model that failed on the item
abstains (missing). Votes are unweighted here: α measures the models' agreement, not the
vote. Objects no model produced are not units, so there is never a candidate all models
agree is absent: "found" dominates, and α (which corrects for chance given how often each
value is used) is low whenever the omissions are idiosyncratic, even when 90 % of the pairs
agree (the prevalence paradox). The raw pairwise agreement is reported next to it: read
both. Pure, no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extraction_eval.evaluators.vote import ItemVote


def _coincidences(
    units: Iterable[Sequence[Hashable | None]],
) -> tuple[dict[tuple[Hashable, Hashable], float], dict[Hashable, float], float]:
    """The coincidence matrix o_ck, its margins n_c and total n over the pairable units."""
    o: dict[tuple[Hashable, Hashable], float] = {}
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue  # not pairable
        counts = Counter(values)
        for c, nc in counts.items():
            for k, nk in counts.items():
                pairs = nc * (nc - 1) if c == k else nc * nk
                if pairs:
                    o[c, k] = o.get((c, k), 0.0) + pairs / (m - 1)
    n_c: dict[Hashable, float] = {}
    for (c, _), v in o.items():
        n_c[c] = n_c.get(c, 0.0) + v
    return o, n_c, sum(n_c.values())


def krippendorff_alpha_nominal(units: Iterable[Sequence[Hashable | None]]) -> float | None:
    """Nominal α over ``units``: each a sequence of the coders' values (None: missing)."""
    o, n_c, n = _coincidences(units)
    observed = sum(v for (c, k), v in o.items() if c != k)
    expected = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k)
    if n <= 1 or expected == 0:
        return None
    return 1.0 - (n - 1) * observed / expected


def pairwise_agreement(units: Iterable[Sequence[Hashable | None]]) -> float | None:
    """The share of pairable value pairs that agree, Σ_c o_cc / n (α's observed agreement,
    not corrected for chance)."""
    o, _, n = _coincidences(units)
    if n == 0:
        return None
    return sum(v for (c, k), v in o.items() if c == k) / n


@dataclass(frozen=True)
class Agreement:
    """α of one group of candidate objects, its raw pairwise agreement, and how many pairable
    units it rests on."""

    alpha: float | None
    observed: float | None  # share of model pairs that agree on a candidate (not chance-corrected)
    units: int  # candidate objects with at least two models answering
    unanimous: int  # of those, produced by every model that answered on the item

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "observed": self.observed,
            "units": self.units,
            "unanimous": self.unanimous,
        }


def _group(units: Sequence[Sequence[int | None]]) -> Agreement:
    pairable = [u for u in units if sum(v is not None for v in u) >= 2]
    unanimous = sum(len({v for v in u if v is not None}) == 1 for u in pairable)
    return Agreement(
        krippendorff_alpha_nominal(pairable), pairwise_agreement(pairable), len(pairable), unanimous
    )


def vote_units(votes: Iterable[ItemVote]) -> dict[tuple[str, str], list[list[int | None]]]:
    """(kind, type) -> one unit per candidate object: 1 per model that produced it, 0 per
    model that answered without it, None per model that failed on the item."""
    out: dict[tuple[str, str], list[list[int | None]]] = {}
    for vote in votes:
        for obj in vote.objects:
            produced = sum(1 for run in obj.support if run in vote.voters)
            unit: list[int | None] = [1] * produced
            unit += [0] * (len(vote.voters) - produced)
            unit += [None] * len(vote.abstained)
            if obj.entity is not None:
                field = obj.fields.get("type")
                kind_type = field.value if field is not None else obj.entity.type
            else:
                assert obj.relationship is not None
                kind_type = obj.relationship.type
            out.setdefault((obj.kind, str(kind_type)), []).append(unit)
    return out


def gold_agreement(votes: Mapping[str, ItemVote]) -> dict[str, Any]:
    """α of the models' kept/left-out decisions: per kind (entity, relationship) and per
    type within each kind, in JSON-able form."""
    units = vote_units(votes[k] for k in sorted(votes))
    out: dict[str, Any] = {"method": "Krippendorff's alpha, nominal, unweighted models"}
    for kind in ("entity", "relationship"):
        groups = {t: u for (k, t), u in units.items() if k == kind}
        every = [u for t in sorted(groups) for u in groups[t]]
        out[kind] = {
            **_group(every).to_json(),
            "per_type": {t: _group(groups[t]).to_json() for t in sorted(groups)},
        }
    return out


# ---- a judge against labels: Cohen's κ ---------------------------------------------------------
# Cohen (1960): κ = (p_o − p_e) / (1 − p_e), with p_o the share of pairs where the judge and
# the label agree and p_e the agreement expected by chance from each side's yes/no shares.


def cohen_kappa(tp: float, fp: float, fn: float, tn: float) -> float | None:
    """κ of a judge's verdicts against labels from the 2×2 counts; None when undefined
    (no pairs, or both sides say the same thing every time: p_e = 1)."""
    n = tp + fp + fn + tn
    if n <= 0:
        return None
    p_o = (tp + tn) / n
    p_e = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def kappa_interval(
    cells: Sequence[int], *, resamples: int, seed: int, confidence: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of κ over pairs: ``cells`` holds each pair's cell
    (0 tp, 1 fp, 2 fn, 3 tn); resamples where κ is undefined are left out. None when there
    is nothing to resample or κ is undefined in every resample."""
    import numpy as np

    from extraction_eval.evaluators.stats.bootstrap import resampled_sums

    if not cells or resamples <= 0:
        return None
    rows = np.zeros((len(cells), 4), dtype=np.int64)
    rows[np.arange(len(cells)), np.asarray(cells, dtype=np.intp)] = 1
    sums = resampled_sums(rows, resamples=resamples, seed=seed)
    tp, fp, fn, tn = sums.T
    n = sums.sum(axis=1)
    p_o = (tp + tn) / n
    p_e = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    ok = p_e < 1.0
    if not ok.any():
        return None
    kappas = (p_o[ok] - p_e[ok]) / (1.0 - p_e[ok])
    alpha = 1.0 - confidence
    low, high = np.quantile(kappas, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
