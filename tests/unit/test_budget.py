"""The cost estimate (pure) and the spending ceiling's scheduling, on hand-built inputs."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.budget import (
    MESSAGE_OVERHEAD_TOKENS,
    Budget,
    CostEstimate,
    check_estimate,
    estimate_cost,
    spent_before,
    sum_estimates,
)
from extraction_eval.experiments.runner import run_bounded
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.prompts.contract import extraction_json_schema
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.types import DatasetItem, Entity, Extraction, ItemResult, Usage

PROMPT = PromptTemplate(
    name="t",
    messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "T: {{text}}"}],
)
# the answer's JSON schema, as sent with every call (structured outputs)
CONTRACT = len(json.dumps(extraction_json_schema(None), separators=(",", ":")))


def _item(item_id: str, text: str, names: list[str]) -> DatasetItem:
    gold = Extraction(entities=[Entity(name=n, type="person") for n in names])
    return DatasetItem(id=item_id, text=text, expected=gold)


ITEMS = [_item("a", "abcdefgh", ["Ann"]), _item("b", "x" * 40, [])]


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def test_tokens_are_counted_on_the_rendered_prompt_schema_and_gold_answer() -> None:
    pricer = Pricer("openai", "anything", price_in=2.0, price_out=10.0)
    est = estimate_cost(ITEMS, prompt=PROMPT, pricer=pricer)
    # item a: "S" (1 char), "T: abcdefgh" (11 chars); b: "S", "T: " + 40 x (43 chars)
    in_a = _tokens(1) + _tokens(11) + 2 * MESSAGE_OVERHEAD_TOKENS + _tokens(CONTRACT)
    in_b = _tokens(1) + _tokens(43) + 2 * MESSAGE_OVERHEAD_TOKENS + _tokens(CONTRACT)
    answer_a = '{"entities": [{"name": "Ann", "type": "person"}], "relationships": []}'
    answer_b = '{"entities": [], "relationships": []}'
    out_a, out_b = _tokens(len(answer_a)), _tokens(len(answer_b))
    assert (est.items, est.calls) == (2, 2)
    assert est.tokens_in == in_a + in_b
    assert est.tokens_out == out_a + out_b
    assert est.usd == pytest.approx(((in_a + in_b) * 2 + (out_a + out_b) * 10) / 1e6)


def test_cached_items_are_not_counted_and_done_ones_are_reported() -> None:
    pricer = Pricer("openai", "anything", price_in=1.0, price_out=1.0)
    est = estimate_cost(
        ITEMS, prompt=PROMPT, pricer=pricer, cached=lambda i: i.id == "a", skipped_done=5
    )
    full = estimate_cost(ITEMS[1:], prompt=PROMPT, pricer=pricer)
    assert (est.calls, est.skipped_cached, est.skipped_done) == (1, 1, 5)
    assert (est.tokens_in, est.tokens_out, est.usd) == (full.tokens_in, full.tokens_out, full.usd)


def test_prices_come_from_genai_prices_for_a_known_model() -> None:
    est = estimate_cost(ITEMS, prompt=PROMPT, pricer=Pricer("openai", "gpt-4o-mini"))
    per_item = [
        Pricer("openai", "gpt-4o-mini").cost(Usage(tokens_in=t_in, tokens_out=t_out)).usd
        for t_in, t_out in _per_item(ITEMS)
    ]
    assert est.usd is not None and est.usd > 0
    assert est.usd == pytest.approx(sum(u for u in per_item if u is not None))


def _per_item(items: list[DatasetItem]) -> list[tuple[int, int]]:
    from extraction_eval.experiments.budget import item_tokens

    return [item_tokens(i, PROMPT) for i in items]


def test_offline_costs_nothing_unknown_models_and_user_pipelines_are_unknown() -> None:
    offline = estimate_cost(ITEMS, prompt=PROMPT, pricer=Pricer("offline", "baseline"))
    assert (offline.calls, offline.usd) == (0, 0.0)
    unknown = estimate_cost(ITEMS, prompt=PROMPT, pricer=Pricer("fake", "no-such-model-xyz"))
    assert unknown.usd is None and unknown.calls == 2
    assert unknown.unpriced == ("unknown price for no-such-model-xyz",)
    user = estimate_cost(ITEMS, prompt=PROMPT, pricer=Pricer("pipeline", None))
    assert user.usd is None and "user pipeline" in user.unpriced[0]


def test_estimates_sum_for_a_matrix_and_an_unknown_part_stays_unknown() -> None:
    a = CostEstimate(items=2, calls=2, tokens_in=10, tokens_out=4, usd=0.5, skipped_cached=1)
    b = CostEstimate(items=3, calls=3, tokens_in=20, tokens_out=6, usd=0.25, skipped_done=2)
    total = sum_estimates([a, b])
    assert total == CostEstimate(
        items=5, calls=5, tokens_in=30, tokens_out=10, usd=0.75, skipped_done=2, skipped_cached=1
    )
    unknown = CostEstimate(items=1, calls=1, usd=None, unpriced=("unknown price for m",))
    assert (a + unknown).usd is None and (a + unknown).unpriced == ("unknown price for m",)


def test_check_estimate_refuses_above_the_ceiling_counting_what_was_spent() -> None:
    est = CostEstimate(items=1, calls=1, tokens_in=1, tokens_out=1, usd=0.4)
    check_estimate(None, est)
    check_estimate(0.4, est)
    with pytest.raises(InvalidValue, match="estimated cost") as info:
        check_estimate(0.39, est)
    assert info.value.field == "max_cost"
    with pytest.raises(InvalidValue, match="spent already"):
        check_estimate(0.5, est, spent=0.2)
    with pytest.raises(InvalidValue, match="cannot be estimated"):
        check_estimate(10, CostEstimate(usd=None, unpriced=("x",)))


def test_budget_and_spent_before() -> None:
    budget = Budget(0.0)
    assert not budget.exhausted  # nothing spent: free items still run under a 0 ceiling
    budget.add(Usage(cost_usd=None))
    assert not budget.exhausted
    budget = Budget(0.03, spent_usd=0.01)
    budget.add(Usage(cost_usd=0.01))
    assert not budget.exhausted
    budget.add(Usage(cost_usd=0.01))
    assert budget.exhausted
    # a re-run item's old cost is replaced, so it is not spent "before"
    assert spent_before({"a": 0.5, "b": 0.25, "c": None}, ["b"]) == 0.5


def test_run_bounded_starts_no_item_after_the_ceiling_and_finishes_those_in_flight() -> None:
    budget = Budget(0.025)
    started: list[str] = []
    recorded: list[str] = []

    async def run_item(item: DatasetItem) -> ItemResult:
        started.append(item.id)
        await asyncio.sleep(0.01)
        return ItemResult(item_id=item.id, usage=Usage(cost_usd=0.01))

    def on_result(result: ItemResult) -> None:
        budget.add(result.usage)
        recorded.append(result.item_id)

    items = [_item(f"i{n}", "t", []) for n in range(10)]
    asyncio.run(
        run_bounded(
            items,
            run_item,
            concurrency=2,
            on_result=on_result,
            may_start=lambda: not budget.exhausted,
        )
    )
    # two at a time: i0+i1 ($0.02), then i2+i3 start; after i2 ($0.03) nothing new starts,
    # i3 (in flight) still finishes and is recorded
    assert started == ["i0", "i1", "i2", "i3"]
    assert recorded == started
    assert budget.spent_usd == pytest.approx(0.04)


def test_the_default_rate_counts_without_rendering_exactly_as_rendering_does() -> None:
    """At the default rate a message's length is computed from its shape (length without the
    text, times the text is inserted); it must equal counting the rendered prompt."""
    from extraction_eval.experiments.budget import chars_per_token, item_tokens
    from extraction_eval.prompts.template import load_local_prompt
    from extraction_eval.types import Schema

    twice = PromptTemplate(
        name="t2",
        messages=[
            {"role": "system", "content": "types: {{entity_types}}"},
            {"role": "user", "content": "{{text}} / again: {{text}} {{unknown}}"},
        ],
    )
    schema = Schema(entity_types=["person", "place"], relationship_types=["born_in"])
    texts = ["", "abc", "ünïcödé 🙂 " * 7, "a {{text}} inside {{entity_types}}", "x" * 1001]
    rendering = lambda text: chars_per_token(text)  # noqa: E731  (another counter: renders)
    for prompt in (PROMPT, twice, load_local_prompt()):
        memo: dict[object, object] = {}  # shared across items, as estimate_cost shares it
        for n, text in enumerate(texts):
            for item_schema in (None, schema):
                item = DatasetItem(
                    id=f"i{n}", text=text, expected=ITEMS[0].expected, schema_=item_schema
                )
                fast = item_tokens(item, prompt, contracts=memo)
                assert fast == item_tokens(item, prompt, count=rendering), (prompt.name, text)
