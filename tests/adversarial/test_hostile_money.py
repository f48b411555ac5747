"""A model server that lies about money: usage that is negative, fractional, absurd, a string
or missing never un-spends ``--max-cost`` and never gives a negative cost (the item's row says
its usage was estimated, and why); and a ceiling below the estimate is refused before the
response-format probe calls the server at all."""

from __future__ import annotations

import asyncio
import itertools
import math
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.budget import Budget
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local
from extraction_eval.experiments.runner import USAGE_SCORE
from extraction_eval.limits import MAX_REPORTED_TOKENS
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.types import Usage
from tests.support.openai_server import OMIT_USAGE, LoopbackServer, baseline_answer, input_text
from tests.support.tally import Tally

DATASET = "extraction-eval"
PRICE = 1.0  # USD per 1M tokens, in and out
HONEST_TOKENS = 1_000_000  # an honest heavy call: $1 at PRICE
MAX_COST = 3 * HONEST_TOKENS * PRICE / 1e6  # three honest calls reach the ceiling
HOSTILE: dict[str, Any] = {
    "negative": {"prompt_tokens": -100_000_000, "completion_tokens": 10},
    "negative out": {"prompt_tokens": 10, "completion_tokens": -5},
    "fraction": {"prompt_tokens": 12.5, "completion_tokens": 3},
    "absurd": {"prompt_tokens": MAX_REPORTED_TOKENS * 10**6, "completion_tokens": 3},
    "string": {"prompt_tokens": "lots", "completion_tokens": 3},
    "boolean": {"prompt_tokens": True, "completion_tokens": 3},
    "null": None,
    "missing": OMIT_USAGE,
    "empty": {},
}


def _pipeline(url: str, **kw: Any) -> PipelineConfig:
    return PipelineConfig(model="openai:m", base_url=url, price_in=PRICE, price_out=PRICE, **kw)


def test_negative_usage_does_not_unspend_max_cost(tally: Tally) -> None:
    """The issue's case: -100,000,000 prompt tokens on every other call let all 40 items run
    at --max-cost 3 (the budget said -1778 spent). Now the ceiling stops the run."""
    items = 40
    calls = itertools.count()

    def usage(_: dict[str, Any]) -> Any:
        if next(calls) % 2:
            return HOSTILE["negative"]
        return {"prompt_tokens": HONEST_TOKENS, "completion_tokens": 0}

    store = LocalStore()
    with LoopbackServer(answer=baseline_answer, usage=usage) as server:
        config = RunConfig(
            name="negative",
            limit=items,
            concurrency=1,
            max_cost=MAX_COST,
            pipeline=_pipeline(server.url, response_format="json_schema"),
        )
        outcome = asyncio.run(arun_local(config, store=store))
    rows = outcome.results
    budget = outcome.budget or {}
    one_call = HONEST_TOKENS * PRICE / 1e6
    held = (
        outcome.stopped_by_budget
        and len(rows) < items
        and MAX_COST <= budget["spent_usd"] <= MAX_COST + one_call  # concurrency 1: one over
        and all(r.usage.cost_usd is not None and r.usage.cost_usd >= 0 for r in rows)
    )
    tally.input(held)
    assert outcome.stopped_by_budget, budget
    assert len(rows) < items
    assert MAX_COST <= budget["spent_usd"] <= MAX_COST + one_call, budget
    estimated = [r for r in rows if any(s.name == USAGE_SCORE for s in r.scores)]
    assert len(estimated) == len(rows) // 2  # every other call lied
    for row in rows:
        assert row.usage.cost_usd is not None and row.usage.cost_usd >= 0, row
    assert any("usage" in w and USAGE_SCORE in w for w in outcome.warnings), outcome.warnings


