"""The judge: ``offline:rules`` verdicts, and a model judge on the scripted fake provider
(verdicts, the per-pair cache, and every way an answer can be bad)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from extraction_eval.judge.base import JudgePair, Verdict
from extraction_eval.judge.factory import make_judge
from extraction_eval.judge.model import ModelJudge
from extraction_eval.judge.rules import RulesJudge, rules_verdict
from extraction_eval.llm.fake import FakeProvider
from extraction_eval.llm.retry import RetryPolicy
from tests.support.judging import DictCache

TEXT = "International Business Machines (IBM) hired Barack Obama. Lyon is not Paris."


def _verdicts(*rows: tuple[int, bool, str]) -> dict[str, Any]:
    return {"json": {"verdicts": [{"id": i, "same": s, "reason": r} for i, s, r in rows]}}


def _judge(script: Any, cache: DictCache | None = None) -> tuple[ModelJudge, FakeProvider]:
    fake = FakeProvider.from_script(script, model="judge")
    judge = ModelJudge(
        "fake:judge", cache=cache, provider=fake, retry=RetryPolicy.immediate(max_attempts=2)
    )
    return judge, fake


def _run(judge: Any, pairs: list[JudgePair]) -> list[Verdict]:
    return asyncio.run(judge.judge(pairs))


PAIRS = [
    JudgePair("IBM", "International Business Machines", "Org", TEXT),
    JudgePair("Lyon", "Paris", "Loc", TEXT),
]


@pytest.mark.parametrize(
    ("a", "b", "type_", "same"),
    [
        ("IBM", "International Business Machines", "Org", True),
        ("Obama", "Barack Obama", "PER", True),
        ("Barack Obama", "Obama", None, True),
        ("U.S.", "United States", "LOC", True),
        ("Apple Inc.", "Apple", "ORG", True),
        ("Dr. Jane Smith", "Jane Smith", "Peop", True),
        ("J. Smith", "John Smith", "PER", True),
        ("Lyon", "Paris", "LOC", False),
        ("Paris", "Paris, Texas", "LOC", False),
        ("2002 Winter Olympics", "2006 Winter Olympics", "MISC", False),
        ("March 1963", "13 March 1963", "TIME", False),
        ("the", "The Beatles", "ORG", False),
        ("ibm", "International Business Machines", "ORG", False),
    ],
)
def test_rules_verdicts(a: str, b: str, type_: str | None, same: bool) -> None:
    got, reason = rules_verdict(a, b, type_)
    assert got is same, reason
    assert reason


def test_rules_judge_makes_no_call_and_reports_its_rules() -> None:
    judge = make_judge("offline:rules")
    assert isinstance(judge, RulesJudge)
    verdicts = _run(judge, PAIRS)
    assert [v.same for v in verdicts] == [True, False]
    assert {v.source for v in verdicts} == {"rules"}
    assert judge.stats.calls == 0 and judge.stats.pairs == 2
    assert "offline:rules" in judge.identity


def test_model_judge_scripted_verdicts_and_one_call_per_batch() -> None:
    judge, fake = _judge({"default": _verdicts((1, True, "acronym"), (2, False, "two cities"))})
    verdicts = _run(judge, PAIRS)
    assert [(v.same, v.reason, v.source) for v in verdicts] == [
        (True, "acronym", "model"),
        (False, "two cities", "model"),
    ]
    assert len(fake.calls) == 1 and judge.stats.calls == 1
    sent = fake.calls[0].request
    assert sent.json_schema is not None and sent.temperature == 0.0
    assert '"IBM" vs "International Business Machines"' in fake.calls[0].user_text
    assert judge.stats.errors == 0


def test_verdicts_are_cached_per_pair_so_a_rerun_makes_no_call() -> None:
    cache = DictCache()
    script = {"default": _verdicts((1, True, "acronym"), (2, False, "two cities"))}
    first, _ = _judge(script, cache)
    _run(first, PAIRS)
    again, fake2 = _judge(script, cache)
    verdicts = _run(again, PAIRS)
    assert len(fake2.calls) == 0 and again.stats.calls == 0 and again.stats.cache_hits == 2
    assert [(v.same, v.source) for v in verdicts] == [(True, "cache"), (False, "cache")]
    # another context is another question
    other = [JudgePair(p.a, p.b, p.type, "another text") for p in PAIRS]
    third, fake3 = _judge(script, cache)
    _run(third, other)
    assert len(fake3.calls) == 1


def test_the_identity_names_the_model_and_prompt_version() -> None:
    judge, _ = _judge({})
    assert judge.identity.startswith("fake:judge") and "judge-v1" in judge.identity


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        ({"text": "Yes, they are the same company."}, "not JSON"),
        ({"json": {"answer": True}}, "wrong schema"),
        ({"json": {"verdicts": [{"id": 1, "same": "yes", "reason": "x"}]}}, "not true or false"),
        ({"json": {"verdicts": []}}, "has no verdict"),
        ({"error": 500}, "judge call failed"),
        ({"error": 401, "message": "denied"}, "judge call failed"),
    ],
)
def test_bad_answers_are_counted_and_never_a_match(step: dict[str, Any], problem: str) -> None:
    cache = DictCache()
    judge, _ = _judge({"default": step}, cache)
    verdicts = _run(judge, PAIRS)
    assert all(v.same is None and v.source == "error" for v in verdicts)
    assert judge.stats.errors == 2
    assert any(problem in line for line in judge.stats.error_examples), judge.stats.error_examples
    assert all("\n" not in line for line in judge.stats.error_examples)
    assert cache.rows == {}  # a failure is never cached: a re-run asks again


def test_a_reply_echoing_the_key_is_not_used_and_the_key_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "odd-shaped-Secret-Value-4711"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    judge, _ = _judge({"default": _verdicts((1, True, f"your key is {key}"), (2, False, "no"))})
    verdicts = _run(judge, PAIRS)
    assert verdicts[0].same is None and verdicts[1].same is False
    assert "secret" in (verdicts[0].error or "")
    shown = json.dumps([v.to_json() for v in verdicts]) + json.dumps(judge.stats.to_json())
    assert key not in shown


def test_an_error_body_echoing_the_key_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "odd-shaped-Secret-Value-4711"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    judge, _ = _judge({"default": {"error": 401, "message": f"bad key {key}"}})
    _run(judge, PAIRS)
    assert judge.stats.errors == 2
    assert key not in json.dumps(judge.stats.to_json())


def test_a_slow_judge_times_out_into_errors() -> None:
    fake = FakeProvider.from_script({"default": {"sleep": 2}}, model="judge")
    judge = ModelJudge(
        "fake:judge",
        provider=fake,
        retry=RetryPolicy.immediate(max_attempts=1, timeout_s=0.05),
    )
    verdicts = _run(judge, PAIRS)
    assert all(v.same is None for v in verdicts)
    assert "timed out" in judge.stats.error_examples[0]


def test_a_long_context_is_cut_to_windows_around_the_names() -> None:
    judge, fake = _judge({"default": _verdicts((1, True, "same"))})
    text = "x" * 10_000_000 + " Barack Obama spoke. " + "y" * 1000
    _run(judge, [JudgePair("Obama", "Barack Obama", "PER", text)])
    sent = fake.calls[0].user_text
    assert len(sent) < 20_000 and "Barack Obama spoke" in sent


def test_the_judge_stops_calling_at_its_budget() -> None:
    """``--max-cost`` counts the judge: once its spend reaches the budget, no more calls; the
    pairs left are counted errors, never matches."""
    fake = FakeProvider.from_script(
        {"default": _verdicts((1, True, "x"), (2, True, "y"))}, model="judge"
    )
    judge = ModelJudge(
        "fake:judge",
        provider=fake,
        retry=RetryPolicy.immediate(max_attempts=1),
        concurrency=1,
        max_cost_usd=0.5,
        price_in=1_000_000.0,  # a dollar a token: one call spends the budget
        price_out=1_000_000.0,
    )
    pairs = [*PAIRS, *(JudgePair(p.a, p.b, p.type, "another text") for p in PAIRS)]
    verdicts = _run(judge, pairs)
    assert len(fake.calls) == 1 and judge.stats.calls == 1
    assert judge.stats.cost_usd > 0.5
    assert sum(v.same is None for v in verdicts) == 2 and judge.stats.errors == 2
    assert any("budget" in line for line in judge.stats.error_examples)


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        ({"text": "Yes, they are the same company."}, "not JSON"),
        ({"json": {"answer": True}}, "wrong schema"),
        ({"json": {"verdicts": [{"id": 1, "same": "yes", "reason": "x"}]}}, "not true or false"),
        ({"error": 500}, "judge call failed"),
    ],
)
def test_a_failure_line_names_the_item_it_happened_on(step: dict[str, Any], problem: str) -> None:
    """Judged items run side by side: each failure line says which item's answer failed, so
    the few lines shown lead a person to it."""
    from extraction_eval.llm.context import item_context

    judge, _ = _judge({"default": step})

    async def both() -> None:
        async def one(item: str, text: str) -> None:
            with item_context(item):
                await judge.judge([JudgePair(p.a, p.b, p.type, text) for p in PAIRS])

        await asyncio.gather(one("doc-7", TEXT), one("doc-9", TEXT + " Again."))

    asyncio.run(both())
    lines = judge.stats.error_examples
    for item in ("doc-7", "doc-9"):
        assert any(x.startswith(f"item {item}: ") and problem in x for x in lines), lines
