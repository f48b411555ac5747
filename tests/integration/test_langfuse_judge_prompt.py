"""The judge prompt through LangFuse prompt management (real SDK, loopback fake LangFuse):
created from the built-in text when missing, its LangFuse version in the judge's identity and
cache key, a changed version asked again, a version LangFuse cannot give replaced visibly by
the built-in text; ``run-experiment --judge`` in LangFuse mode records that identity."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app
from extraction_eval.commands.judge import judge_app
from extraction_eval.judge.base import JudgePair
from extraction_eval.judge.managed import langfuse_prompt, use_langfuse_prompt
from extraction_eval.judge.model import ModelJudge
from extraction_eval.judge.prompt import BUILTIN, JUDGE_PROMPT_NAME, SYSTEM
from extraction_eval.llm.fake import FakeProvider, register_fake, unregister_fake
from extraction_eval.llm.retry import RetryPolicy
from tests.support.judging import DictCache
from tests.support.langfuse_env import upload, use_langfuse
from tests.support.langfuse_server import FakeLangfuse

TEXT = "International Business Machines (IBM) hired Barack Obama."
PAIRS = [
    JudgePair("IBM", "International Business Machines", "ORG", TEXT),
    JudgePair("Obama", "Barack Obama", "PER", TEXT),
]
ANSWER = {
    "json": {
        "verdicts": [
            {"id": 1, "same": True, "reason": "acronym"},
            {"id": 2, "same": True, "reason": "surname"},
        ]
    }
}
CHANGED = [
    {"role": "system", "content": "Same entity? Answer JSON verdicts, nothing else."},
    {"role": "user", "content": "Text: {{context}}\nPairs:\n{{pairs}}"},
]


def _judge(cache: DictCache) -> tuple[ModelJudge, FakeProvider]:
    fake = FakeProvider.from_script({"default": ANSWER}, model="judge")
    judge = ModelJudge(
        "fake:judge", cache=cache, provider=fake, retry=RetryPolicy.immediate(max_attempts=1)
    )
    return judge, fake


def _system_sent(fake: FakeProvider) -> str:
    return next(m.content for m in fake.calls[0].request.messages if m.role == "system")


def test_the_judge_prompt_is_created_from_the_builtin_text_once(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_langfuse(server, monkeypatch, "judge-prompt-create")
    prompt, lines = langfuse_prompt()
    versions = server.prompt_versions(JUDGE_PROMPT_NAME)
    assert len(versions) == 1 and "production" in versions[0]["labels"]
    assert versions[0]["prompt"] == [dict(m) for m in BUILTIN.messages]
    assert (prompt.source, prompt.version) == ("langfuse", f"langfuse:{JUDGE_PROMPT_NAME}@1")
    assert prompt.content_hash == BUILTIN.content_hash  # the same words
    assert len(lines) == 1 and "created in LangFuse" in lines[0]
    again, lines = langfuse_prompt()
    assert again.ref == prompt.ref and lines == []
    assert len(server.prompt_versions(JUDGE_PROMPT_NAME)) == 1


def test_a_new_version_in_langfuse_is_a_new_identity_and_asked_again(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, lf: Any
) -> None:
    use_langfuse(server, monkeypatch, "judge-prompt-version")
    cache = DictCache()
    first, fake = _judge(cache)
    assert use_langfuse_prompt(first)  # created: one line
    asyncio.run(first.judge(PAIRS))
    assert first.stats.calls == 1 and _system_sent(fake) == SYSTEM
    assert f"prompt langfuse:{JUDGE_PROMPT_NAME}@1/" in first.identity

    lf.create_prompt(name=JUDGE_PROMPT_NAME, prompt=CHANGED, labels=["production"], type="chat")
    second, fake2 = _judge(cache)
    assert use_langfuse_prompt(second) == []
    assert f"prompt langfuse:{JUDGE_PROMPT_NAME}@2/" in second.identity
    assert second.identity != first.identity
    verdicts = asyncio.run(second.judge(PAIRS))
    assert second.stats.calls == 1 and second.stats.cache_hits == 0  # not the old verdicts
    assert _system_sent(fake2) == CHANGED[0]["content"]
    assert '"IBM" vs "International Business Machines"' in fake2.calls[0].user_text
    assert [v.same for v in verdicts] == [True, True]

    third, fake3 = _judge(cache)
    use_langfuse_prompt(third)
    asyncio.run(third.judge(PAIRS))
    assert third.stats.cache_hits == 2 and fake3.calls == []  # unchanged: 0 calls


def test_a_version_without_pairs_is_replaced_by_the_builtin_text_visibly(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, lf: Any
) -> None:
    use_langfuse(server, monkeypatch, "judge-prompt-broken")
    broken = [{"role": "user", "content": "Are they the same? {{context}}"}]
    lf.create_prompt(name=JUDGE_PROMPT_NAME, prompt=broken, labels=["production"], type="chat")
    prompt, lines = langfuse_prompt()
    assert (prompt.source, prompt.ref) == ("fallback", BUILTIN.ref)
    assert len(lines) == 1 and "{{pairs}}" in lines[0] and "built-in judge-v1" in lines[0]


def test_langfuse_unreachable_is_one_line_and_the_builtin_text(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_langfuse(server, monkeypatch, "judge-prompt-down")
    server.down()
    prompt, lines = langfuse_prompt()
    assert (prompt.source, prompt.ref) == ("fallback", BUILTIN.ref)
    assert len(lines) == 1 and "not read from LangFuse" in lines[0]
    assert "\n" not in lines[0]


def test_a_langfuse_run_records_the_judge_prompt_version_its_calibration_backs(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dataset = "extraction-eval"
    items = LocalStore().get_items(dataset)[:2]
    upload(server, items, dataset)
    use_langfuse(server, monkeypatch, "judge-prompt-run")
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"a": p.a, "b": p.b, "type": p.type, "context": TEXT, "same": True} for p in PAIRS]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    last_word = {
        i.id: {
            "entities": [{"name": e.name.split()[-1], "type": e.type} for e in i.expected.entities],
            "relationships": [],
        }
        for i in items
    }
    register_fake("lfprompt", {"items": last_word})
    judge = register_fake("judgebot", {"default": ANSWER})
    try:
        calibrated = CliRunner().invoke(
            judge_app, ["calibrate", "--judge", "fake:judgebot", "--pairs", str(pairs)]
        )
        assert calibrated.exit_code == 0, calibrated.stderr
        assert "created in LangFuse" in calibrated.stderr  # calibrate asked LangFuse first
        result = CliRunner().invoke(
            _run_app,
            [
                *("--dataset", dataset, "--name", "lf-judge-prompt", "--model", "fake:lfprompt"),
                *("--judge", "fake:judgebot"),
            ],
        )
    finally:
        unregister_fake()
    assert result.exit_code == 0, result.stderr
    assert len(server.prompt_versions(JUDGE_PROMPT_NAME)) == 1
    assert judge.calls and all(
        m.content == SYSTEM for c in judge.calls for m in c.request.messages if m.role == "system"
    )
    run = LocalStore().get_run("lf-judge-prompt", dataset)
    assert run is not None and run.experiment_id
    kept = LocalStore().run_judged(run.id)
    identity = f"fake:judgebot prompt langfuse:{JUDGE_PROMPT_NAME}@1/{BUILTIN.content_hash}"
    assert [k["judge"] for k in kept] == [identity]
    scores = {s["name"]: s for s in server.scores if s.get("datasetRunId") == run.experiment_id}
    assert identity in scores["entity_f1_judged"]["comment"]
    # the calibration of this very prompt version backs the run's judged figures
    assert LocalStore().latest_judge_calibration(identity) is not None
    assert "judge κ" in kept[0]["backing"] and "judge κ" in scores["judged_matches"]["comment"]
