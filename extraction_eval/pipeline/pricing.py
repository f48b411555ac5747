"""What a model call cost, from the tokens its provider reported.

Prices come from the ``genai-prices`` database bundled with that package (a maintained, dated
price list; we never fetch updates, so a run's prices are the installed version's) or from the
user's own per-million-token prices (``--price-in`` / ``--price-out``, e.g. a self-hosted
model). Cost is computed where a pipeline's output is built, never in scoring, and a cost we
cannot compute is ``None`` with a reason rather than a silent zero.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from extraction_eval.errors import InvalidValue
from extraction_eval.types import Usage

if TYPE_CHECKING:
    from extraction_eval.pipeline.base import PipelineConfig

PRICE_DB = "genai-prices"
# How text becomes tokens when no tokenizer is at hand: the cost estimate's rule
# (``experiments.budget``), and the fallback for a call whose reported usage cannot be true.
CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 4  # role and separators of one chat message
# our provider name -> genai-prices provider id; others are looked up by model name alone
# (genai-prices carries Anthropic's published per-model prices, cache reads included:
# https://docs.anthropic.com/en/docs/about-claude/pricing)
PROVIDER_IDS = {"openai": "openai", "gemini": "google", "anthropic": "anthropic"}
NOT_REPORTED = "not reported"


def chars_per_token(text: str) -> int:
    """Tokens in ``text`` at ``CHARS_PER_TOKEN`` characters a token (rounded up)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimated_usage(
    messages: Iterable[str], contract: Mapping[str, Any] | None, answer: str, problem: str
) -> Usage:
    """A call's tokens counted as the cost estimate counts them (``CHARS_PER_TOKEN``), on
    what was really sent (each message, the JSON-schema contract) and received (the answer):
    the documented fallback when the server's own usage is missing or cannot be true, so
    the call is still priced, and never below zero. ``problem`` stays on the usage."""
    tokens_in = sum(chars_per_token(m) + MESSAGE_OVERHEAD_TOKENS for m in messages)
    if contract is not None:
        tokens_in += chars_per_token(json.dumps(contract, separators=(",", ":")))
    return Usage(tokens_in=tokens_in, tokens_out=chars_per_token(answer), problem=problem)


