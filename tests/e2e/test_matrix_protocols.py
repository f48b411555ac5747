"""``matrix --protocol``: each cell's protocol headline figures (``semeval.strict.f1``,
``re_strict.f1``, ``docred.f1``...) with CIs, best and not-told-apart cells marked as in the
matrix table; and ``matrix --aliases`` / ``--no-aliases`` scoring every cell end to end."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from extraction_eval.analysis.protocols_run import protocol_cells
from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from tests.support.cli_data import ok, upload_head

runner = CliRunner()
PIPELINES = "tests.support.pipelines"
TWO = ["--protocol", "semeval", "--protocol", "re"]  # one bootstrap draws both


def test_protocol_cells_mark_the_best_and_the_cells_not_told_apart(
    shared_data: Path, tmp_path: Path
) -> None:
    upload_head(shared_data, tmp_path, "conll04_test.jsonl", 30, "c04")
    for name, pipeline in (("gold", "echo_gold"), ("twin", "echo_gold"), ("first", "first_entity")):
        args = ["--dataset", "c04", "--name", name, "--pipeline", f"{PIPELINES}:{pipeline}"]
        ok(runner.invoke(_run_app, args))
    store = LocalStore()
    runs = [store.get_run(n, "c04") for n in ("first", "gold", "twin")]
    assert all(r is not None for r in runs)
    cells = protocol_cells(store, runs, ["semeval", "re"])  # type: ignore[arg-type]
    assert "semeval.strict.f1" in cells.metrics and "re_strict.f1" in cells.metrics
    compared = json.loads(
        ok(runner.invoke(app, ["compare", "gold", "first", "--format", "json", *TWO]))
    )["protocols"]
    value, ci = cells.values["first"]["semeval.strict.f1"]
    block = compared["b"]["semeval"]["strict"]
    assert value == block["f1"] and ci == (block["ci"]["f1"]["low"], block["ci"]["f1"]["high"])
    assert cells.best["semeval.strict.f1"] == ("gold", "twin")
    # 30 items, one entity of each: the paired CI of Δ against the best excludes 0
    assert cells.similar["semeval.strict.f1"] == ()


def test_matrix_prints_the_protocol_table(shared_data: Path, tmp_path: Path) -> None:
    upload_head(shared_data, tmp_path, "conll04_test.jsonl", 10, "c04")
    args = ["matrix", "--dataset", "c04", "--name", "mx", "--model", "offline:baseline"]
    args += ["--temperature", "0", "--temperature", "0.5"]
    out = ok(runner.invoke(app, [*args, "--protocol", "re", "--protocol", "semeval"]))
    assert "protocols per cell" in out and "re_strict = re_strict.f1" in out
    store = LocalStore()
    cell = next(r for r in store.list_runs("c04") if r.name.endswith("t0"))
    compared = json.loads(
        ok(
            runner.invoke(
                app, ["compare", cell.name, cell.name, "--format", "json", "--protocol", "re"]
            )
        )
    )["protocols"]
    assert f"{compared['a']['re_boundaries']['f1']:.3f}" in out
    refused = runner.invoke(app, [*args, "--name", "my", "--protocol", "muc"])
    assert refused.exit_code == 2 and "unknown protocol 'muc'" in refused.stderr
    assert not [r for r in store.list_runs("c04") if r.name.startswith("my")]


def test_matrix_aliases_score_every_cell_end_to_end(shared_data: Path, tmp_path: Path) -> None:
    upload_head(shared_data, tmp_path, "redocred_dev_first100.jsonl", 20, "rd")
    store = LocalStore()
    figures = {}
    for flag in ((), ("--no-aliases",)):
        name = "mx-names" if flag else "mx-default"
        matrix = ["matrix", "--dataset", "rd", "--name", name, "--model", "offline:baseline"]
        ok(runner.invoke(app, [*matrix, "--temperature", "0", *flag]))
        (cell,) = [r for r in store.list_runs("rd") if r.name.startswith(name + "/")]
        alone = ["--dataset", "rd", "--name", name + "-run", "--model", "offline:baseline"]
        ok(runner.invoke(_run_app, [*alone, *flag]))
        run = store.get_run(name + "-run", "rd")
        assert run is not None
        report = cell.summary["report"]
        assert report["entities"] == run.summary["report"]["entities"]  # as one run scores it
        figures[name] = (report["entities"]["f1"], report["alias_matches"]["entities"])
    assert figures["mx-default"][1] > 0 and figures["mx-names"][1] == 0
    assert figures["mx-default"][0] > figures["mx-names"][0]
