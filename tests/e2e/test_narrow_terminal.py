"""Every main view at 80 columns (subprocess, env COLUMNS=80, fresh EXTRACTION_EVAL_HOME): no
line wider than 80, no '…' cut inside a table, no failure-category name split across lines, and
the matrix as a table (not transposed into one block per cell)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from extraction_eval.evaluators.taxonomy import CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "examples" / "matrix_fake.json"
WIDTH = 80
# The module's fixture runs eleven commands before the first test: its setup, not one test,
# is what the per-test timeout would cut on a loaded machine.
pytestmark = pytest.mark.timeout(600)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXTRACTION_EVAL_")}
    env.update(
        COLUMNS=str(WIDTH),
        LINES="50",
        EXTRACTION_EVAL_HOME=str(home),
        EXTRACTION_EVAL_FAKE_SCRIPT=str(FAKE),
        NO_COLOR="1",
    )
    return env


def _cli(home: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "extraction_eval", *args],
        env=_env(home),
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("narrow")
    out = {
        "run a": _cli(home, "run", "--name", "a"),
        "run b": _cli(home, "run", "--name", "b", "--match", "exact"),
        "datasets show": _cli(home, "datasets", "show", "extraction-eval"),
        "score": _cli(home, "score"),
    }
    out["runs show"] = _cli(home, "runs", "show", "a")
    out["compare"] = _cli(home, "compare", "a", "b")
    out["worst"] = _cli(home, "runs", "show", "a", "--worst")
    out["worst by category"] = _cli(home, "runs", "show", "a", "--worst", "--by-category")
    matrix = (
        *("--model", "fake:a", "--model", "fake:gpt-4o-mini-2024-07-18"),
        *("--temperature", "0", "--temperature", "0.7", "--repeats", "2", "--limit", "3"),
        *("--name", "demo"),
    )
    out["matrix"] = _cli(home, "matrix", *matrix)
    out["matrix details"] = _cli(home, "matrix", *matrix, "--resume", "--details")
    return out


VIEWS = [
    "run a",
    "runs show",
    "compare",
    "worst",
    "worst by category",
    "matrix",
    "matrix details",
    "datasets show",
    "score",
]


@pytest.mark.parametrize("view", VIEWS)
def test_no_line_wider_than_80(outputs: dict[str, str], view: str) -> None:
    wide = [line for line in outputs[view].splitlines() if len(line.rstrip()) > WIDTH]
    assert not wide, wide


@pytest.mark.parametrize("view", VIEWS)
def test_no_cut_cell(outputs: dict[str, str], view: str) -> None:
    cut = [line for line in outputs[view].splitlines() if "…" in line]
    assert not cut, cut


@pytest.mark.parametrize("view", VIEWS)
def test_category_names_never_split(outputs: dict[str, str], view: str) -> None:
    """A category name's head at the end of a line whose next line goes on with its tail (after
    any table padding) is a name split across lines."""
    lines = [line.rstrip() for line in outputs[view].splitlines()]
    for name in CATEGORIES:
        for cut in range(2, len(name) - 1):
            head, tail = name[:cut], name[cut:]
            for line, following in itertools.pairwise(lines):
                words = line.split()
                nxt = following.split()
                if not words or not nxt:
                    continue
                if words[-1].endswith(head) and re.match(re.escape(tail), nxt[0]):
                    pytest.fail(f"{name!r} split: {line!r} / {following!r}")


def test_matrix_is_a_table_with_long_cell_names(outputs: dict[str, str]) -> None:
    """One row per cell (not a block per cell), the long model name whole on its row."""
    rows = [line for line in outputs["matrix"].splitlines() if "/bundled/t0.7/r2" in line]
    assert any("fake:gpt-4o-mini-2024-07-18/bundled/t0.7/r2" in r and "★" in r for r in rows), (
        outputs["matrix"]
    )
    assert not any(line.startswith("  entity F1") for line in outputs["matrix"].splitlines())


def test_matrix_details_on_request(outputs: dict[str, str]) -> None:
    """The compact table points to --details; --details shows cost and latency (a block per
    cell when the full table is too wide)."""
    assert "--details" in outputs["matrix"]
    assert "cost $" not in outputs["matrix"]
    assert "cost $" in outputs["matrix details"]
    assert "p50 ms" in outputs["matrix details"]
