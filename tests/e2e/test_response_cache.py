"""The response cache keys on where the answer came from, and ``--no-cache`` /
``--refresh-cache`` do what they say (CLI end to end, two loopback OpenAI-compatible servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from tests.support.openai_server import LoopbackServer

runner = CliRunner()
LIMIT = 3


def _answer(name: str) -> Any:
    def answer(_: dict[str, Any]) -> dict[str, Any]:
        return {
            "entities": [{"name": name, "type": "person", "evidence": None}],
            "relationships": [],
        }

    return answer


def _run(name: str, *args: str) -> dict[str, Any]:
    result = runner.invoke(
        app,
        ["run", "--name", name, "--limit", str(LIMIT), "--model", "openai:m",
         "--response-format", "json_schema", *args],  # pinned: no format probe in the counts
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    run = LocalStore().get_run(name)
    assert run is not None and run.summary is not None
    names = {e.name for r in LocalStore().results(run.id) if r.output for e in r.output.entities}
    return {"hits": run.summary["cache_hits"], "names": names, "config": run.config}


def test_server_b_is_never_given_server_a_answers() -> None:
    with LoopbackServer(answer=_answer("FromA")) as a, LoopbackServer(answer=_answer("FromB")) as b:
        first = _run("on-a", "--base-url", a.url)
        again = _run("on-a-again", "--base-url", a.url)
        other = _run("on-b", "--base-url", b.url)
        assert len(b.chat_requests) == LIMIT
    assert first["names"] == {"FromA"} and again["hits"] == LIMIT
    assert other["hits"] == 0 and other["names"] == {"FromB"}


def test_the_base_url_from_the_environment_is_part_of_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-env-url")
    with LoopbackServer(answer=_answer("FromA")) as a, LoopbackServer(answer=_answer("FromB")) as b:
        monkeypatch.setenv("OPENAI_BASE_URL", a.url)
        _run("env-a")
        monkeypatch.setenv("OPENAI_BASE_URL", b.url)
        other = _run("env-b")
    assert other["hits"] == 0 and other["names"] == {"FromB"}


def test_no_cache_neither_reads_nor_writes() -> None:
    with LoopbackServer(answer=_answer("FromA")) as a:
        off = _run("off-1", "--base-url", a.url, "--no-cache")
        after = _run("use-1", "--base-url", a.url)  # nothing was written: calls again
        off_again = _run("off-2", "--base-url", a.url, "--no-cache")  # cached now, not read
        assert len(a.chat_requests) == 3 * LIMIT
    assert off["hits"] == after["hits"] == off_again["hits"] == 0
    assert off["config"]["pipeline"]["cache"] == "off"
    assert after["config"]["pipeline"]["cache"] == "use"


def test_refresh_cache_calls_again_and_replaces_the_answers() -> None:
    with LoopbackServer(answer=_answer("Old")) as a:
        _run("fill", "--base-url", a.url)
        a.answer = _answer("New")
        refreshed = _run("refresh", "--base-url", a.url, "--refresh-cache")
        reused = _run("reuse", "--base-url", a.url)
        assert len(a.chat_requests) == 2 * LIMIT
    assert refreshed["hits"] == 0 and refreshed["names"] == {"New"}
    assert refreshed["config"]["pipeline"]["cache"] == "refresh"
    assert reused["hits"] == LIMIT and reused["names"] == {"New"}


def test_no_cache_and_refresh_cache_together_are_refused() -> None:
    result = runner.invoke(app, ["run", "--no-cache", "--refresh-cache"])
    assert result.exit_code == 2
    assert "--no-cache and --refresh-cache exclude each other" in result.output


@pytest.mark.parametrize("how", ["flag", "toml"])
def test_a_matrix_passes_no_cache_to_every_cell(how: str, tmp_path: Path) -> None:
    with LoopbackServer(answer=_answer("FromA")) as a:
        _run("fill", "--base-url", a.url)  # every answer is cached now
        args = ["matrix", "--model", "openai:m", "--base-url", a.url, "--limit", str(LIMIT)]
        args += ["--name", "mx", "--temperature", "0", "--temperature", "0.5"]
        args += ["--response-format", "json_schema"]  # pinned: no format probe in the counts
        if how == "flag":
            args.append("--no-cache")
        else:
            config = tmp_path / "matrix.toml"
            config.write_text("no_cache = true\n")
            args += ["--config", str(config)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert len(a.chat_requests) == LIMIT * 3  # the fill, then both cells called again
    cells = [r for r in LocalStore().list_runs() if r.name.startswith("mx")]
    assert len(cells) == 2
    for cell in cells:
        assert cell.config["pipeline"]["cache"] == "off"
        assert cell.summary is not None and cell.summary["cache_hits"] == 0
