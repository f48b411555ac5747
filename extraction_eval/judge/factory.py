"""``--judge MODEL`` -> a judge: ``offline:rules`` or a model through its provider."""

from __future__ import annotations

from extraction_eval.errors import InvalidValue
from extraction_eval.judge.base import Judge
from extraction_eval.judge.rules import RULES_MODEL, RulesJudge
from extraction_eval.llm.base import ResponseCache
from extraction_eval.llm.retry import RetryPolicy


def make_judge(
    model: str,
    *,
    base_url: str | None = None,
    cache: ResponseCache | None = None,
    retry: RetryPolicy | None = None,
    timeout_s: float = 60.0,
    max_attempts: int = 4,
) -> Judge:
    """The judge ``model`` names. Raises ``ConfigError`` / ``InvalidValue`` for a model no
    provider knows, before any pair is judged."""
    if model == RULES_MODEL:
        return RulesJudge()
    from extraction_eval.judge.model import ModelJudge

    try:
        return ModelJudge(
            model,
            base_url=base_url,
            cache=cache,
            retry=retry,
            timeout_s=timeout_s,
            max_attempts=max_attempts,
        )
    except InvalidValue as exc:  # the judge's own fields: judge_model, judge_base_url
        if exc.field in ("model", "base_url"):
            raise InvalidValue(f"judge_{exc.field}", exc.problem) from None
        raise
