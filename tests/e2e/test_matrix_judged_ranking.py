"""``matrix --judge`` marks the judged F1s as the matrix table marks the string ones: ★ on
the best cell per judged F1, ≈ on a cell not significantly different from it, nothing on one
clearly worse, and a legend naming the matrix's correction."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.llm.fake import register_fake, unregister_fake

runner = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture
def cells() -> Iterator[None]:
    """Three models on 12 items: the gold itself, nothing, and entities named by their last
    word (string F1 low; the rules judge credits most)."""
    items = LocalStore().get_items("extraction-eval")[:12]
    register_fake("exact", {"items": {i.id: i.expected.model_dump(mode="json") for i in items}})
    register_fake("none", {"items": {i.id: {"entities": [], "relationships": []} for i in items}})
    last = {
        i.id: {
            "entities": [{"name": e.name.split()[-1], "type": e.type} for e in i.expected.entities],
            "relationships": [],
        }
        for i in items
    }
    register_fake("last", {"items": last})
    yield
    unregister_fake()


def _judged_rows(stdout: str) -> dict[str, list[str]]:
    """The judged table's rows by model, as their cells (after the 'judged by' title)."""
    below = stdout[stdout.index("judged by offline:rules") :]
    rows = {}
    for line in below.splitlines():
        parts = [p.strip() for p in line.split("│")]
        if len(parts) == 8 and "fake:" in parts[0]:
            rows[parts[0].split("/")[1]] = parts
    return rows


@pytest.mark.parametrize("correction", ["holm", "none"])
def test_matrix_ranks_cells_on_judged_f1(cells: None, correction: str) -> None:
    done = runner.invoke(
        app,
        [
            *("matrix", "--model", "fake:exact", "--model", "fake:last", "--model", "fake:none"),
            *("--limit", "12", "--name", "rk", "--judge", "offline:rules"),
            *("--correction", correction),
        ],
    )
    assert done.exit_code == 0, done.output
    rows = _judged_rows(done.stdout)
    assert set(rows) == {"fake:exact", "fake:last", "fake:none"}
    judged = (2, 3, 5)  # entity, typed entity and relationship judged F1 columns
    assert all(rows["fake:exact"][k].endswith("★") for k in judged)
    assert not any(rows["fake:none"][k].endswith(("★", "≈")) for k in judged)
    string = (1, 4)  # the string F1s stay unmarked in this table (the matrix table has them)
    assert not any(rows[m][k].endswith(("★", "≈")) for m in rows for k in string)
    legend = " ".join(done.stdout[done.stdout.index("★ best cell per judged F1") :].split())
    named = {"holm": "Holm (family-wise error)", "none": "none"}[correction]
    assert f"comparisons with the best, corrected: {named};" in legend
