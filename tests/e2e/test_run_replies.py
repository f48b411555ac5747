"""Replies as real models write them, end to end through the CLI against the loopback
OpenAI-compatible server: a Markdown fence, prose around the JSON, a ``{"result": ...}``
wrapper, ten fenced blocks. Each is read (or refused) in one line, recorded on the item,
counted in the summary, shown whole by ``runs show --item``, exported and put in the report;
``--strict-json`` re-reads the cached raw replies as schema failures; warnings come first."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.pipeline.llm import PROBE_TEXT
from extraction_eval.types import DatasetItem
from tests.support.openai_server import LoopbackServer, baseline_answer, input_text
from tests.support.report_page import read_embedded

runner = CliRunner()
DATASET = "extraction-eval"
ESC = "\x1b[31m"
STYLES = ("bare", "fence", "prose", "wrapper", "ten")


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def styled(body: str, style: str) -> str:
    """``body`` (bare JSON) as a model of that style writes it."""
    if style == "fence":
        return f"```json\n{body}\n```"
    if style == "prose":  # a colour code and markup in the prose: shown, never acting
        return f"Sure!{ESC} <b>here</b> is the JSON:\n{body}\nLet me know if you need more."
    if style == "wrapper":
        return json.dumps({"result": json.loads(body)})
    if style == "ten":
        return "\n".join(f"Part {i}:\n```json\n{body}\n```" for i in range(10))
    return body


@pytest.fixture
def items() -> list[DatasetItem]:
    return LocalStore().get_items(DATASET)[: len(STYLES)]


def answering(
    items: list[DatasetItem], probe: str | None = None
) -> Callable[[dict[str, Any]], str]:
    """The server's answer: item i in STYLES[i]; the format probe bare (or ``probe``)."""
    style_of = {item.text: style for item, style in zip(items, STYLES, strict=True)}

    def answer(body: dict[str, Any]) -> str:
        text = input_text(body)
        if text == PROBE_TEXT and probe is not None:
            return probe
        return styled(baseline_answer(body), style_of.get(text, "bare"))

    return answer


def run(server: LoopbackServer, name: str, *extra: str) -> Result:
    return runner.invoke(
        _run_app,
        ["--backend", "local", "--limit", str(len(STYLES)), "--name", name,
         "--model", "openai:small", "--base-url", server.url, *extra],
    )  # fmt: skip


def cli(*args: str) -> Result:
    return runner.invoke(app, list(args))


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def server(items: list[DatasetItem]) -> Iterator[LoopbackServer]:
    with LoopbackServer(answer=answering(items)) as s:
        yield s


def test_replies_are_read_recorded_counted_and_the_ten_blocks_refused_in_one_line(
    server: LoopbackServer, items: list[DatasetItem]
) -> None:
    result = run(server, "lenient")
    assert result.exit_code == 0, result.stderr
    assert "answers repaired fence 1, prose 1, wrapper 1 (3 of 5 answers;" in flat(result.stdout)
    store = LocalStore()
    record = store.get_run("lenient", DATASET)
    assert record is not None and record.summary is not None
    assert record.summary["repairs"] == {"fence": 1, "prose": 1, "wrapper": 1}
    assert record.summary["errors"] == 1 and record.summary["schema_failures"] == 1
    stored = list(store.iter_item_results(record.id, [i.id for i in items]))
    by_style = dict(zip(STYLES, stored, strict=True))
    assert by_style["bare"].ok and by_style["bare"].repairs == []
    for style in ("fence", "prose", "wrapper"):
        got = by_style[style]
        assert got.ok and got.repairs == [style], style
        answers = [s.value for s in got.scores if s.name == "answer_repair"]
        assert answers == [style], style
        assert got.raw_output is not None and got.output is not None
    ten = by_style["ten"]
    assert not ten.ok and ten.error_kind == "schema"
    assert ten.error is not None and "10 JSON objects, not one" in ten.error
    assert "\n" not in ten.error and ten.raw_output is not None
    assert ten.raw_output.count("```json") == 10  # nothing lost: the whole reply is kept
    scores = {s.name: s for s in store.run_scores(record.id)}
    assert scores["answers_repaired"].value == 3.0
    header = cli("runs", "show", "lenient")  # the stored summary says it too
    assert header.exit_code == 0, header.stderr
    assert "answers repaired fence 1, prose 1, wrapper 1 (3 of 5 answers;" in flat(header.stdout)


def test_runs_show_item_shows_one_item_whole_escaped(
    server: LoopbackServer, items: list[DatasetItem]
) -> None:
    assert run(server, "show").exit_code == 0
    prose = items[STYLES.index("prose")]
    shown = cli("runs", "show", "show", "--item", prose.id)
    assert shown.exit_code == 0, shown.stderr
    out = shown.stdout
    lines = [line.rstrip() for line in out.splitlines()]
    for heading in ("input", "raw reply", "repairs", "parsed output", "scores"):
        assert heading in lines, heading
    assert prose.text.split()[0] in out  # the input
    assert "Sure!\\x1b[31m <b>here</b> is the JSON:" in out  # the control escaped, not acting
    assert "\x1b" not in out
    assert "answer_repair" in out and "prose" in out
    assert '"entities": [' in out  # the parsed output
    ten = cli("runs", "show", "show", "--item", items[STYLES.index("ten")].id)
    assert ten.exit_code == 0, ten.stderr
    assert "10 JSON objects, not one" in flat(ten.stdout)
    assert ten.stdout.count("```json") == 10
    missing = cli("runs", "show", "show", "--item", "sample-99")
    assert missing.exit_code == 2
    assert "run 'show' has no result for item 'sample-99' (its items include sample-" in flat(
        missing.stderr
    )
    refused = cli("runs", "show", "show", "--item", prose.id, "--worst")
    assert refused.exit_code != 0 and "--item prints one item" in refused.stderr


