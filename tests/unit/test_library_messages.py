"""The library's errors and warnings name API fields, never CLI flags; the CLI shows the same
error with its flags (``commands.common.error_line``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
from extraction_eval.commands.common import error_line
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.budget import CostEstimate, check_estimate
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.matrix_config import MatrixConfig
from extraction_eval.seeds.ensemble.build import plan_gold
from extraction_eval.seeds.ensemble.config import GoldConfig, parse_models

PACKAGE = Path(__file__).resolve().parents[2] / "extraction_eval"
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def test_a_mentioned_field_is_the_api_name_in_the_library_and_the_flag_in_the_cli() -> None:
    exc = InvalidValue("max_cost", "needs {price_in} ({x} stays)", mentions=("price_in",))
    assert str(exc) == "max_cost needs price_in ({x} stays)"
    assert exc.field == "max_cost" and exc.problem == "needs price_in ({x} stays)"
    assert error_line(exc) == "--max-cost needs --price-in ({x} stays)"


def test_an_unpriced_run_with_a_ceiling_names_the_price_fields() -> None:
    unpriced = CostEstimate(items=2, calls=2, tokens_in=10, tokens_out=5, usd=None)
    with pytest.raises(InvalidValue) as info:
        check_estimate(1.0, unpriced)
    assert info.value.field == "max_cost" and "--" not in str(info.value)
    assert str(info.value).endswith("give prices with price_in/price_out")
    assert error_line(info.value).startswith("--max-cost cannot be checked")
    assert error_line(info.value).endswith("give prices with --price-in/--price-out")


def test_a_resumed_matrix_without_a_name_names_the_name_field() -> None:
    base = RunConfig(dataset=SAMPLE_DATASET, backend="local", resume=True)
    with pytest.raises(InvalidValue) as info:
        MatrixConfig(models=("fake:a",), base=base)
    assert info.value.field == "resume" and "--" not in str(info.value)
    assert "needs the matrix's name" in str(info.value)
    assert error_line(info.value).startswith("--resume needs the matrix's --name")


def test_a_local_dataset_version_that_is_not_a_number() -> None:
    with pytest.raises(InvalidValue) as info:
        LocalStore().get_items(SAMPLE_DATASET, version="abc")
    assert info.value.field == "version" and "--" not in str(info.value)
    assert error_line(info.value) == "--version must be a number for a local dataset, got 'abc'"


def test_a_run_names_its_own_dataset_version_field() -> None:
    from extraction_eval.experiments.run import run_experiment

    store = LocalStore()
    config = RunConfig(dataset=SAMPLE_DATASET, dataset_version="abc", backend="local")
    with pytest.raises(InvalidValue) as info:
        run_experiment(config, store=store)
    assert info.value.field == "dataset_version" and "--" not in str(info.value)
    assert store.list_runs() == []  # refused before the run existed


def test_a_gold_build_names_its_own_dataset_version_field() -> None:
    config = GoldConfig(
        dataset=SAMPLE_DATASET, models=parse_models(["fake:m1"]), dataset_version="abc"
    )
    with pytest.raises(InvalidValue) as info:
        plan_gold(config, LocalStore())
    assert info.value.field == "dataset_version" and "--" not in str(info.value)
    assert error_line(info.value).startswith("--dataset-version must be a number")


@pytest.mark.parametrize("version", ["yesterday", 3])
def test_a_langfuse_dataset_version_that_is_not_a_timestamp(version: int | str) -> None:
    from extraction_eval.backends.langfuse.datasets import _parse_version

    with pytest.raises(InvalidValue) as info:
        _parse_version(version)
    assert info.value.field == "version" and "timestamp" in str(info.value)


# --- no flag in any message the library raises or warns --------------------------------------

_LIBRARY = [
    p
    for p in sorted(PACKAGE.rglob("*.py"))
    if p.relative_to(PACKAGE).parts[0] not in ("commands", "views") and p.name != "cli.py"
]


def _messages(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of the strings that reach a user: in a ``raise``, in a call that warns or
    adds to a list of warnings, in a ``warnings=`` argument, or in an error built anywhere
    (``InvalidValue(...)``, ``...Error(...)``, ``ItemFailed(...)``); f-string parts too."""
    parts: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            parts.append(node.exc)
        elif isinstance(node, ast.Call):
            func = node.func
            target = func.value if isinstance(func, ast.Attribute) else None
            owner = (
                target.id
                if isinstance(target, ast.Name)
                else target.attr
                if isinstance(target, ast.Attribute)
                else ""
            )
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "InvalidValue" or name.endswith(("Error", "Failed", "Failure")):
                parts.append(node)  # an error built here, raised or returned
            elif name == "warn" or ("warning" in owner and name in ("append", "insert", "extend")):
                parts.extend(node.args)
            parts.extend(k.value for k in node.keywords if k.arg in ("warning", "warnings"))
    strings = {  # by node: a string inside both a raise and an error call counts once
        id(n): n
        for part in parts
        for n in ast.walk(part)
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
    return sorted((n.lineno, n.value) for n in strings.values())


def test_the_scan_finds_a_flag_in_each_kind_of_message() -> None:
    """The scan below would catch each of the shapes the library used to have."""
    source = (
        "raise InvalidValue('max_cost', 'give prices with --price-in')\n"
        "warnings.insert(0, 'compared with --force although')\n"
        "report.warnings.append(f'{x}; --resume with a higher ceiling')\n"
        "Outcome(cell, warnings=[f'{NOT_STARTED}; --resume it'])\n"
        "raise ItemFailed('not run: the --max-cost budget')\n"
        "warnings.warn('use --x', stacklevel=2)\n"
        "return UsageError(f'{option}: use --y')\n"
        "subprocess.run(['git', '--porcelain'])\n"  # not a message
    )
    found = [text for _, text in _messages(ast.parse(source)) if FLAG.search(text)]
    assert len(found) == 7, found


def test_no_library_message_names_a_cli_flag() -> None:
    assert len(_LIBRARY) > 50  # the package's modules were found
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line}: {text!r}"
        for path in _LIBRARY
        for line, text in _messages(ast.parse(path.read_text(encoding="utf-8")))
        if FLAG.search(text)
    ]
    assert offenders == []
