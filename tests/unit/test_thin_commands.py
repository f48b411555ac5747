"""Commands parse options, build a library config, call the library, render — nothing else
(issue 26): checked on the source with ``ast``, so it holds for commands no test runs.

- No function in ``commands/`` has a body over 60 lines (the signature, typer's option list,
  does not count; nor does the docstring). Logic that makes one longer belongs in the library
  (``analysis/``, ``experiments/``, ``views/`` for rendering) or in a helper beside it.
- An option shared through ``commands/options.py`` or ``commands/common.py`` (a typer
  ``Annotated`` alias) is declared there only: no command declares the same flag again with
  its own ``typer.Option(...)``, where its help would drift from the shared one.
- Every command goes through ``common.handle_errors`` (a domain error is one ``error:`` line
  and its exit code, Ctrl-C is 130), none with an error handler of its own.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

COMMANDS = Path(__file__).resolve().parents[2] / "extraction_eval" / "commands"
MAX_BODY = 60
SHARED = ("options.py", "common.py")  # where shared options are declared

# file.py:function -> (its own cap, why it is longer than MAX_BODY); a cap, so it does not
# grow. Empty: every command function is within MAX_BODY.
LONGER: dict[str, tuple[int, str]] = {}

# (flag, file.py:function) -> why this command's flag is its own option, not the shared one
# of the same name. The test fails on a pair missing here, and on one no longer declared.
OWN_OPTION: dict[tuple[str, str], str] = {
    ("--ci", "compare.py:compare_cmd"): "default: the interval run A was scored with",
    ("--config", "runs.py:show_cmd"): "prints the run's parameters; not a TOML file",
    ("--correction", "matrix.py:matrix_cmd"): "over cells × metrics against the best cell",
    ("--dataset", "seed.py:seed"): "the dataset seeded into (-d), not a run's",
    ("--dry-run", "seed.py:seed"): "lists the items it would create; no cost estimate",
    ("--format", "datasets.py:import_cmd"): "the file's format (label-studio, brat, ...)",
    ("--format", "runs.py:export_cmd"): "the export's format: jsonl | csv",
    ("--format", "judge.py:calibrate_cmd"): "table | json without the old 'text' (not yet"
    " the one --format: its error message differs)",
    ("--format", "score.py:score"): "table | json without the old 'text' (not yet the one"
    " --format: its error message differs)",
    ("--judge", "judge.py:calibrate_cmd"): "the judge calibrated (required), not a judge added",
    ("--limit", "datasets.py:show_cmd"): "items shown, not items run",
    ("--limit", "gold.py:triage_cmd"): "items queued, not items run",
    ("--limit", "runs.py:show_cmd"): "items per page, not items run",
    ("--name", "prompts.py:list_cmd"): "a prompt's name, not a run's",
    ("--name", "prompts.py:push_cmd"): "a prompt's name, not a run's",
    ("--name", "prompts.py:show_cmd"): "a prompt's name, not a run's",
    ("--name", "runs.py:rescore_cmd"): "the rescored run's name, default NAME@vVERSION",
    ("--verify", "runs.py:finalize_cmd"): "reads back the run scores only (no traces)",
}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the last one."""
    body = fn.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno or body[-1].lineno
    return end - body[0].lineno + 1


def command_body_sizes(root: Path = COMMANDS) -> dict[str, int]:
    """``file.py:function`` -> body lines, for every function of the commands package."""
    sizes: dict[str, int] = {}
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                sizes[f"{path.name}:{node.name}"] = _body_lines(node)
    return sizes


def _flag(call: ast.Call) -> str | None:
    """The ``--flag`` a ``typer.Option(...)`` / ``_option(...)`` call names, if it names one."""
    for arg in call.args:
        text = arg.value if isinstance(arg, ast.Constant) else None
        if isinstance(text, str) and text.startswith("--"):
            return text.split("/")[0]
    return None


def _is_option_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("Option", "_option")


def _option_call(node: ast.AST, named: dict[str, ast.Call]) -> ast.Call | None:
    """The option call inside an annotation: inline, or through a module-level name."""
    for sub in ast.walk(node):
        if _is_option_call(sub):
            return sub  # type: ignore[return-value]
        if isinstance(sub, ast.Name) and sub.id in named:
            return named[sub.id]
    return None


def _param_flag(arg: ast.arg, call: ast.Call | None) -> str:
    explicit = _flag(call) if call is not None else None
    return explicit or "--" + arg.arg.replace("_", "-")


