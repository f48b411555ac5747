"""The package's front door: ``from extraction_eval import run_experiment, RunConfig, ...``
gives the library's own objects, and ``import extraction_eval`` loads none of them (PEP 562),
so the CLI's ``--help`` and a notebook's first import stay cheap. The import checks run in a
fresh interpreter: this test process has long since imported everything."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import extraction_eval
from tests.unit.test_cli_imports import HEAVY

_PROBE = (
    "import json, sys\n"
    "{statement}\n"
    f"heavy = sorted(m for m in {list(HEAVY)!r} if m in sys.modules)\n"
    "ours = sorted(m for m in sys.modules if m.startswith('extraction_eval.'))\n"
    "print(json.dumps([heavy, ours]))\n"
)


def _loaded(statement: str) -> tuple[list[str], list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(statement=statement)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    heavy, ours = json.loads(done.stdout)
    return heavy, ours


def test_importing_the_package_loads_nothing_behind_its_names() -> None:
    heavy, ours = _loaded("import extraction_eval")
    assert heavy == [] and ours == ["extraction_eval.version"]


def test_asking_for_a_name_loads_its_module_only_then() -> None:
    """The same probe can fail: one name asked for loads the run path (and pydantic)."""
    heavy, ours = _loaded("from extraction_eval import run_experiment")
    assert "extraction_eval.experiments.run" in ours and "pydantic" in heavy


@pytest.mark.parametrize("name", sorted(set(extraction_eval.__all__) - {"__version__"}))
def test_every_public_name_is_the_library_object(name: str) -> None:
    module = importlib.import_module(extraction_eval._EXPORTS[name])
    assert getattr(extraction_eval, name) is getattr(module, name)
    assert name in dir(extraction_eval)


def test_the_names_the_issue_asks_for_are_there_and_nothing_else_leaks() -> None:
    from extraction_eval import (  # noqa: F401
        CompareOptions,
        PipelineConfig,
        RunConfig,
        compare_runs,
        run_experiment,
        score_files,
    )

    assert set(extraction_eval._EXPORTS) | {"__version__"} == set(extraction_eval.__all__)
    with pytest.raises(AttributeError, match="no attribute 'run_experimentt'"):
        extraction_eval.run_experimentt  # noqa: B018
