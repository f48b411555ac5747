"""Cost from reported tokens: genai-prices' database, the user's override, cache hits, failures.

Expected figures are computed here from the price database entry (read through the package)
and the token counts, never copied from our output.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from genai_prices import data_snapshot

from extraction_eval.errors import SchemaFailure, UsageError
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.config import RunConfig, describe
from extraction_eval.experiments.runner import ItemRunner
from extraction_eval.llm.fake import FakeProvider
from extraction_eval.llm.retry import RetryPolicy
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.llm import LLMPipeline
from extraction_eval.pipeline.pricing import Pricer, check_prices, price_db_version
from extraction_eval.prompts.template import load_local_prompt
from extraction_eval.types import DatasetItem, Extraction, ItemResult, Usage
from extraction_eval.views.runs import cost_text
from tests.support.summaries import fold_summary

ANSWER = {"entities": [{"name": "Ada", "type": "person", "evidence": "Ada"}], "relationships": []}
ITEM = DatasetItem(id="i1", text="Ada works at Acme.")


def db_prices(model: str, provider_id: str) -> Any:
    """The database's current prices for ``model`` (Decimal USD per 1M tokens)."""
    _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    return info.get_prices(datetime.now(UTC))


def expected(prices: Any, tokens_in: int, tokens_out: int, cached: int = 0) -> float:
    total = (
        (tokens_in - cached) * prices.input_mtok
        + cached * (prices.cache_read_mtok if cached else 0)
        + tokens_out * prices.output_mtok
    ) / Decimal(1_000_000)
    return float(total)


# --- the pricer -----------------------------------------------------------------------------


def test_known_model_cost_is_tokens_times_the_database_prices() -> None:
    prices = db_prices("gpt-4o-mini", "openai")
    assert prices.input_mtok > 0 and prices.output_mtok > 0
    pricer = Pricer.for_config(PipelineConfig(model="openai:gpt-4o-mini"))
    # the model the provider reports (a dated snapshot name) is what is priced
    cost = pricer.cost(Usage(tokens_in=1200, tokens_out=345), "gpt-4o-mini-2024-07-18")
    assert cost.reason is None
    assert cost.usd == pytest.approx(expected(prices, 1200, 345), rel=1e-12)
    assert cost.details() == {
        "input": pytest.approx(float(1200 * prices.input_mtok / 1_000_000)),
        "output": pytest.approx(float(345 * prices.output_mtok / 1_000_000)),
    }


def test_cached_prompt_tokens_are_priced_at_the_cache_read_rate() -> None:
    prices = db_prices("gpt-4o-mini", "openai")
    assert prices.cache_read_mtok < prices.input_mtok
    pricer = Pricer("openai", "gpt-4o-mini")
    cost = pricer.cost(Usage(tokens_in=2000, tokens_out=100, tokens_cached=1500))
    assert cost.usd == pytest.approx(expected(prices, 2000, 100, cached=1500), rel=1e-12)
    assert cost.usd < pricer.cost(Usage(tokens_in=2000, tokens_out=100)).usd  # type: ignore[operator]


def test_gemini_is_looked_up_under_google() -> None:
    prices = db_prices("gemini-2.0-flash", "google")
    cost = Pricer("gemini", "gemini-2.0-flash").cost(Usage(tokens_in=900, tokens_out=80))
    assert cost.usd == pytest.approx(expected(prices, 900, 80), rel=1e-12)


def test_unknown_reported_model_falls_back_to_the_requested_one() -> None:
    prices = db_prices("gpt-4o-mini", "openai")
    cost = Pricer("openai", "gpt-4o-mini").cost(Usage(tokens_in=10, tokens_out=5), "local-alias")
    assert cost.usd == pytest.approx(expected(prices, 10, 5), rel=1e-12)


def test_unknown_model_has_no_cost_and_says_why() -> None:
    pricer = Pricer.for_config(PipelineConfig(model="openai:no-such-model-xyz"))
    cost = pricer.cost(Usage(tokens_in=10, tokens_out=5), "no-such-model-xyz")
    assert cost.usd is None and cost.reason == "unknown price for no-such-model-xyz"
    assert cost.details() is None
    usage = Usage(tokens_in=10, tokens_out=5)
    assert pricer.priced(usage, "no-such-model-xyz") == usage  # not a silent 0
    record = pricer.record()
    assert record["source"] == "genai-prices" and record["version"] == price_db_version()
    assert record["reason"] == "unknown price for no-such-model-xyz"
    assert "input_per_mtok" not in record