def test_exports_carry_the_raw_reply_and_the_repairs(
    server: LoopbackServer, items: list[DatasetItem], tmp_path: Path
) -> None:
    assert run(server, "exp").exit_code == 0
    exported = cli("runs", "export", "exp")
    assert exported.exit_code == 0, exported.stderr
    rows = {json.loads(x)["item_id"]: json.loads(x) for x in exported.stdout.splitlines()}
    fence = rows[items[STYLES.index("fence")].id]
    assert fence["repairs"] == ["fence"] and fence["raw_output"].startswith("```json\n{")
    assert "answer_repair" not in fence["scores"]  # a column of its own, like categories
    assert rows[items[0].id]["repairs"] == [] and rows[items[0].id]["raw_output"].startswith("{")
    assert rows[items[STYLES.index("ten")].id]["raw_output"].count("```json") == 10
    csv_out = cli("runs", "export", "exp", "--format", "csv")
    assert csv_out.exit_code == 0, csv_out.stderr
    header = csv_out.stdout.splitlines()[0].split(",")
    assert "raw_output" in header and "repairs" in header


def test_the_report_details_show_the_raw_reply_of_failed_and_repaired_items(
    server: LoopbackServer, items: list[DatasetItem], tmp_path: Path
) -> None:
    assert run(server, "rep").exit_code == 0
    out = tmp_path / "r.html"
    made = cli("report", "rep", "--out", str(out))
    assert made.exit_code == 0, made.stderr
    html = out.read_text(encoding="utf-8")
    assert "<b>here</b>" not in html  # the page's data is never markup
    rows = {row["id"]: row["runs"][0] for row in read_embedded(html)["items"]}
    prose = rows[items[STYLES.index("prose")].id]
    assert prose["rep"] == ["prose"]
    assert prose["raw"].startswith("Sure!\\x1b[31m <b>here</b>")  # escaped, shown as text
    assert rows[items[STYLES.index("ten")].id]["raw"].count("```json") == 10
    assert "raw" not in rows[items[0].id] and "rep" not in rows[items[0].id]  # a clean reply


def test_strict_json_rereads_the_cached_raw_replies_as_schema_failures_and_resume_refuses(
    server: LoopbackServer, items: list[DatasetItem]
) -> None:
    assert run(server, "lenient").exit_code == 0
    repaired = {items[STYLES.index(s)].text for s in ("fence", "prose", "wrapper")}
    asked_before = len(server.chat_requests)
    strict = run(server, "strict", "--strict-json")
    assert strict.exit_code == 0, strict.stderr
    assert "answers repaired none: --strict-json" in flat(strict.stdout)
    new = server.chat_requests[asked_before:]
    assert not [r for r in new if input_text(r.body) in repaired]  # read from the cache
    store = LocalStore()
    record = store.get_run("strict", DATASET)
    assert record is not None and record.summary is not None
    assert record.summary["schema_failures"] == 4 and record.summary["repairs"] == {}
    assert record.config["strict_json"] is True
    stored = list(store.iter_item_results(record.id, [i.id for i in items]))
    results = dict(zip(STYLES, stored, strict=True))
    assert results["bare"].ok
    assert results["fence"].error is not None
    assert "not bare JSON (strict_json): a Markdown code fence" in results["fence"].error
    assert (results["wrapper"].raw_output or "").startswith('{"result": {"entities": [')
    # a lenient run resumed strictly (or the other way) would mix two readings
    for name, extra in (("lenient", ("--strict-json",)), ("strict", ())):
        resumed = run(server, name, "--resume", *extra)
        assert resumed.exit_code != 0
        assert "strict_json differ from the original run" in flat(resumed.stderr)


def test_warnings_come_before_the_tables_and_are_recalled_in_one_line_at_the_end(
    items: list[DatasetItem],
) -> None:
    with LoopbackServer(answer=answering(items, probe='{"answer": "no"}')) as server:
        result = run(server, "doubt")
    assert result.exit_code == 0, result.stderr
    both = result.output  # stdout and stderr as they were written
    warning = both.index("probe answer did not follow the schema")
    table = both.index("run 'doubt' on 'extraction-eval'")
    recap = both.index("warning(s) above the tables:")
    assert warning < table < recap
    last = both.rstrip().splitlines()[-1]
    assert last.startswith("warning:") and "warning(s) above the tables" in last


def test_a_matrix_prints_its_warnings_before_its_table_too(items: list[DatasetItem]) -> None:
    with LoopbackServer(answer=answering(items, probe='{"answer": "no"}')) as server:
        result = cli(
            "matrix", "--backend", "local", "--limit", "2", "--name", "mxd",
            "--model", "openai:small", "--base-url", server.url,
        )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    both = result.output
    warning = both.index("probe answer did not follow the schema")
    table = both.index("matrix 'mxd' on 'extraction-eval'")
    recap = both.index("warning(s) above the tables:")
    assert warning < table < recap
