"""Cost end to end: the CLI against the loopback OpenAI-compatible server (which reports token
usage), priced from genai-prices or from --price-in/--price-out, shown and recorded."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import data_snapshot
from typer.testing import CliRunner, Result

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.openai_server import LoopbackServer, baseline_answer

runner = CliRunner()
DB_VERSION = importlib.metadata.version("genai-prices")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
    with LoopbackServer(answer=baseline_answer) as srv:
        yield srv


def run(server: LoopbackServer, *args: str) -> Result:
    return runner.invoke(
        _run_app,
        ["--backend", "local", "--limit", "4", "--base-url", server.url, *args],
    )


def exported(name: str) -> list[dict[str, object]]:
    result = runner.invoke(app, ["runs", "export", name])
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def summary_of(name: str) -> tuple[dict[str, object], dict[str, object]]:
    run = LocalStore().get_run(name)
    assert run is not None and run.summary is not None
    return run.config, run.summary


def test_real_model_name_is_priced_per_item_and_per_run_from_genai_prices(
    server: LoopbackServer,
) -> None:
    result = run(server, "--name", "mini", "--model", "openai:gpt-4o-mini")
    assert result.exit_code == 0, result.stderr
    _, info = data_snapshot.get_snapshot().find_provider_model("gpt-4o-mini", None, "openai", None)
    prices = info.get_prices(datetime.now(UTC))
    rows = exported("mini")
    assert len(rows) == 4
    for row in rows:
        tokens_in, tokens_out = row["tokens_in"], row["tokens_out"]
        assert isinstance(tokens_in, int) and isinstance(tokens_out, int) and tokens_in > 0
        want = (tokens_in * prices.input_mtok + tokens_out * prices.output_mtok) / Decimal(10**6)
        assert row["cost_usd"] == pytest.approx(float(want), rel=1e-12)
    config, summary = summary_of("mini")
    total = sum(float(r["cost_usd"]) for r in rows)  # type: ignore[arg-type]
    assert summary["cost_usd"] == pytest.approx(round(total, 6))
    assert summary["unpriced_items"] == 0
    pricing = config["pricing"]
    assert isinstance(pricing, dict)
    assert pricing["source"] == "genai-prices" and pricing["version"] == DB_VERSION
    assert (pricing["model_ref"], pricing["model_id"]) == ("gpt-4o-mini", "gpt-4o-mini")
    assert pricing["input_per_mtok"] == float(prices.input_mtok)
    assert f"genai-prices {DB_VERSION}" in result.stdout
    show = runner.invoke(app, ["runs", "show", "mini"])
    assert show.exit_code == 0 and f"genai-prices {DB_VERSION}" in show.stdout


def test_override_prices_are_used_and_recorded_and_resume_refuses_other_prices(
    server: LoopbackServer,
) -> None:
    args = ["--name", "vllm", "--model", "openai:my-vllm-model"]
    result = run(server, *args, "--price-in", "1.5", "--price-out", "4", "--limit", "2")
    assert result.exit_code == 0, result.stderr
    for row in exported("vllm"):
        want = (row["tokens_in"] * 1.5 + row["tokens_out"] * 4) / 1e6  # type: ignore[operator]
        assert row["cost_usd"] == pytest.approx(want)
    config, _ = summary_of("vllm")
    override = {"source": "override", "input_per_mtok": 1.5, "output_per_mtok": 4.0}
    assert config["pricing"] == override
    assert "your prices: $1.5 in / $4.0 out per 1M tokens" in result.stdout
    # resuming with other prices would sum two price lists into one figure: refused
    again = run(server, *args, "--price-in", "2", "--price-out", "4", "--resume")
    assert again.exit_code == 2
    assert "price_override" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    same = run(server, *args, "--price-in", "1.5", "--price-out", "4", "--resume")
    assert same.exit_code == 0, same.stderr
    assert len(exported("vllm")) == 4
    assert all(r["cost_usd"] is not None for r in exported("vllm"))


def test_unknown_model_says_so_instead_of_a_dash(server: LoopbackServer) -> None:
    result = run(server, "--name", "odd", "--model", "openai:no-such-model-xyz")
    assert result.exit_code == 0, result.stderr
    assert "unknown price for no-such-model-xyz" in result.stdout
    assert all(r["cost_usd"] is None and r["tokens_in"] for r in exported("odd"))
    config, summary = summary_of("odd")
    assert summary["cost_usd"] is None and summary["unpriced_items"] == 4
    assert config["pricing"]["reason"] == "unknown price for no-such-model-xyz"  # type: ignore[index]


@pytest.mark.parametrize(
    "extra",
    [["--price-in", "1"], ["--price-out", "1"], ["--price-in", "-1", "--price-out", "1"]],
)
def test_bad_price_options_are_one_line_errors(server: LoopbackServer, extra: list[str]) -> None:
    result = run(server, "--name", "bad", "--model", "openai:gpt-4o-mini", *extra)
    assert result.exit_code == 2
    assert "--price-" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not server.chat_requests  # refused before any model call


def test_offline_baseline_costs_nothing_and_says_why() -> None:
    result = runner.invoke(_run_app, ["--name", "base", "--limit", "3", "--backend", "local"])
    assert result.exit_code == 0, result.stderr
    assert "0 (offline" in result.stdout
    assert all(r["cost_usd"] == 0.0 for r in exported("base"))
    config, summary = summary_of("base")
    assert config["pricing"] == {"source": "offline"} and summary["cost_usd"] == 0.0


def test_resume_after_a_price_database_upgrade_warns(server: LoopbackServer) -> None:
    args = ["--name", "up", "--model", "openai:gpt-4o-mini"]
    assert run(server, *args, "--limit", "2").exit_code == 0
    store = LocalStore()
    first = store.get_run("up")
    assert first is not None
    older = {**first.config, "pricing": {**first.config["pricing"], "version": "0.0.1"}}
    store.update_run(first.id, config=older)
    result = run(server, *args, "--resume")
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())  # the console wraps long lines
    assert f"priced with genai-prices {DB_VERSION}; run 'up' started with 0.0.1" in said
