"""A judge that answers with the secret it was sent (in a verdict's reason, in an error body)
over real HTTP to a loopback OpenAI-compatible server: each such answer is one counted judge
error, and the key is nowhere afterwards: not in what the commands print, not in the store's
files, not in the exports, the item view or the HTML report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.backends.local.store import default_home
from extraction_eval.cli import app
from extraction_eval.llm.fake import register_fake, unregister_fake
from tests.support.judging import last_word_answers
from tests.support.openai_server import LoopbackServer, echo_auth, user_text

KEY = "odd-judge-Secret-Value-90210"
runner = CliRunner(env={"COLUMNS": "200"})


def quoting_answer(body: dict[str, Any]) -> str:
    """Every pair the same; the first pair's reason quotes the key back."""
    lines = [x for x in user_text(body).splitlines() if x[:1].isdigit() and " vs " in x]
    verdicts = [
        {"id": i, "same": True, "reason": f"as your key {KEY} says" if i == 1 else "same one"}
        for i, _ in enumerate(lines, start=1)
    ]
    return json.dumps({"verdicts": verdicts})


def _out(result: Any) -> str:
    return str(result.stdout) + str(result.stderr)


def test_a_judge_quoting_the_key_leaks_it_nowhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    items = LocalStore().get_items("extraction-eval")[:3]
    renamed = last_word_answers(items)
    register_fake("lastword", {"items": renamed})
    shown: list[str] = []
    try:
        with LoopbackServer(answer=quoting_answer) as server:
            # the third item's judge call meets a proxy that echoes the key in its 401
            server.inject(echo_auth(401, times=10, match=items[2].text[:40]))
            judge = ["--judge", "openai:judge-model", "--judge-base-url", server.url]
            done = runner.invoke(
                app, ["run", "--model", "fake:lastword", "--limit", "3", "--name", "r", *judge]
            )
            assert done.exit_code == 0, done.output
            shown.append(_out(done))
            quoted = [r for r in server.chat_requests if r.fault is None]
            assert quoted and any(r.fault == "echo" for r in server.chat_requests)
            html = tmp_path / "report.html"
            report = runner.invoke(app, ["report", "r", "--out", str(html), *judge])
            assert report.exit_code == 0, report.output
            shown += [_out(report), html.read_text(encoding="utf-8")]
    finally:
        unregister_fake()
    store = LocalStore()
    run = store.get_run("r", "extraction-eval")
    assert run is not None
    (kept,) = store.run_judged(run.id)
    stats = kept["report"]["stats"] if "report" in kept else kept["stats"]
    examples = " ".join(stats["error_examples"])
    assert "quoted a secret" in examples and "judge call failed" in examples
    assert stats["errors"] >= 2
    for args in (
        ["runs", "export", "r"],
        ["runs", "export", "r", "--format", "csv"],
        ["runs", "show", "r"],
        ["runs", "show", "r", "--item", items[0].id],
        ["compare", "r", "r", "--resamples", "20", "--judge", "offline:rules"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        shown.append(_out(result))
    files = [p for p in default_home().rglob("*") if p.is_file()]
    assert any(p.name.startswith("store.db") for p in files)
    raw = b"".join(p.read_bytes() for p in files)
    assert KEY.encode() not in raw
    for text in shown:
        assert KEY not in text