def test_record_names_the_database_version_and_the_prices_used() -> None:
    prices = db_prices("gpt-4o-mini", "openai")
    record = Pricer.for_config(PipelineConfig(model="openai:gpt-4o-mini")).record()
    assert record["source"] == "genai-prices"
    assert record["version"] == price_db_version() and record["version"]
    assert (record["provider_id"], record["model_ref"]) == ("openai", "gpt-4o-mini")
    assert record["model_id"] == "gpt-4o-mini"
    assert record["input_per_mtok"] == float(prices.input_mtok)
    assert record["output_per_mtok"] == float(prices.output_mtok)


def test_override_prices_replace_the_database() -> None:
    config = PipelineConfig(model="openai:my-vllm-model", price_in=2.0, price_out=8.0)
    pricer = Pricer.for_config(config)
    cost = pricer.cost(Usage(tokens_in=1000, tokens_out=500), "my-vllm-model")
    assert cost.usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)  # 0.006
    assert cost.details() == {"input": pytest.approx(0.002), "output": pytest.approx(0.004)}
    assert pricer.record() == {"source": "override", "input_per_mtok": 2.0, "output_per_mtok": 8.0}
    # a known model too: the override wins
    known = Pricer.for_config(PipelineConfig(model="openai:gpt-4o-mini", price_in=0, price_out=0))
    assert known.cost(Usage(tokens_in=1000, tokens_out=500)).usd == 0.0


def test_no_tokens_is_not_reported_and_offline_costs_nothing() -> None:
    cost = Pricer("openai", "gpt-4o-mini").cost(Usage())
    assert cost.usd is None and cost.reason == "not reported"
    offline = Pricer.for_config(PipelineConfig())
    assert offline.cost(Usage()).usd == 0.0 and offline.record() == {"source": "offline"}
    # a pipeline that reports its own cost keeps it
    assert Pricer("openai", "gpt-4o-mini").cost(Usage(tokens_in=5, cost_usd=1.5)).usd == 1.5


@pytest.mark.parametrize(
    ("price_in", "price_out", "message"),
    [
        (1.0, None, "price_out is needed too"),
        (None, 2.0, "price_in is needed too"),
        (-1.0, 2.0, "price_in must be a finite number >= 0"),
        (1.0, math.inf, "price_out must be a finite number >= 0"),
        (math.nan, 1.0, "price_in must be a finite number >= 0"),
    ],
)
def test_bad_override_is_a_one_line_usage_error(
    price_in: float | None, price_out: float | None, message: str
) -> None:
    with pytest.raises(UsageError, match=message) as info:
        PipelineConfig(model="openai:x", price_in=price_in, price_out=price_out)
    assert len(str(info.value).splitlines()) == 1
    check_prices(None, None)
    check_prices(0.0, 0.0)


def test_describe_records_pricing_and_the_override_resume_compares() -> None:
    plain = describe(RunConfig(pipeline=PipelineConfig(model="openai:gpt-4o-mini")))
    assert plain["pricing"]["source"] == "genai-prices" and plain["price_override"] is None
    assert plain["packages"]["genai-prices"] == price_db_version()
    priced = describe(
        RunConfig(pipeline=PipelineConfig(model="openai:m", price_in=1.0, price_out=3.0))
    )
    assert priced["pricing"]["source"] == "override" and priced["price_override"] == [1.0, 3.0]


# --- where outputs are built ------------------------------------------------------------------


def _pipeline(script: Any, config: PipelineConfig, cache: Any = None) -> LLMPipeline:
    fake = FakeProvider.from_script(script, model=config.model_name)
    return LLMPipeline(
        fake, load_local_prompt(), config, cache=cache, retry=RetryPolicy.immediate(max_attempts=1)
    )


class DictCache:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, completion: Any) -> None:
        self.data[key] = completion


