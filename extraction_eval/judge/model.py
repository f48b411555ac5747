"""A judge backed by any provider the runner has (``openai:``, ``anthropic:``, ``gemini:``, a
compatible base URL, the test ``fake``), through the runner's retry policy, timeouts and pricing.

The pairs of one context go to the model together (at most ``BATCH`` a call); each verdict is
cached on its own under a key of the judge model, the endpoint, the judge prompt's version and
hash, the context and the pair, so an unchanged re-run makes no call. A failed call, an
answer that is not JSON, a wrong schema, a missing verdict or an answer quoting a secret is
one line in the stats and a ``same=None`` verdict for the pairs concerned: never an
exception, never a match.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from extraction_eval.errors import one_line
from extraction_eval.judge.base import JudgePair, JudgeStats, Verdict
from extraction_eval.judge.prompt import BUILTIN, JUDGE_SCHEMA, JudgePrompt, context_for, messages
from extraction_eval.llm.base import Completion, CompletionRequest, Provider, ResponseCache
from extraction_eval.llm.context import current_item_id
from extraction_eval.llm.retry import RetryPolicy, call_with_retry
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.llm import cache_key
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.redact import redact, safe_url
from extraction_eval.types import Usage

BATCH = 20  # pairs per call: one call settles a typical item's candidates
MAX_REASON_CHARS = 300


class BadAnswer(Exception):
    """The judge's answer cannot be read as verdicts (one line, redacted)."""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def _on_item(line: str) -> str:
    """``line`` naming the item whose pairs it concerns (set by the caller's
    ``item_context``), so a person can find the answer that failed; as is without one."""
    item = current_item_id.get()
    return f"item {item}: {line}" if item else line


