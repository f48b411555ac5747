"""The front door stays true: the CLI reference matches --help, every documented command line
parses against the real CLI, and every Python block compiles and imports names that exist.

Which blocks run (and how their output is compared) is ``test_docs_run.py``; the rules and the
marks are in ``tests/support/docs_blocks.py`` (documented in docs/testing.md).
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys

import pytest

from tests.support.docs_blocks import (
    ENTRY,
    GENERATED,
    PAGES,
    ROOT,
    Block,
    blocks,
    commands,
    shell_text,
)

CODE = [b for page in PAGES if page not in GENERATED for b in blocks(page)]
DOCUMENTED = [
    pytest.param(cmd, id=f"{b.where}:{' '.join(cmd)[:60]}")
    for b in CODE
    if b.kind in ("shell", "console")
    for cmd in commands(shell_text(b))
]
PYTHON = [pytest.param(b, id=b.where) for b in CODE if b.kind == "python"]


def test_generated_pages_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_docs_have_commands_and_blocks_that_run() -> None:
    """Guards the extraction itself: a parser that found nothing would pass every test below."""
    assert len(DOCUMENTED) > 50 and len(PYTHON) > 5
    assert {"README.md", "python-api.md"} <= {b.page.name for b in CODE if b.runs}
    assert any(b.kind == "console" and b.runs for b in CODE)
    assert any(b.kind == "output" for b in CODE)


def test_docs_test_marks_are_known() -> None:
    """A misspelt mark (``needs-key``) would silently run, or silently not compare, a block."""
    bad = [f"{b.where}: {', '.join(b.bad_marks)}" for b in CODE if b.bad_marks]
    assert not bad, bad
    lost = [b.where for b in CODE if "output" in b.marks and b.lang not in ("", "text")]
    assert not lost, f"output marks on code blocks: {lost}"


@pytest.mark.parametrize("argv", DOCUMENTED)
def test_documented_command_parses(argv: list[str]) -> None:
    """Each documented command line is accepted by the real parser (options exist, types
    convert, required arguments are there); nothing runs."""
    import typer

    from extraction_eval.cli import app

    cmd = typer.main.get_command(app)
    args = [*ENTRY[argv[0]], *argv[1:]]
    path = []
    while args and hasattr(cmd, "commands") and args[0] in cmd.commands:
        path.append(args[0])
        cmd = cmd.commands[args.pop(0)]
    assert not hasattr(cmd, "commands") or "--help" in args, f"no such command: {argv}"
    if "--help" in args:
        return
    cmd.make_context(" ".join(["extraction-eval", *path]), args)


@pytest.mark.parametrize("block", PYTHON)
def test_documented_python_compiles_and_its_imports_exist(block: Block) -> None:
    """Each Python block is valid Python and every ``extraction_eval`` name it imports exists
    (a block marked as needing keys is not run, so this is what keeps it current)."""
    tree = ast.parse(block.code, filename=block.where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("extraction_eval"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{block.where}: {node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("extraction_eval"):
                    importlib.import_module(alias.name)
