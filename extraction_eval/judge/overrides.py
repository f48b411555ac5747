"""People overrule the judge: a pairs file (the ``judge calibrate`` format) whose labels win
over the judge's verdicts for the pairs it names.

A line ``{"a": "Apple", "b": "Apple Records", "type": "ORG", "same": false, "reason": "..."}``
settles that pair (in either order; names compared casefolded with whitespace collapsed; a
line without ``type`` settles the pair whatever its type). The verdict's source is
``person`` and its reason the line's ``reason`` (else "overruled by a person"). The other
pairs go to the judge as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from extraction_eval.datasets.pairs import LabelledPair
from extraction_eval.judge.base import Judge, JudgePair, JudgeStats, Verdict


def _key(name: str) -> str:
    return " ".join(name.casefold().split())


class OverruledJudge:
    """``inner`` with people's verdicts on top."""

    def __init__(self, inner: Judge, overrides: Sequence[LabelledPair]) -> None:
        self.inner = inner
        self._by_pair: dict[tuple[str, str, str | None], LabelledPair] = {}
        for o in overrides:
            for a, b in ((o.a, o.b), (o.b, o.a)):
                t = _key(o.type) if o.type else None
                self._by_pair[(_key(a), _key(b), t)] = o
        self.overruled = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def stats(self) -> JudgeStats:
        return self.inner.stats

    def _found(self, pair: JudgePair) -> LabelledPair | None:
        a, b = _key(pair.a), _key(pair.b)
        typed = self._by_pair.get((a, b, _key(pair.type))) if pair.type else None
        return typed or self._by_pair.get((a, b, None))

    async def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        out: list[Verdict | None] = []
        rest: list[JudgePair] = []
        for p in pairs:
            found = self._found(p)
            if found is None:
                out.append(None)
                rest.append(p)
            else:
                reason = found.raw.get("reason")
                text = reason if isinstance(reason, str) and reason else "overruled by a person"
                out.append(Verdict(found.same, " ".join(text.split())[:300], "person"))
                self.overruled += 1
        answers = iter(await self.inner.judge(rest) if rest else [])
        return [v if v is not None else next(answers) for v in out]

    async def aclose(self) -> None:
        await self.inner.aclose()
