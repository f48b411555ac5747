"""How far a judge can be trusted: its verdicts on labelled pairs, as a confusion matrix,
precision, recall, accuracy and Cohen's κ with a bootstrap interval over pairs.

A pair the judge failed on (``same=None``) is counted in ``errors`` and left out of the
matrix (it is neither agreement nor disagreement); the per-pair rows carry
``"verdict": null`` and the error, so κ recomputed from them is the κ reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from extraction_eval.datasets.pairs import LabelledPair
from extraction_eval.evaluators.stats.gold_agreement import cohen_kappa, kappa_interval
from extraction_eval.judge.base import Judge, JudgePair, Verdict, run_blocking

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Calibration:
    """One judge's agreement with one set of labels."""

    judge: str  # the judge's identity: model, endpoint, prompt version
    pairs: int  # labelled pairs judged (errors included)
    tp: int
    fp: int
    fn: int
    tn: int
    errors: int
    kappa: float | None
    ci: tuple[float, float] | None
    resamples: int
    seed: int
    source: str = ""  # the pairs file's name

    @property
    def judged(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def accuracy(self) -> float | None:
        return (self.tp + self.tn) / self.judged if self.judged else None

    def backing(self) -> str:
        """The line every judged figure carries: "judge κ 0.87 [0.83, 0.90] on 400 pairs"."""
        if self.kappa is None:
            return f"judge κ undefined on {self.judged:,} pairs"
        ci = f" [{self.ci[0]:.2f}, {self.ci[1]:.2f}]" if self.ci else ""
        return f"judge κ {self.kappa:.2f}{ci} on {self.judged:,} pairs"

    def to_json(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "source": self.source,
            "pairs": self.pairs,
            "judged": self.judged,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "errors": self.errors,
            "precision": self.precision(),
            "recall": self.recall(),
            "accuracy": self.accuracy(),
            "kappa": self.kappa,
            "kappa_ci": None if self.ci is None else {"low": self.ci[0], "high": self.ci[1]},
            "ci_method": "percentile bootstrap over pairs",
            "level": CONFIDENCE,
            "resamples": self.resamples,
            "seed": self.seed,
            "backing": self.backing(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        ci = data.get("kappa_ci")
        return cls(
            judge=str(data["judge"]),
            pairs=int(data["pairs"]),
            tp=int(data["tp"]),
            fp=int(data["fp"]),
            fn=int(data["fn"]),
            tn=int(data["tn"]),
            errors=int(data["errors"]),
            kappa=data.get("kappa"),
            ci=None if not ci else (float(ci["low"]), float(ci["high"])),
            resamples=int(data.get("resamples", 0)),
            seed=int(data.get("seed", 0)),
            source=str(data.get("source", "")),
        )


def cell(label: bool, verdict: bool) -> int:
    """0 tp, 1 fp, 2 fn, 3 tn (label: the pair is the same entity; verdict: the judge says so)."""
    if verdict:
        return 0 if label else 1
    return 2 if label else 3


def summarise(
    judge: str,
    labels: Sequence[bool],
    verdicts: Sequence[bool | None],
    *,
    resamples: int,
    seed: int,
    source: str = "",
) -> Calibration:
    """The calibration of these verdicts against these labels (pure: κ from the same
    numbers whether they come from a judge or from a per-pair file)."""
    cells = [cell(lab, v) for lab, v in zip(labels, verdicts, strict=True) if v is not None]
    counts = [cells.count(k) for k in range(4)]
    return Calibration(
        judge=judge,
        pairs=len(labels),
        tp=counts[0],
        fp=counts[1],
        fn=counts[2],
        tn=counts[3],
        errors=sum(v is None for v in verdicts),
        kappa=cohen_kappa(*counts),
        ci=kappa_interval(cells, resamples=resamples, seed=seed, confidence=CONFIDENCE),
        resamples=resamples,
        seed=seed,
        source=source,
    )


def calibrate(
    judge: Judge,
    pairs: Sequence[LabelledPair],
    *,
    resamples: int = 2_000,
    seed: int = 42,
    source: str = "",
) -> tuple[Calibration, list[dict[str, Any]]]:
    """Judge every pair; return the calibration and the per-pair rows (each input line with
    ``verdict``, ``reason`` and, for a failed pair, ``error`` added)."""
    asks = [JudgePair(p.a, p.b, p.type, p.context) for p in pairs]

    async def run() -> list[Verdict]:
        try:
            return await judge.judge(asks)
        finally:
            await judge.aclose()

    verdicts = run_blocking(run) if asks else []
    rows = []
    for p, v in zip(pairs, verdicts, strict=True):
        row = {**p.raw, "verdict": v.same, "reason": v.reason}
        if v.error is not None:
            row["error"] = v.error
        rows.append(row)
    result = summarise(
        judge.identity,
        [p.same for p in pairs],
        [v.same for v in verdicts],
        resamples=resamples,
        seed=seed,
        source=source,
    )
    return result, rows