def declarations(root: Path = COMMANDS) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(shared flag -> where used, inline flag -> where declared): a parameter annotated with
    an alias of ``options.py`` / ``common.py`` uses a shared option; one whose annotation
    holds its own ``typer.Option(...)`` (inline or through a name of its module) declares it."""
    aliases: dict[str, ast.Call | None] = {}  # shared alias name -> its option call
    for name in SHARED:
        tree = _tree(root / name)
        named: dict[str, ast.Call] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                target = node.targets[0].id
                if _is_option_call(node.value):
                    named[target] = node.value  # type: ignore[assignment]
                elif "Annotated" in ast.unparse(node.value):
                    aliases[target] = _option_call(node.value, named)
    shared: dict[str, set[str]] = {}
    inline: dict[str, set[str]] = {}
    for path in sorted(root.glob("*.py")):
        tree = _tree(path)
        local: dict[str, ast.Call] = {}
        for node in tree.body:  # a module's own aliases (DatasetOpt = Annotated[...])
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                call = _option_call(node.value, {})
                if call is not None and path.name not in SHARED:
                    local[node.targets[0].id] = call
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                if arg.annotation is None:
                    continue
                where = f"{path.name}:{node.name}"
                used = [
                    n.attr if isinstance(n, ast.Attribute) else n.id
                    for n in ast.walk(arg.annotation)
                    if isinstance(n, ast.Attribute | ast.Name)
                ]
                alias = next((u for u in used if u in aliases), None)
                if alias is not None:
                    shared.setdefault(_param_flag(arg, aliases[alias]), set()).add(where)
                    continue
                call = _option_call(arg.annotation, local)
                if call is not None:
                    inline.setdefault(_param_flag(arg, call), set()).add(where)
    return shared, inline


def test_no_command_function_is_over_60_lines() -> None:
    sizes = command_body_sizes()
    assert len(sizes) > 50  # the commands were found
    over = {name: n for name, n in sizes.items() if n > LONGER.get(name, (MAX_BODY, ""))[0]}
    assert not over, f"command functions over {MAX_BODY} body lines (move logic out): {over}"


def test_every_longer_function_still_needs_its_exception() -> None:
    sizes = command_body_sizes()
    stale = [name for name in LONGER if sizes.get(name, 0) <= MAX_BODY]
    assert not stale, f"within {MAX_BODY} lines now (or gone): remove from LONGER: {stale}"


def test_a_shared_option_is_declared_once() -> None:
    shared, inline = declarations()
    assert "--fail-on-regression" in shared and "--format" in shared  # the checker sees them
    again = {
        (flag, where)
        for flag in set(shared) & set(inline)
        for where in inline[flag]
        if (flag, where) not in OWN_OPTION
    }
    assert not again, (
        "options declared in options.py/common.py and again in a command (use the shared"
        f" alias, or say in OWN_OPTION why it is another option): {sorted(again)}"
    )
    seen = {(flag, where) for flag, places in inline.items() for where in places}
    stale = sorted(set(OWN_OPTION) - seen)
    assert not stale, f"no longer declared in the command: remove from OWN_OPTION: {stale}"


def _commands(app: typer.Typer, prefix: str = "") -> dict[str, Callable[..., Any]]:
    """Command path -> the function typer calls, for every command of ``app``."""
    out: dict[str, Callable[..., Any]] = {}
    for command in app.registered_commands:
        if command.callback is not None:
            out[prefix + (command.name or command.callback.__name__)] = command.callback
    for group in app.registered_groups:
        if group.typer_instance is not None:
            out.update(_commands(group.typer_instance, f"{prefix}{group.name} "))
    return out


def test_every_command_goes_through_handle_errors() -> None:
    from extraction_eval.cli import app
    from extraction_eval.commands.common import handle_errors

    wrapper = handle_errors(lambda: None).__code__  # the code every wrapped command runs
    found = _commands(app)
    assert {"score", "compare", "runs show", "judge calibrate"} <= set(found)
    own = sorted(name for name, fn in found.items() if fn.__code__ is not wrapper)
    assert not own, f"commands not wrapped in commands.common.handle_errors: {own}"


def test_the_checker_finds_a_long_body_and_a_second_declaration(tmp_path: Path) -> None:
    """The two checks fail on a command that breaks them (so they cannot pass vacuously)."""
    (tmp_path / "options.py").write_text(
        "from typing import Annotated\nimport typer\n"
        'Gate = Annotated[list[str] | None, typer.Option(help="shared")]\n',
        encoding="utf-8",
    )
    (tmp_path / "common.py").write_text("", encoding="utf-8")
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_BODY + 1))
    (tmp_path / "cmd.py").write_text(
        "from typing import Annotated\nimport typer\nfrom . import options as o\n"
        "def a(gate: o.Gate = None) -> None:\n"
        '    """Doc."""\n    return None\n'
        'def b(gate: Annotated[list[str] | None, typer.Option(help="own")] = None) -> None:\n'
        + body,
        encoding="utf-8",
    )
    assert command_body_sizes(tmp_path)["cmd.py:b"] == MAX_BODY + 1
    assert command_body_sizes(tmp_path)["cmd.py:a"] == 1
    shared, inline = declarations(tmp_path)
    assert shared == {"--gate": {"cmd.py:a"}} and inline == {"--gate": {"cmd.py:b"}}
