"""The judge prompt from LangFuse prompt management, as the extraction prompt is in LangFuse
mode: ``JUDGE_PROMPT_NAME`` at ``JUDGE_PROMPT_LABEL``, created from the built-in text when the
name does not exist yet, so the judge's version is LangFuse's and a person can change the
prompt there. A prompt LangFuse cannot give (server down, a version without ``{{pairs}}``)
is a warning and the built-in text, visibly (``source="fallback"``): judging goes on.
``offline:rules`` has no prompt and is left alone."""

from __future__ import annotations

from dataclasses import replace

from extraction_eval.errors import ExtractionEvalError, one_line
from extraction_eval.judge.base import Judge
from extraction_eval.judge.prompt import (
    BUILTIN,
    JUDGE_PROMPT_LABEL,
    JUDGE_PROMPT_NAME,
    JUDGE_PROMPT_VERSION,
    JudgePrompt,
)


def langfuse_prompt(
    name: str = JUDGE_PROMPT_NAME, label: str = JUDGE_PROMPT_LABEL
) -> tuple[JudgePrompt, list[str]]:
    """The judge prompt LangFuse serves (keys from the environment), and the lines to show:
    that it was created, or why the built-in text is used instead."""
    from extraction_eval.backends.langfuse import close_client, connect, ensure_chat_prompt

    fallback = replace(BUILTIN, source="fallback")
    where = f"judge prompt {name!r} (label {label!r})"
    try:
        lf = connect(check=False)
    except ExtractionEvalError as exc:
        return fallback, [f"{where} not read from LangFuse ({one_line(exc)}); {_builtin()}"]
    try:
        messages, version, created = ensure_chat_prompt(
            lf,
            name,
            label,
            BUILTIN.messages,
            commit_message=f"extraction-eval built-in judge prompt {BUILTIN.ref}",
        )
    except ExtractionEvalError as exc:
        return fallback, [f"{where} not read from LangFuse ({one_line(exc)}); {_builtin()}"]
    finally:
        close_client(lf)
    prompt = JudgePrompt(tuple(messages), version=f"langfuse:{name}@{version}", source="langfuse")
    missing = prompt.missing_variables()
    if missing:
        gone = ", ".join("{{" + v + "}}" for v in missing)
        return fallback, [f"{where} version {version} has no {gone}; {_builtin()}"]
    lines = []
    if created:
        lines.append(f"{where} created in LangFuse from the built-in {BUILTIN.ref} (v{version})")
    return prompt, lines


def _builtin() -> str:
    return f"the built-in {JUDGE_PROMPT_VERSION} is used"


def use_langfuse_prompt(judge: Judge) -> list[str]:
    """Give a model judge the LangFuse judge prompt (before it judges: the prompt is in its
    identity and cache key); returns the lines to show. Other judges are left as they are."""
    from extraction_eval.judge.model import ModelJudge

    if not isinstance(judge, ModelJudge):
        return []
    judge.prompt, lines = langfuse_prompt()
    return lines
