"""The judge prompt from LangFuse prompt management, as the extraction prompt is in LangFuse
mode: ``JUDGE_PROMPT_NAME`` at ``JUDGE_PROMPT_LABEL``, created from the built-in text when the
name does not exist yet, so the judge's version is LangFuse's and a person can change the
prompt there. A prompt LangFuse cannot give (server down, a version without ``{{pairs}}``)
is a warning and the built-in text, visibly (``source="fallback"``): judging goes on.
``offline:rules`` has no prompt and is left alone."""

from __future__ import annotations

from collections.abc import Sequence
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


def use_langfuse_prompt(judge: Judge, label: str = JUDGE_PROMPT_LABEL) -> list[str]:
    """Give a model judge the LangFuse judge prompt (before it judges: the prompt is in its
    identity and cache key); returns the lines to show. Other judges are left as they are."""
    return share_langfuse_prompt([judge], label)


def share_langfuse_prompt(judges: Sequence[Judge], label: str = JUDGE_PROMPT_LABEL) -> list[str]:
    """Give every model judge of ``judges`` (one per run compared, per matrix cell) the one
    LangFuse judge prompt at ``label``, read once: the same identity backs every judged
    figure, and a LangFuse that cannot give it is one line, not one per judge."""
    from extraction_eval.judge.model import ModelJudge

    models = [j for j in judges if isinstance(j, ModelJudge)]
    if not models:
        return []
    prompt, lines = langfuse_prompt(label=label)
    for judge in models:
        judge.prompt = prompt
    return lines


def judge_prompt_when_keyed(
    judges: Sequence[Judge], label: str = JUDGE_PROMPT_LABEL, *, langfuse: bool | None = None
) -> list[str]:
    """The LangFuse judge prompt for ``judges`` when LangFuse is used (``langfuse``; None:
    when its keys are set, as ``score``, ``compare`` and ``report`` decide), so a judged
    figure under keys is backed by the identity a calibration under keys measured; the
    built-in text otherwise. Returns the lines to show."""
    if langfuse is None:
        from extraction_eval.backends.langfuse import langfuse_configured

        langfuse = langfuse_configured()
    return share_langfuse_prompt(judges, label) if langfuse else []