def check_prices(price_in: float | None, price_out: float | None) -> None:
    """Both or neither, each finite and >= 0: a one-line error otherwise."""
    if (price_in is None) != (price_out is None):
        missing = "price_out" if price_out is None else "price_in"
        raise InvalidValue(missing, "is needed too: prices go in pairs (USD per 1M tokens)")
    for field, value in (("price_in", price_in), ("price_out", price_out)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise InvalidValue(
                field, f"must be a finite number >= 0 (USD per 1M tokens), got {value}"
            )


def price_db_version() -> str | None:
    try:
        return importlib.metadata.version(PRICE_DB)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Cost:
    """A call's cost in USD, split like LangFuse's ``cost_details``; ``reason`` when unknown."""

    usd: float | None
    input_usd: float | None = None
    output_usd: float | None = None
    reason: str | None = None

    def details(self) -> dict[str, float] | None:
        """LangFuse ``cost_details`` (it adds the total itself)."""
        if self.input_usd is None or self.output_usd is None:
            return None
        return {"input": self.input_usd, "output": self.output_usd}


def _per_mtok(value: Any) -> float | None:
    """A genai-prices price (a Decimal, or tiered prices: their base) as a float."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return float(value)
    base = getattr(value, "base", None)
    return float(base) if isinstance(base, Decimal) else None


def _reported(usage: Usage) -> bool:
    return usage.tokens_in is not None or usage.tokens_out is not None


@dataclass(frozen=True)
class Pricer:
    """Prices one run's calls. ``provider`` is ours (``openai``, ``anthropic``, ``gemini``,
    ``offline``, ``pipeline`` for a user's function); ``model`` the requested model name."""

    provider: str
    model: str | None
    price_in: float | None = None
    price_out: float | None = None

    @classmethod
    def for_config(cls, config: PipelineConfig) -> Pricer:
        if config.pipeline:
            provider, model = "pipeline", None
        else:
            provider, model = config.provider, config.model_name
        return cls(provider, model, config.price_in, config.price_out)

    @property
    def override(self) -> bool:
        return self.price_in is not None and self.price_out is not None

    def cost(self, usage: Usage, model: str | None = None) -> Cost:
        """The cost of ``usage`` for ``model`` (what the provider reported), falling back to the
        requested model when the reported one is not in the price database."""
        if usage.cost_usd is not None:  # the pipeline reported its own cost
            if not (math.isfinite(usage.cost_usd) and usage.cost_usd >= 0):
                return Cost(None, reason=f"reported cost {usage.cost_usd} is not >= 0")
            return Cost(usage.cost_usd)
        if self.provider == "offline":
            return Cost(0.0, 0.0, 0.0)
        if not _reported(usage):
            return Cost(None, reason=NOT_REPORTED)
        # never below zero, whatever a pipeline put in its usage
        tokens_in, tokens_out = max(usage.tokens_in or 0, 0), max(usage.tokens_out or 0, 0)
        if self.price_in is not None and self.price_out is not None:
            cost_in = tokens_in * self.price_in / 1e6
            cost_out = tokens_out * self.price_out / 1e6
            return Cost(cost_in + cost_out, cost_in, cost_out)
        refs = [m for m in dict.fromkeys((model, self.model)) if m]
        if not refs:
            return Cost(None, reason="unknown model")
        for ref in refs:
            calc = _calc(ref, self.provider, tokens_in, tokens_out, usage.tokens_cached)
            if calc is not None:
                return Cost(
                    float(calc.total_price), float(calc.input_price), float(calc.output_price)
                )
        return Cost(None, reason=f"unknown price for {refs[0]}")

    def flat_rates(self) -> tuple[float, float] | None:
        """USD per 1M input / output tokens when a call's price is linear in its tokens (your
        prices, or a database price without tiers or a per-request fee), else None. Lets a
        cost estimate over many items skip the database's per-call computation."""
        if self.price_in is not None and self.price_out is not None:
            return self.price_in, self.price_out
        if self.provider in ("offline", "pipeline") or self.model is None:
            return None
        found = _lookup(self.model, self.provider)
        if found is None:
            return None
        prices = found[1]
        rate_in, rate_out = prices.input_mtok, prices.output_mtok
        if getattr(prices, "requests_kpr", None) is not None:
            return None
        if isinstance(rate_in, Decimal) and isinstance(rate_out, Decimal):
            return float(rate_in), float(rate_out)
        return None

    def priced(self, usage: Usage, model: str | None = None) -> Usage:
        """``usage`` with its cost filled in (unchanged when it has one or none can be had);
        a cost a pipeline reported that is negative or not finite is dropped (unpriced)."""
        if usage.cost_usd is not None:
            if math.isfinite(usage.cost_usd) and usage.cost_usd >= 0:
                return usage
            return usage.model_copy(update={"cost_usd": None})
        cost = self.cost(usage, model)
        return usage if cost.usd is None else usage.model_copy(update={"cost_usd": cost.usd})

    def record(self) -> dict[str, Any]:
        """Where this run's prices come from, for the run record and the experiment metadata."""
        if self.provider == "offline":
            return {"source": "offline"}
        if self.price_in is not None and self.price_out is not None:
            return {
                "source": "override",
                "input_per_mtok": self.price_in,
                "output_per_mtok": self.price_out,
            }
        record: dict[str, Any] = {
            "source": PRICE_DB,
            "version": price_db_version(),
            "snapshot": "bundled",  # the package's own data; never updated from the network
            "provider_id": PROVIDER_IDS.get(self.provider),
            "model_ref": self.model,
        }
        if self.model is None:  # a user's pipeline: priced by the model each output names
            return record
        found = _lookup(self.model, self.provider)
        if found is None:
            record["reason"] = f"unknown price for {self.model}"
            return record
        model_id, prices = found
        record["model_id"] = model_id
        record["input_per_mtok"] = _per_mtok(prices.input_mtok)
        record["output_per_mtok"] = _per_mtok(prices.output_mtok)
        record["cache_read_per_mtok"] = _per_mtok(prices.cache_read_mtok)
        return record


def _lookup(model: str, provider: str) -> tuple[str, Any] | None:
    """The database's model id and current prices for ``model``, or None when unknown."""
    from datetime import UTC, datetime

    from genai_prices import data_snapshot

    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(
            model, None, PROVIDER_IDS.get(provider), None
        )
    except LookupError:
        return None
    return info.id, info.get_prices(datetime.now(UTC))


@functools.lru_cache(maxsize=256)
def _in_database(model: str, provider: str) -> bool:
    """Whether the price database knows ``model``. Remembered per run's models: genai-prices
    caches the models it finds but scans its whole table again for every unknown one (about
    0.5 ms, paid on each item of a run against a self-hosted or unlisted model)."""
    from genai_prices import data_snapshot

    try:
        data_snapshot.get_snapshot().find_provider_model(
            model, None, PROVIDER_IDS.get(provider), None
        )
    except LookupError:
        return False
    return True


def _calc(
    model: str, provider: str, tokens_in: int, tokens_out: int, tokens_cached: int | None
) -> Any:
    """genai-prices' ``PriceCalculation``, or None when the model (or usage) has no price."""
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    if not _in_database(model, provider):
        return None
    usage = PriceUsage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cache_read_tokens=tokens_cached or None,  # part of input_tokens, priced lower
    )
    try:
        return calc_price(usage, model, provider_id=PROVIDER_IDS.get(provider))
    except (LookupError, ValueError):
        return None


def batch_cost(cost: Cost) -> Cost:
    """A batch API answer's cost: the synchronous price times the batch discount."""
    from extraction_eval.llm.batch import BATCH_DISCOUNT

    def scaled(x: float | None) -> float | None:
        return None if x is None else x * BATCH_DISCOUNT

    return Cost(
        usd=scaled(cost.usd),
        input_usd=scaled(cost.input_usd),
        output_usd=scaled(cost.output_usd),
        reason=cost.reason,
    )
