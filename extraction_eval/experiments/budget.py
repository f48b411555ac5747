"""What a run will cost before it starts, and a spending ceiling while it runs.

**The estimate** (``estimate_cost``, pure: a notebook or a matrix of runs can call it and sum
the results with ``+``): one model call per item still to run (retries are not counted: they
are what the ceiling is for). Input tokens are counted on what is really sent: the prompt
template rendered for each item (system and user messages) plus the JSON schema of the answer
(structured outputs put it in the model's context), plus ``MESSAGE_OVERHEAD_TOKENS`` per
message. Output tokens are the item's gold extraction written as the JSON answer the model is
asked for. Text is turned into tokens at ``CHARS_PER_TOKEN`` characters a token: the model
tokenizers (tiktoken for OpenAI) download their vocabularies on first use, which an offline
run cannot do, and for English prose and JSON 4 characters a token is within about 20% of
them. Prices come from the same ``Pricer`` (genai-prices or ``--price-in`` / ``--price-out``)
that prices each item after its call, item by item (so per-request price tiers apply as they
will). Items already done in a resumed run and items whose answer is in the response cache
cost nothing and are not counted.

**The ceiling** (``Budget``): the run's spend so far (earlier invocations included) plus every
recorded item's cost; once it reaches ``max_cost`` no new item starts, items in flight finish
(so the spend can pass the ceiling by at most ``concurrency - 1`` items), and the rest stay
unrun for ``--resume`` with a higher ceiling.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from extraction_eval.datasets.jsonl import extraction_payload
from extraction_eval.errors import InvalidValue
from extraction_eval.pipeline.pricing import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    Pricer,
    chars_per_token,
)
from extraction_eval.prompts.contract import extraction_json_schema
from extraction_eval.prompts.template import PromptTemplate
from extraction_eval.types import DatasetItem, Schema, Usage

METHOD = f"{CHARS_PER_TOKEN:g} characters per token"

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class CostEstimate:
    """A run's (or several runs') estimated cost. ``usd`` is None when some calls have no
    price (``unpriced`` says why): a sum never pretends an unknown part costs 0."""

    items: int = 0  # items that will call the model
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    usd: float | None = 0.0
    skipped_done: int = 0  # already have a result (resume): not counted
    skipped_cached: int = 0  # answered from the response cache: not counted
    unpriced: tuple[str, ...] = ()
    method: str = METHOD

    def __add__(self, other: CostEstimate) -> CostEstimate:
        """Sum of two estimates (a matrix's cells)."""
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return CostEstimate(
            items=self.items + other.items,
            calls=self.calls + other.calls,
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            usd=usd,
            skipped_done=self.skipped_done + other.skipped_done,
            skipped_cached=self.skipped_cached + other.skipped_cached,
            unpriced=tuple(dict.fromkeys((*self.unpriced, *other.unpriced))),
            method=self.method if self.method == other.method else "mixed",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "usd": self.usd,
            "skipped_done": self.skipped_done,
            "skipped_cached": self.skipped_cached,
            "unpriced": list(self.unpriced),
            "method": self.method,
        }


def sum_estimates(estimates: Iterable[CostEstimate]) -> CostEstimate:
    total = CostEstimate()
    for estimate in estimates:
        total = total + estimate
    return total


def item_tokens(
    item: DatasetItem,
    prompt: PromptTemplate,
    *,
    count: TokenCounter = chars_per_token,
    contracts: dict[Any, Any] | None = None,
) -> tuple[int, int]:
    """(input, output) tokens of one item's call; ``contracts`` memoises what depends on the
    schema only (the output contract's size; at the default rate, each message's length
    without the text and how often the text appears in it)."""
    memo: dict[Any, Any] = contracts if contracts is not None else {}
    key = json.dumps(item.schema_.model_dump(mode="json"), sort_keys=True) if item.schema_ else ""
    if count is chars_per_token:  # a message's length is linear in the text's: no rendering
        tokens_in = sum(
            math.ceil((bare + times * len(item.text)) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS
            for bare, times in _message_shapes(prompt, item.schema_, key, memo)
        )
    else:
        tokens_in = sum(
            count(m.content) + MESSAGE_OVERHEAD_TOKENS
            for m in prompt.compile(item.text, item.schema_)
        )
    tokens_in += _contract_tokens(item.schema_, key, count, memo)
    answer = json.dumps(extraction_payload(item.expected), ensure_ascii=False)
    return tokens_in, count(answer)


def _message_shapes(
    prompt: PromptTemplate, schema: Schema | None, key: str, memo: dict[Any, Any]
) -> list[tuple[int, int]]:
    """Per message: (length rendered with an empty text, times the text is inserted). The
    template is filled in one pass, so a rendered message is exactly that long plus the
    text's length for each insertion."""
    memo_key = ("shapes", prompt.content_hash, key)
    if memo_key not in memo:
        empty = prompt.compile("", schema)
        one = prompt.compile("x", schema)
        memo[memo_key] = [
            (len(a.content), len(b.content) - len(a.content))
            for a, b in zip(empty, one, strict=True)
        ]
    shapes: list[tuple[int, int]] = memo[memo_key]
    return shapes


def _contract_tokens(
    schema: Schema | None, key: str, count: TokenCounter, memo: dict[Any, Any]
) -> int:
    if key not in memo:
        memo[key] = count(json.dumps(extraction_json_schema(schema), separators=(",", ":")))
    tokens: int = memo[key]
    return tokens


def estimate_cost(
    items: Iterable[DatasetItem],
    *,
    prompt: PromptTemplate,
    pricer: Pricer,
    cached: Callable[[DatasetItem], bool] | None = None,
    skipped_done: int = 0,
    count: TokenCounter = chars_per_token,
    method: str = METHOD,
) -> CostEstimate:
    """The estimate for calling the model once on each of ``items`` (those still to run).

    ``pricer`` decides what is called at all: the offline baseline calls nothing (cost 0); a
    user's pipeline (``pipeline``) makes calls we cannot see, so its cost is unknown.
    ``cached(item)`` says an item's answer is in the response cache (not counted).
    ``items`` may be a stream: it is read once, one item at a time."""
    if pricer.provider == "offline":  # ``items`` is not read at all
        return CostEstimate(skipped_done=skipped_done, method=method)
    if pricer.provider == "pipeline":
        return CostEstimate(
            items=sum(1 for _ in items),
            usd=None,
            skipped_done=skipped_done,
            unpriced=("a user pipeline's model calls are not known before it runs",),
            method=method,
        )
    hits = 0
    tokens_in = tokens_out = 0
    usd: float | None = 0.0
    reasons: list[str] = []
    contracts: dict[Any, Any] = {}
    rates = pricer.flat_rates()
    seen = 0
    for item in items:  # one pass, counting as it goes: the items are never all held
        seen += 1
        if cached is not None and cached(item):
            hits += 1
            continue
        t_in, t_out = item_tokens(item, prompt, count=count, contracts=contracts)
        tokens_in += t_in
        tokens_out += t_out
        if rates is not None:  # linear: the same figure as the database, without its cost
            if usd is not None:
                usd += (t_in * rates[0] + t_out * rates[1]) / 1e6
            continue
        cost = pricer.cost(Usage(tokens_in=t_in, tokens_out=t_out))
        if cost.usd is None:
            usd = None
            if cost.reason and cost.reason not in reasons:
                reasons.append(cost.reason)
        elif usd is not None:
            usd += cost.usd
    calls = seen - hits
    return CostEstimate(
        items=calls,
        calls=calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        usd=usd,
        skipped_done=skipped_done,
        skipped_cached=hits,
        unpriced=tuple(reasons),
        method=method,
    )


def check_estimate(max_cost: float | None, estimate: CostEstimate, spent: float = 0.0) -> None:
    """Refuse a run whose estimate (plus what it spent already) is above ``max_cost``, or
    whose cost cannot be estimated at all while a ceiling is asked for."""
    if max_cost is None:
        return
    if estimate.usd is None:
        why = "; ".join(estimate.unpriced) or "unknown price"
        raise InvalidValue(
            "max_cost",
            f"cannot be checked: the run's cost cannot be estimated ({why});"
            " give prices with {price_in}/{price_out}",
            mentions=("price_in", "price_out"),
        )
    total = spent + estimate.usd
    if total > max_cost:
        already = f" (${spent:.6f} spent already + ${estimate.usd:.6f})" if spent else ""
        raise InvalidValue(
            "max_cost",
            f"{max_cost:g} is below the estimated cost ${total:.6f}{already} of"
            f" {estimate.calls} calls, {estimate.tokens_in} tokens in /"
            f" {estimate.tokens_out} out; nothing was run",
        )


@dataclass
class Budget:
    """A run's spending ceiling, checked before each item starts (see the module docstring).
    Lives on the loop thread: ``add`` and ``exhausted`` are called between awaits."""

    ceiling_usd: float
    spent_usd: float = 0.0  # including earlier invocations of a resumed run
    held_back: int = 0  # times an item was held back because the ceiling was reached

    def add(self, usage: Usage) -> None:
        """Count an item's cost; a negative or non-finite one never un-spends the ceiling."""
        if usage.cost_usd is not None and math.isfinite(usage.cost_usd) and usage.cost_usd > 0:
            self.spent_usd += usage.cost_usd

    @property
    def exhausted(self) -> bool:
        # nothing spent is never exhausted: a ceiling of 0 still lets free items run (the
        # offline baseline, cached answers)
        return self.spent_usd > 0 and self.spent_usd >= self.ceiling_usd

    def to_json(self) -> dict[str, Any]:
        return {
            "max_cost_usd": self.ceiling_usd,
            "spent_usd": round(self.spent_usd, 9),
            "stopped": self.held_back > 0,
        }


def spent_before(costs: Mapping[str, float | None], rerun: Iterable[str]) -> float:
    """What a resumed run spent on the results it keeps (a re-run item's old row is replaced,
    so its old cost is not counted)."""
    skip = set(rerun)
    return sum(
        c
        for item_id, c in costs.items()
        if c is not None and math.isfinite(c) and c > 0 and item_id not in skip
    )
