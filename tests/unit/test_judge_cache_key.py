"""What a judge verdict's cache key holds: the judge model, its base URL, the item's text and
the pair (both names and the type). Changing any one asks the judge again; changing nothing
asks nothing. (The prompt version's part: ``tests/integration/test_langfuse_judge_prompt.py``
on the LangFuse-managed prompt; ``test_judge.py`` for the built-in one's identity.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extraction_eval.judge.base import JudgePair
from extraction_eval.judge.model import ModelJudge
from extraction_eval.llm.fake import FakeProvider
from extraction_eval.llm.retry import RetryPolicy
from tests.support.judging import DictCache

TEXT = "International Business Machines (IBM) moved from Paris to Lyon."
PAIR = JudgePair("IBM", "International Business Machines", "ORG", TEXT)
URL = "http://127.0.0.1:8101/v1"


def _calls(cache: DictCache, pair: JudgePair, model: str = "fake:judge", url: str = URL) -> int:
    """Model calls one fresh judge makes for ``pair`` on ``cache``."""
    script = {"default": {"json": {"verdicts": [{"id": 1, "same": True, "reason": "r"}]}}}
    fake = FakeProvider.from_script(script, model=model.split(":", 1)[1])
    judge = ModelJudge(
        model, base_url=url, cache=cache, provider=fake, retry=RetryPolicy.immediate(1)
    )
    verdicts = asyncio.run(judge.judge([pair]))
    assert verdicts[0].same is True
    assert judge.stats.calls == len(fake.calls)
    return judge.stats.calls


@pytest.mark.parametrize(
    ("what", "change"),
    [
        ("judge model", {"model": "fake:another-judge"}),
        ("base URL", {"url": "http://127.0.0.1:8102/v1"}),
        ("item text", {"pair": JudgePair(PAIR.a, PAIR.b, PAIR.type, TEXT + " Later.")}),
        ("predicted name", {"pair": JudgePair("I.B.M.", PAIR.b, PAIR.type, TEXT)}),
        ("gold name", {"pair": JudgePair(PAIR.a, "IBM Corp", PAIR.type, TEXT)}),
        ("type", {"pair": JudgePair(PAIR.a, PAIR.b, "LOC", TEXT)}),
    ],
)
def test_a_change_in_any_part_of_the_key_asks_again(what: str, change: dict[str, Any]) -> None:
    cache = DictCache()
    assert _calls(cache, PAIR) == 1
    assert _calls(cache, PAIR) == 0  # unchanged: every verdict from the cache
    pair = change.pop("pair", PAIR)
    assert _calls(cache, pair, **change) == 1, f"a changed {what} was answered from the cache"
    assert len(cache.rows) == 2