def parse_verdicts(text: str, n: int) -> dict[int, tuple[bool, str] | str]:
    """Pair number (1..n) -> (same, reason), or a one-line problem for that pair. Raises
    :class:`BadAnswer` when the answer as a whole is unusable (prose, wrong schema)."""
    body = text.strip()
    if body.startswith("```"):  # a fenced block: the JSON inside it
        body = body.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        raise BadAnswer("the judge answered with text that is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("verdicts"), list):
        raise BadAnswer('the judge\'s JSON has no "verdicts" list (wrong schema)')
    out: dict[int, tuple[bool, str] | str] = {}
    for entry in data["verdicts"]:
        if not isinstance(entry, dict):
            continue
        number, same, reason = entry.get("id"), entry.get("same"), entry.get("reason", "")
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= n:
            continue
        if not isinstance(same, bool):
            out[number] = f'pair {number}: "same" is not true or false (wrong schema)'
            continue
        reason = " ".join(str(reason).split())[:MAX_REASON_CHARS]
        if redact(reason) != reason:
            out[number] = f"pair {number}: the judge's reason quoted a secret; verdict not used"
            continue
        out[number] = (same, reason)
    return out


class ModelJudge:
    """Judges pairs with a model. ``provider`` may be given (tests); otherwise it is made
    from ``model`` and ``base_url`` like a run's."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        cache: ResponseCache | None = None,
        retry: RetryPolicy | None = None,
        provider: Provider | None = None,
        timeout_s: float = 60.0,
        max_attempts: int = 4,
        concurrency: int = 4,
        response_format: str = "auto",
        max_cost_usd: float | None = None,
        price_in: float | None = None,
        price_out: float | None = None,
        prompt: JudgePrompt = BUILTIN,
    ) -> None:
        from extraction_eval.llm.registry import make_provider

        self.config = PipelineConfig(
            model=model,
            base_url=base_url,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
            response_format=response_format,  # auto: detected before the first call
            price_in=price_in,  # USD per 1M tokens, both or neither (self-hosted judges)
            price_out=price_out,
        )
        self.provider = provider if provider is not None else make_provider(self.config)
        self.cache = cache
        # the built-in text, or LangFuse's version of it (judge/managed.py): set before judging
        self.prompt = prompt
        self.retry = retry or RetryPolicy.from_config(
            max_attempts=max_attempts, timeout_s=timeout_s, extra={}
        )
        self._pricer = Pricer.for_config(self.config)
        self._stats = JudgeStats()
        self.concurrency = max(1, concurrency)  # calls in flight at once
        # USD the judge may spend (``--max-cost`` left over by the run), checked before each
        # call: calls already in flight may pass it by their own cost
        self.max_cost_usd = max_cost_usd
        self._format_settled = False
        self._loop: asyncio.AbstractEventLoop | None = None  # what the lock and gate are for
        self._format_lock = asyncio.Lock()
        self._gate = asyncio.Semaphore(self.concurrency)

    @property
    def endpoint(self) -> str | None:
        found = getattr(self.provider, "endpoint", None) or self.config.base_url
        return safe_url(str(found)) if found else None

    @property
    def identity(self) -> str:
        where = f" at {self.endpoint}" if self.endpoint else ""
        return f"{self.config.model}{where} prompt {self.prompt.ref}"

    @property
    def stats(self) -> JudgeStats:
        return self._stats

    def key_for(self, pair: JudgePair, context_digest: str) -> str:
        """The verdict's cache key: what changes the answer, and nothing else."""
        return cache_key(
            kind="judge-verdict",
            provider=self.provider.name,
            model=self.config.model_name,
            endpoint=self.endpoint,
            prompt=self.prompt.ref,
            context=context_digest,
            a=pair.a,
            b=pair.b,
            type=pair.type,
        )

    def _cached(self, key: str) -> Verdict | None:
        if self.cache is None:
            return None
        found = self.cache.get(key)
        if found is None:
            return None
        try:
            data = json.loads(found.text)
            same, reason = data["same"], data["reason"]
        except (ValueError, KeyError, TypeError):
            return None  # a stale or foreign entry: ask again
        if not isinstance(same, bool) or not isinstance(reason, str):
            return None
        return Verdict(same, reason, "cache")

    async def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # asyncio's lock and semaphore belong to one loop
            self._loop = loop
            self._format_lock = asyncio.Lock()
            self._gate = asyncio.Semaphore(self.concurrency)
        self._stats.pairs += len(pairs)
        out: list[Verdict | None] = [None] * len(pairs)
        todo: dict[str, list[tuple[int, str]]] = {}  # context -> [(position, key)]
        digests: dict[str, str] = {}  # one hash per distinct context, however long
        for i, pair in enumerate(pairs):
            context = pair.context
            if context not in digests:
                digests[context] = _digest(context)
            key = self.key_for(pair, digests[context])
            hit = self._cached(key)
            if hit is not None:
                self._stats.cache_hits += 1
                out[i] = hit
            else:
                todo.setdefault(context, []).append((i, key))
        chunks = [
            (context, waiting[start : start + BATCH])
            for context, waiting in todo.items()
            for start in range(0, len(waiting), BATCH)
        ]
        if chunks:
            await self._settle_format(chunks[0][0], [pairs[i] for i, _ in chunks[0][1]])
        gate = self._gate  # one gate for every batch of this judge, whoever asks

        async def settle(context: str, chunk: list[tuple[int, str]]) -> None:
            async with gate:
                answers = await self._ask(context, [pairs[i] for i, _ in chunk])
            for (i, key), answer in zip(chunk, answers, strict=True):
                out[i] = answer
                if answer.same is not None and self.cache is not None:
                    body = json.dumps({"same": answer.same, "reason": answer.reason})
                    self.cache.put(key, Completion(body, self.config.model_name))

        await asyncio.gather(*(settle(c, chunk) for c, chunk in chunks))
        return [v if v is not None else Verdict(None, "", "error", "no verdict") for v in out]

    async def _settle_format(self, context: str, batch: Sequence[JudgePair]) -> None:
        """How the server is asked for JSON, detected once before the first call, as a run
        does (``llm/formats.py``): llama.cpp's server refuses ``json_schema`` but follows the
        schema as ``json_object``; an Anthropic gateway without tool use is asked for text.
        Never when every verdict came from the cache. A server that refuses every format
        leaves the strongest one: its calls then fail as counted errors."""
        from extraction_eval.llm.anthropic_provider import AnthropicProvider
        from extraction_eval.llm.openai_provider import OpenAIProvider

        async with self._format_lock:
            provider = self.provider
            if self._format_settled or not isinstance(
                provider, (OpenAIProvider, AnthropicProvider)
            ):
                self._format_settled = True
                return
            from extraction_eval.errors import ConfigError
            from extraction_eval.llm.formats import resolve

            def conforms(text: str) -> bool:
                try:
                    parse_verdicts(text, len(batch))
                except BadAnswer:
                    return False
                return True

            request = self._request(context, batch)
            try:
                await asyncio.to_thread(resolve, provider, request, self.retry, conforms=conforms)
            except ConfigError as exc:
                self._stats.failed(f"judge response format: {one_line(exc)}", 0)
            self._format_settled = True

    def _request(self, context: str, batch: Sequence[JudgePair]) -> CompletionRequest:
        shown = context_for(context, [n for p in batch for n in (p.a, p.b)])
        return CompletionRequest(
            messages=messages(shown, [(p.a, p.b, p.type) for p in batch], self.prompt),
            model=self.config.model_name,
            temperature=0.0,
            json_schema=JUDGE_SCHEMA,
            timeout_s=self.config.timeout_s,
        )

    async def _ask(self, context: str, batch: Sequence[JudgePair]) -> list[Verdict]:
        if self.max_cost_usd is not None:
            refused = None
            if self._stats.cost_unknown:  # never pretend an unpriced call cost nothing
                refused = "judge calls cannot be priced, so its budget cannot be checked"
            elif self._stats.cost_usd >= self.max_cost_usd:
                refused = f"judge budget of ${self.max_cost_usd:.4f} reached"
            if refused is not None:
                self._stats.budget_refused += len(batch)
                return self._failed(f"{refused}; pair not judged", batch)
        request = self._request(context, batch)
        self._stats.calls += 1
        try:
            completion, _ = await call_with_retry(
                lambda: self.provider.complete(request), self.retry
            )
        except Exception as exc:  # a failed judge never costs a row: its pairs are unjudged
            line = f"judge call failed: {one_line(exc, with_type=True)}"
            return self._failed(_on_item(line), batch)
        self._charge(completion.usage, completion.model)
        try:
            found = parse_verdicts(completion.text, len(batch))
        except BadAnswer as exc:
            return self._failed(_on_item(str(exc)), batch)
        out: list[Verdict] = []
        for number in range(1, len(batch) + 1):
            got: Any = found.get(number, f"pair {number}: the judge's answer has no verdict")
            if isinstance(got, str):
                got = _on_item(got)
                self._stats.failed(got, 1)
                out.append(Verdict(None, "", "error", got))
            else:
                out.append(Verdict(got[0], got[1], "model"))
        return out

    def _failed(self, line: str, batch: Sequence[JudgePair]) -> list[Verdict]:
        line = redact(line)
        self._stats.failed(line, len(batch))
        return [Verdict(None, "", "error", line) for _ in batch]

    def _charge(self, usage: Usage, model: str | None) -> None:
        cost = self._pricer.cost(usage, model or self.config.model_name)
        if cost.usd is None:
            self._stats.cost_unknown += 1
        else:
            self._stats.cost_usd += cost.usd

    async def aclose(self) -> None:
        close = getattr(self.provider, "aclose", None)
        if close is not None:
            await close()
