"""Sizes that would become unbounded memory (issue 27, "Size"): a matrix with too many cells
is refused in one line before a cell is planned; a model reply over ``MAX_REPLY_CHARS`` is
that item's error (a row, its usage kept, the reply not kept); an import file over
``MAX_IMPORT_BYTES`` is refused in one line before it is read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval import limits
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.run import arun_local, run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from tests.support.openai_batch_server import Batch, BatchServer
from tests.support.openai_server import LoopbackServer, baseline_answer, content
from tests.support.tally import Tally

runner = CliRunner()


def _matrix_toml(tmp: Path, temperatures: int, repeats: int) -> Path:
    """A config under the 1 MB TOML cap whose axes multiply past the cell cap (one model,
    the offline one, so the matrix is valid in every other way)."""
    path = tmp / "matrix.toml"
    temps = ", ".join(str(t / 1000) for t in range(temperatures))
    path.write_text(
        f'model = ["offline:baseline"]\ntemperature = [{temps}]\nrepeats = {repeats}\n',
        encoding="utf-8",
    )
    assert path.stat().st_size < limits.MAX_TOML_BYTES
    return path


def test_a_matrix_over_the_cell_cap_is_refused_in_one_line(tmp_path: Path, tally: Tally) -> None:
    temperatures, repeats = limits.DEFAULT_MAX_CELLS, 10  # ten times the cap
    config = _matrix_toml(tmp_path, temperatures, repeats)
    result = runner.invoke(app, ["matrix", "--config", str(config), "--dry-run"])
    cells = f"{temperatures * repeats:,} cells"
    lines = result.output.strip().splitlines()
    held = (
        result.exit_code == 2
        and len(lines) == 1
        and "--max-cells" in lines[0]
        and cells in lines[0]
        and LocalStore().list_runs() == []
    )
    tally.input(held=held)
    assert held, result.output[-2000:]


def test_the_cell_cap_is_a_setting(tmp_path: Path, tally: Tally) -> None:
    """Raised on the command line (or in the file), a matrix of that size is planned."""
    config = tmp_path / "small.toml"
    config.write_text(
        'model = ["offline:baseline"]\ntemperature = [0.0, 0.5, 1.0]\nrepeats = 2\n',
        encoding="utf-8",
    )
    refused = runner.invoke(app, ["matrix", "--config", str(config), "--max-cells", "5"])
    allowed = runner.invoke(
        app, ["matrix", "--config", str(config), "--max-cells", "6", "--dry-run"]
    )
    held = refused.exit_code == 2 and "6 cells" in refused.output and allowed.exit_code == 0
    tally.input(held=held)
    assert held, (refused.output[-1000:], allowed.output[-1000:])


ITEMS = 4
NO_WAITS = {
    "retry_initial_wait_s": 0.0,
    "retry_max_wait_s": 0.0,
    "retry_jitter_s": 0.0,
}


def test_a_reply_over_the_size_cap_is_that_items_error(tally: Tally) -> None:
    name = "x" * (limits.MAX_REPLY_CHARS + 1)
    huge = json.dumps({"entities": [{"name": name, "type": "person"}], "relationships": []})
    store = LocalStore()
    with LoopbackServer(answer=baseline_answer) as server:
        server.inject(content(huge, times=2))
        config = RunConfig(
            name="huge-replies",
            limit=ITEMS,
            concurrency=1,
            pipeline=PipelineConfig(  # a set format: no probe takes one of the two replies
                model="openai:m",
                base_url=server.url,
                response_format="json_schema",
                extra=NO_WAITS,
            ),
        )
        outcome = asyncio.run(arun_local(config, store=store))
    rows = store.results(outcome.run.id)
    over = [r for r in rows if r.error_kind == "limit"]
    held = (
        len({r.item_id for r in rows}) == ITEMS  # every item a row
        and len(over) == 2
        and all(f"over the limit of {limits.MAX_REPLY_CHARS:,}" in (r.error or "") for r in over)
        and all(len(r.raw_output or "") < limits.MAX_REPLY_CHARS for r in over)  # not kept
        and all(r.usage.tokens_out for r in over)  # a paid call stays counted
        and sum(1 for r in rows if r.error is None) == ITEMS - 2
    )
    tally.faults(injected=2, lost=ITEMS - len({r.item_id for r in rows}))
    tally.input(held=held)
    assert held, [(r.item_id, r.error_kind, (r.error or "")[:200]) for r in rows]


@pytest.mark.parametrize("fmt", ["label-studio", "doccano", "conll"])
def test_an_import_file_over_the_size_cap_is_refused_before_it_is_read(
    fmt: str, tmp_path: Path, tally: Tally
) -> None:
    path = tmp_path / "big.export"
    with path.open("wb") as fh:  # sparse: the size is there, the bytes are not written
        fh.truncate(limits.MAX_IMPORT_BYTES + 1)
    result = runner.invoke(app, ["datasets", "import", "x", str(path), "--format", fmt])
    lines = result.output.strip().splitlines()
    held = (
        result.exit_code == 2
        and len(lines) == 1
        and f"over the limit of {limits.MAX_IMPORT_BYTES:,}" in lines[0]
    )
    tally.input(held=held)
    assert held, result.output[-1000:]


def _long_line_file(tmp: Path, fmt: str) -> tuple[Path, list[str], int]:
    """Good records around one line past ``MAX_LINE_BYTES`` (valid JSON / a valid token)."""
    filler = "x" * (limits.MAX_LINE_BYTES + 1)
    if fmt == "conll":
        path = tmp / "long.conll"
        path.write_text(f"Ada B-PER\n\n{filler} O\n\nBob B-PER\n", encoding="utf-8")
        return path, ["long-1", "long-3"], 3
    path = tmp / "long.jsonl"
    good = [{"id": n, "text": "Ada met Bob.", "label": [[0, 3, "PER"]]} for n in (1, 3)]
    bad = {"id": 2, "text": filler, "label": []}
    path.write_text("".join(json.dumps(x) + "\n" for x in (good[0], bad, good[1])))
    return path, ["1", "3"], 2


@pytest.mark.parametrize("reader", ["datasets upload", "doccano", "conll"])
def test_a_line_over_the_line_cap_costs_only_itself(
    reader: str, tmp_path: Path, tally: Tally
) -> None:
    path, good, line = _long_line_file(tmp_path, "conll" if reader == "conll" else "jsonl")
    if reader == "datasets upload":
        result = runner.invoke(app, ["datasets", "upload", "long", str(path)])
        export = runner.invoke(app, ["datasets", "export", "long"])
        ids = [json.loads(x)["id"] for x in export.stdout.splitlines()]
    else:
        out = tmp_path / "out.jsonl"
        args = ["datasets", "import", "long", str(path), "--format", reader, "--out", str(out)]
        result = runner.invoke(app, args)
        ids = [json.loads(x)["id"] for x in out.read_text().splitlines()] if out.exists() else []
    own = [x for x in result.output.splitlines() if f"{path.name}:{line}" in x]
    held = (
        result.exit_code == 0
        and sorted(ids) == good
        and len(own) == 1
        and f"longer than {limits.MAX_LINE_BYTES:,} bytes" in own[0]
    )
    tally.input(held=held)
    assert held, (result.output[-1000:], ids)


def _sparse(path: Path, size: int, head: bytes = b"") -> Path:
    """A file of ``size`` bytes: ``head``, then zeros (sparse: never written)."""
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


def test_a_prompt_file_over_its_cap_is_refused(tmp_path: Path, tally: Tally) -> None:
    system = _sparse(tmp_path / "system.txt", limits.MAX_PROMPT_BYTES + 1, b"You extract.")
    user = tmp_path / "user.txt"
    user.write_text("Extract from {{text}}", encoding="utf-8")
    args = ["prompts", "push", "--system", str(system), "--user", str(user), "--local"]
    result = runner.invoke(app, args)
    lines = result.output.strip().splitlines()
    held = (
        result.exit_code == 2
        and len(lines) == 1
        and f"larger than {limits.MAX_PROMPT_BYTES:,} bytes" in lines[0]
    )
    tally.input(held=held)
    assert held, result.output[-1000:]


class _HostileBatchServer(BatchServer):
    """A batch server whose output file has a line that is not JSON, a line past
    ``MAX_LINE_BYTES`` (each in place of one request's answer) and rows for ids never asked."""

    def _advance(self, batch: Batch) -> None:
        super()._advance(batch)
        if batch.output_file_id is None or batch.output_file_id.endswith("-hostile"):
            return
        purpose, data = self.files[batch.output_file_id]
        rows = data.splitlines()
        overlong = json.dumps({"custom_id": "x", "pad": "x" * limits.MAX_LINE_BYTES}).encode()
        strangers = [json.dumps({"custom_id": f"other-{n}"}).encode() for n in range(3)]
        hostile = [b"{not json", overlong, *rows[2:], *strangers]
        batch.output_file_id += "-hostile"
        self.files[batch.output_file_id] = (purpose, b"\n".join(hostile) + b"\n")


def test_a_hostile_batch_output_file_costs_only_its_bad_lines(
    tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXTRACTION_EVAL_BATCH_POLL_S", "0.01")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    with _HostileBatchServer() as server:
        config = RunConfig(
            name="hostile-batch",
            limit=ITEMS,
            batch=True,
            backend="local",
            pipeline=PipelineConfig(model="openai:gpt-4o-mini", base_url=server.url),
        )
        try:
            outcome = run_experiment(config)
            results = outcome.results
        except Exception as exc:  # before: the first bad line stopped the whole run
            results, crash = [], repr(exc)[:300]
        else:
            crash = ""
    failed = [r for r in results if r.error]
    held = (
        len({r.item_id for r in results}) == ITEMS
        and len(failed) == 2
        and all(r.error_kind == "provider" for r in failed)
    )
    tally.faults(injected=2, lost=ITEMS - len({r.item_id for r in results}))
    tally.input(held=held)
    assert held, (crash, [(r.item_id, r.error_kind, (r.error or "")[:120]) for r in results])
