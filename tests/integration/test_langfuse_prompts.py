"""Prompt management through the real SDK: fetch by label, visible fallback, push."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from extraction_eval.backends.langfuse import fetch_prompt, push_prompt
from extraction_eval.commands.prompts import prompts_app
from extraction_eval.prompts.template import load_local_prompt, prompt_variables
from extraction_eval.types import Schema
from tests.support.langfuse_server import FakeLangfuse

REMOTE = [
    {"role": "system", "content": "Extract {{entity_types}} and {{relationship_types}}."},
    {"role": "user", "content": "<text>{{text}}</text>"},
]


def _cli(server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, label: str) -> typer.Typer:
    public, secret = server.new_keys(label)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)
    monkeypatch.setenv("LANGFUSE_BASE_URL", server.base_url)
    app = typer.Typer()
    app.add_typer(prompts_app, name="prompts")
    return app


def test_fetch_by_label_records_version_and_compiles_like_langfuse(
    server: FakeLangfuse, lf: Any
) -> None:
    lf.create_prompt(name="extraction", prompt=REMOTE, labels=["production"], type="chat")
    lf.create_prompt(name="extraction", prompt=REMOTE[::-1], labels=["staging"], type="chat")
    template = fetch_prompt(lf, "extraction", label="staging", cache_ttl_seconds=0)
    assert (template.source, template.version, template.label) == ("langfuse", 2, "staging")
    assert template.messages == REMOTE[::-1]
    assert template.client is not None and not template.client.is_fallback
    fetched = server.requests_to("/api/public/v2/prompts/extraction", "GET")[-1]
    assert fetched.param("label") == "staging"

    schema = Schema(entity_types=["person"], relationship_types=["knows"])
    ours = template.compile("Ada met Bob.", schema)
    theirs = template.client.compile(**prompt_variables("Ada met Bob.", schema))
    assert [{"role": m.role, "content": m.content} for m in ours] == theirs
    assert "<text>Ada met Bob.</text>" in ours[0].content

    by_version = fetch_prompt(lf, "extraction", version=1, cache_ttl_seconds=0)
    assert by_version.version == 1 and by_version.messages == REMOTE


def test_fetch_failure_falls_back_to_local_template_visibly(
    server: FakeLangfuse, lf: Any, caplog: pytest.LogCaptureFixture
) -> None:
    warnings: list[str] = []
    with caplog.at_level(logging.WARNING):
        template = fetch_prompt(lf, "extraction", label="staging", max_retries=0, warnings=warnings)
    local = load_local_prompt()
    assert template.source == "fallback"
    assert template.messages == local.messages and template.client is None
    assert template.version is None and template.label == "staging"
    assert len(warnings) == 1 and "not found" in warnings[0] and "fallback" in warnings[0]
    assert any("prompt_source=fallback" in r.getMessage() for r in caplog.records)


def test_unreachable_prompt_server_also_falls_back(server: FakeLangfuse, lf: Any) -> None:
    server.down("refuse")
    warnings: list[str] = []
    template = fetch_prompt(lf, "extraction", label="production", max_retries=0, warnings=warnings)
    assert template.source == "fallback"
    assert "unreachable" in warnings[0]


def test_push_creates_a_chat_prompt_with_the_label(server: FakeLangfuse, lf: Any) -> None:
    version = push_prompt(lf, "extraction", label="staging")
    assert version == 1
    (created,) = server.requests_to("/api/public/v2/prompts", "POST")
    local = load_local_prompt()
    assert created.body["type"] == "chat"
    assert created.body["name"] == "extraction"
    assert created.body["labels"] == ["staging"]
    assert [{"role": m["role"], "content": m["content"]} for m in created.body["prompt"]] == (
        local.messages
    )
    assert created.body["config"]["content_hash"] == local.content_hash
    # what was pushed is what a run then fetches, word for word
    fetched = fetch_prompt(lf, "extraction", label="staging", cache_ttl_seconds=0)
    assert fetched.content_hash == local.content_hash and fetched.version == 1


def test_push_again_with_same_content_makes_no_new_version(server: FakeLangfuse, lf: Any) -> None:
    assert push_prompt(lf, "extraction", label="staging") == 1
    assert push_prompt(lf, "extraction", label="staging") == 1
    assert len(server.requests_to("/api/public/v2/prompts", "POST")) == 1
    assert push_prompt(lf, "extraction", label="staging", force=True) == 2
    assert push_prompt(lf, "extraction", label="production") == 3
    assert [v["labels"] for v in server.prompt_versions("extraction")] == [
        [],
        ["staging"],
        ["production", "latest"],
    ]


def test_prompts_push_and_show_commands(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _cli(server, monkeypatch, "prompts-cli")
    runner = CliRunner()
    pushed = runner.invoke(app, ["prompts", "push", "--label", "staging"])
    assert pushed.exit_code == 0, pushed.output
    assert "version 1 has label 'staging'" in pushed.stdout
    shown = runner.invoke(app, ["prompts", "show", "--label", "staging"])
    assert shown.exit_code == 0, shown.output
    assert "source=langfuse version=1 label=staging" in shown.stdout
    assert "{{text}}" in shown.stdout
    missing = runner.invoke(app, ["prompts", "show", "--label", "nope"])
    assert missing.exit_code == 0
    assert "source=fallback" in missing.stdout and "warning" in missing.stderr


def test_prompts_push_files_to_langfuse_or_with_local_to_the_store(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from extraction_eval.backends.local import LocalStore

    app = _cli(server, monkeypatch, "prompts-files")
    runner = CliRunner()
    (tmp_path / "s.txt").write_text(REMOTE[0]["content"] + "\n")
    (tmp_path / "u.txt").write_text(REMOTE[1]["content"] + "\n")
    files = ["--system", str(tmp_path / "s.txt"), "--user", str(tmp_path / "u.txt")]
    pushed = runner.invoke(app, ["prompts", "push", "--label", "exp", *files])
    assert pushed.exit_code == 0, pushed.output
    (created,) = server.requests_to("/api/public/v2/prompts", "POST")
    assert created.body["labels"] == ["exp"]
    assert [{"role": m["role"], "content": m["content"]} for m in created.body["prompt"]] == REMOTE
    # LangFuse moves one label per push; two would otherwise make two versions
    two = runner.invoke(app, ["prompts", "push", "--label", "a", "--label", "b", *files])
    assert two.exit_code == 2 and "one --label at a time" in two.stderr
    # --local: the local store, LangFuse untouched
    local = runner.invoke(app, ["prompts", "push", "--local", "--label", "exp", *files])
    assert local.exit_code == 0, local.output
    assert "local store" in local.stdout
    assert len(server.requests_to("/api/public/v2/prompts", "POST")) == 1
    assert LocalStore().get_prompt("extraction", label="exp").messages == REMOTE
    shown = runner.invoke(app, ["prompts", "show", "--local", "--label", "exp"])
    assert "source=local-store version=1 label=exp" in shown.stdout
    listed = runner.invoke(app, ["prompts", "list"])
    assert listed.exit_code == 2 and "--local" in listed.stderr