def test_model_call_is_priced_and_a_cache_hit_costs_nothing_and_counts_no_tokens() -> None:
    prices = db_prices("gpt-4o-mini", "openai")
    config = PipelineConfig(model="openai:gpt-4o-mini")
    cache = DictCache()
    pipe = _pipeline({"default": {"json": ANSWER, "usage": {"input": 300, "output": 40}}}, config)
    pipe.cache = cache
    runner = ItemRunner(pipe, ScoringConfig(resamples=0), pricer=Pricer.for_config(config))
    first = asyncio.run(runner.run_item(ITEM))
    assert not first.cache_hit and (first.usage.tokens_in, first.usage.tokens_out) == (300, 40)
    assert first.usage.cost_usd == pytest.approx(expected(prices, 300, 40), rel=1e-12)
    again = asyncio.run(runner.run_item(ITEM))
    assert again.cache_hit
    assert again.usage == Usage(cost_usd=0.0)  # no tokens, no cost: nothing counted twice
    item_scores = [runner.score(ITEM, r.output) for r in (first, again)]
    summary = fold_summary([first, again], item_scores, ScoringConfig(resamples=0))
    assert (summary.tokens_in, summary.tokens_out) == (300, 40)
    assert summary.cost_usd == pytest.approx(round(expected(prices, 300, 40), 6))
    assert summary.unpriced_items == 0


def test_schema_failure_tokens_and_cost_are_counted_on_its_row() -> None:
    config = PipelineConfig(model="openai:gpt-4o-mini", price_in=1.0, price_out=2.0)
    broken = {"text": "{not json", "usage": {"input": 100, "output": 7}}
    pipe = _pipeline({"default": broken}, config)
    with pytest.raises(SchemaFailure) as info:
        asyncio.run(pipe.extract(ITEM))
    assert info.value.usage == Usage(tokens_in=100, tokens_out=7, cost_usd=(100 + 14) / 1e6)
    runner = ItemRunner(pipe, ScoringConfig(resamples=0), pricer=Pricer.for_config(config))
    row = asyncio.run(runner.run_item(ITEM))
    assert row.error_kind == "schema"
    assert row.usage.cost_usd == pytest.approx(114 / 1e6) and row.usage.tokens_in == 100


def test_unknown_model_rows_are_counted_as_unpriced_in_the_summary() -> None:
    rows = [
        ItemResult(item_id="a", output=Extraction(), usage=Usage(tokens_in=5, tokens_out=2)),
        ItemResult(item_id="b", output=Extraction(), usage=Usage(tokens_in=5, cost_usd=0.25)),
        ItemResult(item_id="c", output=Extraction()),
    ]
    scores = [ItemRunner(None, ScoringConfig(resamples=0)).score(ITEM, r.output) for r in rows]  # type: ignore[arg-type]
    summary = fold_summary(rows, scores, ScoringConfig(resamples=0))
    assert summary.unpriced_items == 1 and summary.cost_usd == 0.25
    assert summary.to_json()["unpriced_items"] == 1


# --- display ----------------------------------------------------------------------------------


def test_cost_text_never_shows_a_bare_dash() -> None:
    db = {"model": "openai:gpt-x", "pricing": {"source": "genai-prices", "version": "9.9",
                                                "model_ref": "gpt-x"}}  # fmt: skip
    assert cost_text(None, 3, db) == "unknown price for gpt-x"
    assert cost_text(None, 0, db) == "not reported"
    assert cost_text(0.0123, 0, db) == "0.012300 (genai-prices 9.9)"
    assert (
        cost_text(0.5, 2, db)
        == "0.500000 (genai-prices 9.9; 2 items not counted: unknown price for gpt-x)"
    )
    assert cost_text(0.0, 0, {"pricing": {"source": "offline"}}).startswith("0 (offline")
    override = {"pricing": {"source": "override", "input_per_mtok": 1.0, "output_per_mtok": 2.0}}
    assert "your prices: $1.0 in / $2.0 out per 1M tokens" in cost_text(0.1, 0, override)


# --- what the providers report ----------------------------------------------------------------


def test_providers_report_cached_and_thinking_tokens_the_way_they_are_billed() -> None:
    from google.genai import types as gtypes
    from openai.types.completion_usage import CompletionUsage, PromptTokensDetails

    from extraction_eval.llm.gemini_provider import _output_tokens
    from extraction_eval.llm.openai_provider import _cached_tokens

    # Gemini counts thinking apart from the answer but bills both as output
    meta = gtypes.GenerateContentResponseUsageMetadata(
        prompt_token_count=50, candidates_token_count=10, thoughts_token_count=5
    )
    assert _output_tokens(meta) == 15
    assert _output_tokens(gtypes.GenerateContentResponseUsageMetadata()) is None
    usage = CompletionUsage(
        prompt_tokens=2000,
        completion_tokens=10,
        total_tokens=2010,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=1536),
    )
    assert _cached_tokens(usage) == 1536
    assert (
        _cached_tokens(CompletionUsage(prompt_tokens=1, completion_tokens=1, total_tokens=2))
        is None
    )
