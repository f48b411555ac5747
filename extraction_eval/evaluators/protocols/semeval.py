"""SemEval-2013 task 9.1 NER modes by character offsets, as nervaluate 1.x computes them.

Each span is (label, start, end). nervaluate takes ``end`` as inclusive, so a half-open span
[s, e) is scored as (s, e - 1). Per document and per mode, predictions are taken in list
order; each scans the gold spans not yet matched, in list order:

- ``strict``: a gold span with the same label and boundaries is ``correct`` (stop); else
  the first overlapping gold span makes the prediction ``incorrect``; else ``spurious``.
- ``exact``: the same, boundaries only (labels ignored).
- ``partial``: same boundaries is ``correct`` (stop); else the first overlapping gold span
  makes it ``partial``; else ``spurious``. Labels ignored.
- ``ent_type``: among overlapping gold spans with the same label, the one with the smallest
  |Δstart| + |Δend| (the first on ties) makes it ``correct``; else the first overlapping gold
  span with another label makes it ``incorrect``; else ``spurious``.

The gold span a prediction was counted against is matched (never used again); unmatched
gold spans are ``missed``. Overlap: the shared characters are at least 1 % of the gold
span's length (nervaluate's ``min_overlap_percentage`` = 1). possible = correct + incorrect
+ partial + missed, actual = correct + incorrect + partial + spurious; P = (correct + ½
partial) / actual, R = (correct + ½ partial) / possible (partial is 0 outside ``partial``),
F1 = 2PR / (P + R). Per type: each mode run again on the spans of that label only.

One departure: nothing expected and nothing predicted (no failed item) is 1.0, as everywhere
in this tool; nervaluate says 0. Pure, no I/O.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

from extraction_eval.evaluators.protocols.rows import CountRows
from extraction_eval.evaluators.protocols.spans import (
    DocumentFold,
    Problems,
    check_span,
    entity_spans,
)
from extraction_eval.types import Entity

__all__ = ["MODES", "SemevalAccumulator"]

MODES = ("strict", "exact", "partial", "ent_type")
_FIELDS = ("correct", "incorrect", "partial", "missed", "spurious")
MIN_OVERLAP_PERCENTAGE = 1.0

# (label, start, inclusive end)
_Span = tuple[str, int, int]


def _candidates(preds: Sequence[_Span], gold: Sequence[_Span]) -> list[list[int]]:
    """Per prediction, the gold indices (ascending) it overlaps by nervaluate's rule; found
    by bisecting gold starts so a long document is not every prediction times every gold."""
    if not gold:
        return [[] for _ in preds]
    order = sorted(range(len(gold)), key=lambda i: gold[i][1])
    starts = [gold[i][1] for i in order]
    longest = max(g[2] - g[1] for g in gold)
    out: list[list[int]] = []
    for _, ps, pe in preds:
        lo = bisect_left(starts, ps - longest)
        hi = bisect_right(starts, pe)
        found = []
        for k in range(lo, hi):
            i = order[k]
            _, gs, ge = gold[i]
            if ps > ge or pe < gs:
                continue
            shared = min(pe, ge) - max(ps, gs) + 1
            if (shared / (ge - gs + 1)) * 100.0 >= MIN_OVERLAP_PERCENTAGE:
                found.append(i)
        found.sort()
        out.append(found)
    return out


def _mode(
    mode: str, preds: Sequence[_Span], gold: Sequence[_Span], cands: list[list[int]]
) -> list[int]:
    """(correct, incorrect, partial, missed, spurious) of one mode on one document."""
    correct = incorrect = partial = spurious = 0
    matched: set[int] = set()
    for p, found in zip(preds, cands, strict=True):
        label, ps, pe = p
        hit: int | None = None
        fallback: int | None = None
        if mode == "ent_type":
            best: int | None = None
            for i in found:
                if i in matched:
                    continue
                g = gold[i]
                if g[0] == label:
                    distance = abs(ps - g[1]) + abs(pe - g[2])
                    if best is None or distance < best:
                        hit, best = i, distance
                elif fallback is None:
                    fallback = i
        else:
            for i in found:
                if i in matched:
                    continue
                g = gold[i]
                if g[1] == ps and g[2] == pe and (mode != "strict" or g[0] == label):
                    hit = i
                    break
                if fallback is None:
                    fallback = i
        if hit is not None:
            correct += 1
            matched.add(hit)
        elif fallback is not None:
            matched.add(fallback)
            if mode == "partial":
                partial += 1
            else:
                incorrect += 1
        else:
            spurious += 1
    return [correct, incorrect, partial, len(gold) - len(matched), spurious]


def _row(counts: Sequence[int], mode: str) -> tuple[int, int, int]:
    """(tp, fp, fn) whose micro P/R/F1 are the mode's (doubled for ``partial``'s ½)."""
    correct, incorrect, partial, missed, spurious = counts
    actual = correct + incorrect + partial + spurious
    possible = correct + incorrect + partial + missed
    if mode == "partial":
        tp = 2 * correct + partial
        return tp, 2 * actual - tp, 2 * possible - tp
    return correct, actual - correct, possible - correct


def _block(counts: Sequence[int], mode: str, *, failed: bool) -> dict[str, Any]:
    correct, incorrect, partial, missed, spurious = counts
    actual = correct + incorrect + partial + spurious
    possible = correct + incorrect + partial + missed
    credit = correct + 0.5 * partial if mode == "partial" else float(correct)
    if actual == 0 and possible == 0 and not failed:
        p = r = f = 1.0
    else:
        p = credit / actual if actual > 0 else 0.0
        r = credit / possible if possible > 0 else 0.0
        f = 2 * (p * r) / (p + r) if (p + r) > 0 else 0.0
    return {
        **dict(zip(_FIELDS, counts, strict=True)),
        "possible": possible,
        "actual": actual,
        "precision": p,
        "recall": r,
        "f1": f,
    }


class SemevalAccumulator(DocumentFold):
    """The four modes summed over documents (micro), overall and per type."""

    def __init__(self, problems: Problems | None = None, rows: CountRows | None = None) -> None:
        super().__init__(problems, rows)
        self.totals = {mode: [0] * 5 for mode in MODES}
        self.per_type: dict[str, dict[str, list[int]]] = {}
        self.without_offsets = {"gold": 0, "predicted": 0}

    def _spans(self, item_id: str, side: str, entities: Sequence[Entity], text: str) -> list[_Span]:
        out: list[_Span] = []
        for index, entity in enumerate(entities):
            spans = entity_spans(entity)
            if not spans:
                self.without_offsets[side] += 1
                continue
            for start, end in spans:
                problem = check_span(start, end, len(text))
                if problem is not None or start is None or end is None:
                    what = f"{side} entity {index} ({entity.name[:60]!r})"
                    self._skip(item_id, what, problem or "no offsets")
                    continue
                out.append((entity.type, start, end - 1))
        return out

    def add(
        self, item_id: str, text: str, gold: Sequence[Entity], pred: Sequence[Entity] | None
    ) -> None:
        """One document; ``pred`` None is a failed item (its gold spans are missed)."""
        self.documents += 1
        self.failed = self.failed or pred is None
        g = self._spans(item_id, "gold", gold, text)
        p = self._spans(item_id, "predicted", pred or [], text)
        cands = _candidates(p, g)
        for mode in MODES:
            acc = self.totals[mode]
            counts = _mode(mode, p, g, cands)
            for k, n in enumerate(counts):
                acc[k] += n
            if self.rows is not None:
                self.rows.add(f"semeval.{mode}", *_row(counts, mode))
        for label in {s[0] for s in g} | {s[0] for s in p}:
            pi = [k for k, s in enumerate(p) if s[0] == label]
            gi = [k for k, s in enumerate(g) if s[0] == label]
            remap = {old: new for new, old in enumerate(gi)}
            sub_c = [[remap[i] for i in cands[k] if i in remap] for k in pi]
            sub_p = [p[k] for k in pi]
            sub_g = [g[k] for k in gi]
            modes = self.per_type.setdefault(label, {m: [0] * 5 for m in MODES})
            for mode in ("exact", "partial", "ent_type"):
                counts = _mode(mode, sub_p, sub_g, sub_c)
                # one label: strict's label test always holds, so strict counts as exact
                for target in ("exact", "strict") if mode == "exact" else (mode,):
                    for k, n in enumerate(counts):
                        modes[target][k] += n

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for mode in MODES:
            block = _block(self.totals[mode], mode, failed=self.failed)
            block["per_type"] = {
                label: _block(self.per_type[label][mode], mode, failed=self.failed)
                for label in sorted(self.per_type)
            }
            out[mode] = block
        out["documents"] = self.documents
        out["without_offsets"] = dict(self.without_offsets)
        out["skipped"] = self.skipped
        return out