def test_every_hostile_usage_is_estimated_and_recorded(tally: Tally) -> None:
    """Each kind of usage that cannot be true is that item's recorded problem (score
    ``usage_estimated``, comment naming the field) and is priced by the estimate, >= 0."""
    store = LocalStore()
    items = store.get_items(DATASET)[: len(HOSTILE)]
    kind_of = {item.text: kind for item, kind in zip(items, HOSTILE, strict=True)}

    def usage(body: dict[str, Any]) -> Any:
        return HOSTILE[kind_of[input_text(body)]]

    with LoopbackServer(answer=baseline_answer, usage=usage) as server:
        config = RunConfig(
            name="hostile-usage",
            limit=len(items),
            concurrency=2,
            max_cost=1.0,
            pipeline=_pipeline(server.url, response_format="json_schema"),
        )
        outcome = asyncio.run(arun_local(config, store=store))
    rows = {r.item_id: r for r in outcome.results}
    budget = outcome.budget or {}
    for item, kind in zip(items, HOSTILE, strict=True):
        row = rows.get(item.id)
        score = next((s for s in row.scores if s.name == USAGE_SCORE), None) if row else None
        cost = row.usage.cost_usd if row else None
        held = (
            row is not None
            and row.error is None
            and score is not None
            and isinstance(score.comment, str)
            and score.comment.startswith("usage: ")
            and (row.usage.tokens_in or 0) > 0
            and cost is not None
            and math.isfinite(cost)
            and 0 < cost < 1.0
        )
        tally.input(held)
        assert held, (kind, row)
    assert 0 < budget["spent_usd"] < 1.0 and not outcome.stopped_by_budget, budget


def test_gemini_negative_usage_is_estimated_too(
    monkeypatch: pytest.MonkeyPatch, tally: Tally
) -> None:
    """The Gemini SDK validates its usage as integers: a negative count passes it."""
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test-dummy")
    negative = {"promptTokenCount": -100_000_000, "candidatesTokenCount": 3}
    store = LocalStore()
    with LoopbackServer(answer=baseline_answer, usage=lambda _: negative) as server:
        config = RunConfig(
            name="gemini-negative",
            limit=2,
            max_cost=1.0,
            pipeline=PipelineConfig(
                model="gemini:g", base_url=server.root_url, price_in=PRICE, price_out=PRICE
            ),
        )
        outcome = asyncio.run(arun_local(config, store=store))
    rows = outcome.results
    for row in rows:
        score = next((s for s in row.scores if s.name == USAGE_SCORE), None)
        cost = row.usage.cost_usd
        held = score is not None and "promptTokenCount" in str(score.comment)
        held = held and cost is not None and cost > 0
        tally.input(held)
        assert held, row
    assert len(rows) == 2 and (outcome.budget or {})["spent_usd"] > 0


def test_max_cost_below_the_estimate_costs_no_call(tally: Tally) -> None:
    """The response-format probe (up to 4 requests, each with retries) ran before the
    budget's refusal; the refusal now comes first and the server sees nothing."""
    store = LocalStore()
    with LoopbackServer(answer=baseline_answer) as server:
        config = RunConfig(
            name="refused",
            limit=10,
            max_cost=1e-9,
            pipeline=_pipeline(server.url),  # response_format auto: would be probed
        )
        with pytest.raises(InvalidValue) as refused:
            asyncio.run(arun_local(config, store=store))
        calls = len(server.chat_requests)
    tally.input(calls == 0 and refused.value.field == "max_cost")
    assert refused.value.field == "max_cost"
    assert calls == 0
    assert store.get_run("refused", DATASET) is None  # nothing was created either


@pytest.mark.parametrize("cost", [-5.0, float("-inf"), float("nan"), float("inf")])
def test_a_cost_a_pipeline_reports_that_cannot_be_true_is_not_counted(
    tally: Tally, cost: float
) -> None:
    """A custom pipeline (the Python API) sets ``Usage.cost_usd`` itself: a negative or
    non-finite one is left unpriced, and the ceiling never goes down."""
    priced = Pricer("pipeline", None).priced(Usage(cost_usd=cost))
    budget = Budget(MAX_COST, spent_usd=1.0)
    budget.add(Usage(cost_usd=cost))
    held = priced.cost_usd is None and budget.spent_usd == 1.0
    tally.input(held)
    assert priced.cost_usd is None
    assert budget.spent_usd == 1.0
