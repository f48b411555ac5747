"""People overrule the judge: their verdicts win over the judge's for the pairs they name,
and those pairs never reach the judge (no call, no cost).

Two places hold such verdicts:

- a pairs file (``score --judge-overrides``, the ``judge calibrate`` format): a line
  ``{"a": "Apple", "b": "Apple Records", "type": "ORG", "same": false, "reason": "..."}``
  settles that pair in either order (a line without ``type`` whatever its type; with
  ``item_id`` on that item only);
- the dataset's gold overrides (``gold override``, actions ``same`` / ``not_same``): on one
  item, the predicted name ``target`` and the gold name ``value`` are, or are not, one
  entity. Every ``--judge`` on a stored run of the dataset honours them.

Names are compared casefolded with whitespace collapsed. The verdict's source is ``person``
and its reason the person's (else "overruled by a person"). An item-scoped verdict wins over
an unscoped one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from extraction_eval.datasets.pairs import LabelledPair
from extraction_eval.judge.base import Judge, JudgePair, JudgeStats, Verdict
from extraction_eval.llm.context import current_item_id
from extraction_eval.types import GoldOverride

_JUDGE_ACTIONS = {"same": True, "not_same": False}


def _key(name: str) -> str:
    return " ".join(name.casefold().split())


@dataclass(frozen=True, slots=True)
class PersonVerdict:
    """A person's verdict on one pair: on ``item_id`` only, or everywhere (None)."""

    a: str
    b: str
    same: bool
    reason: str
    type: str | None = None
    item_id: str | None = None


def from_pairs(pairs: Iterable[LabelledPair]) -> list[PersonVerdict]:
    """Pairs-file lines as people's verdicts (``reason`` and ``item_id`` optional)."""
    out = []
    for p in pairs:
        reason, item_id = p.raw.get("reason"), p.raw.get("item_id")
        out.append(
            PersonVerdict(
                p.a,
                p.b,
                p.same,
                reason if isinstance(reason, str) else "",
                p.type,
                item_id if isinstance(item_id, str) and item_id else None,
            )
        )
    return out


def from_gold_overrides(overrides: Iterable[GoldOverride]) -> list[PersonVerdict]:
    """The dataset's ``same`` / ``not_same`` gold overrides as people's verdicts (other
    overrides are the vote's and are left out)."""
    return [
        PersonVerdict(
            o.target or "", o.value or "", _JUDGE_ACTIONS[o.action], o.reason, None, o.item_id
        )
        for o in overrides
        if o.action in _JUDGE_ACTIONS
    ]


class OverruledJudge:
    """``inner`` with people's verdicts on top (``overrides``: :class:`PersonVerdict`, or
    pairs-file lines)."""

    def __init__(
        self, inner: Judge, overrides: Sequence[PersonVerdict] | Sequence[LabelledPair]
    ) -> None:
        self.inner = inner
        found = [o for o in overrides if isinstance(o, PersonVerdict)]
        found += from_pairs(o for o in overrides if isinstance(o, LabelledPair))
        self._by_pair: dict[tuple[str | None, str, str, str | None], PersonVerdict] = {}
        for o in found:
            for a, b in ((o.a, o.b), (o.b, o.a)):
                t = _key(o.type) if o.type else None
                self._by_pair[(o.item_id, _key(a), _key(b), t)] = o
        self.overruled = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def stats(self) -> JudgeStats:
        return self.inner.stats

    def _found(self, pair: JudgePair) -> PersonVerdict | None:
        a, b = _key(pair.a), _key(pair.b)
        t = _key(pair.type) if pair.type else None
        item = current_item_id.get()
        for scope in (item, None) if item is not None else (None,):
            hit = (self._by_pair.get((scope, a, b, t)) if t else None) or self._by_pair.get(
                (scope, a, b, None)
            )
            if hit is not None:
                return hit
        return None

    async def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        out: list[Verdict | None] = []
        rest: list[JudgePair] = []
        for p in pairs:
            found = self._found(p)
            if found is None:
                out.append(None)
                rest.append(p)
            else:
                text = found.reason or "overruled by a person"
                out.append(Verdict(found.same, " ".join(text.split())[:300], "person"))
                self.overruled += 1
        answers = iter(await self.inner.judge(rest) if rest else [])
        return [v if v is not None else next(answers) for v in out]

    async def aclose(self) -> None:
        await self.inner.aclose()
