"""The package's import direction (README "Design"), checked on the source with ``ast``.

``cli -> commands, views/reports -> experiments / analysis / seeds / workers -> pipeline ->
evaluators (with evaluators.stats), llm, backends, prompts, datasets -> types``: a module may
import its own layer or lower ones, never a higher one; ``analysis`` (read-only over stored
runs) never starts a run (the modes, the driver, prepare); ``evaluators`` (pure scoring)
imports nothing from ``llm`` or ``backends``; ``datasets`` (our JSONL files) imports only
``types`` and ``errors``, so every building block may read them; ``views`` (Rich
presentation) never imports ``commands``, which call them; a command module imports no other
command module (only ``cli`` does; what two commands share is in ``commands/common.py``,
``commands/options.py`` or the library). Nothing is imported to check this,
so a violation is found even in a module no test loads.

Every import counts, wherever it sits: at module level, deferred inside a function, or under
``if TYPE_CHECKING:`` (a type-only import is still a dependency a reader has to follow, and it
is how cycles creep back in).
"""

from __future__ import annotations

import ast
from pathlib import Path

import extraction_eval

PACKAGE = "extraction_eval"
ROOT = Path(extraction_eval.__file__).parent

# The longest dotted prefix that matches decides a module's layer (higher imports lower).
LAYERS: dict[str, int] = {
    # the vocabulary everything shares
    "extraction_eval.types": 0,
    "extraction_eval.errors": 0,
    "extraction_eval.validation": 0,
    "extraction_eval.version": 0,
    "extraction_eval.redact": 0,  # secrets out of error text; imported by errors
    "extraction_eval.limits": 0,  # every bound on an accepted value
    "extraction_eval.tomlfile": 0,  # config files read as hostile input
    "extraction_eval.textsafe": 0,  # lone surrogates out of text before it is stored
    "extraction_eval.atomic": 0,  # files written whole or not at all
    "extraction_eval.regular_files": 0,  # small files read as hostile input
    # building blocks
    "extraction_eval.evaluators": 1,
    # statistics over many items' scores (bootstrap, paired Δ, power, PPI, ...): beside the
    # per-item scorers they summarise, on their layer (test_shelves keeps them apart)
    "extraction_eval.evaluators.stats": 1,
    "extraction_eval.llm": 1,
    "extraction_eval.backends": 1,
    "extraction_eval.prompts": 1,
    "extraction_eval.datasets": 1,  # JSONL in/out; FORBIDDEN keeps it on types + errors only
    # pipelines: providers + prompts + tracing put together
    "extraction_eval.pipeline": 2,
    # the semantic judge: calls models (llm providers, pricing, the response cache) like a
    # pipeline, so it is not in the pure evaluators; analysis puts its verdicts beside scores
    "extraction_eval.judge": 2,
    # use cases
    "extraction_eval.experiments": 3,  # the run path: plan, drive, record, finalize, shards
    "extraction_eval.analysis": 3,  # read-only over stored runs: compare, diff, report data
    "extraction_eval.seeds": 3,  # datasets from elsewhere: production traces, ensemble gold
    # the processes the package starts (half of a large HTML report): analysis asks for one
    "extraction_eval.workers": 3,
    # presentation (views render what the library returns) and the commands that call both
    "extraction_eval.commands": 4,
    "extraction_eval.views": 4,
    "extraction_eval.reports": 4,  # the HTML report: presentation like views
    # the entry points
    "extraction_eval.cli": 5,
    "extraction_eval.__main__": 5,
}
# The package root is the public API (re-exported lazily): above every layer, and imported by
# none of them. Only the exact name: a module missing from LAYERS must not inherit its layer.
ROOT_LAYER = 6

_EXP = "extraction_eval.experiments"
_MODES = (f"{_EXP}.local_mode", f"{_EXP}.langfuse_mode", f"{_EXP}.run")

# Same-layer imports are allowed, except these (importer prefix -> forbidden prefixes).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "extraction_eval.evaluators": ("extraction_eval.llm", "extraction_eval.backends"),
    # commands parse, call, render: a view never calls back into a command
    "extraction_eval.views": ("extraction_eval.commands",),
    "extraction_eval.reports": ("extraction_eval.commands",),
    "extraction_eval.datasets": (
        "extraction_eval.evaluators",
        "extraction_eval.llm",
        "extraction_eval.backends",
        "extraction_eval.prompts",
    ),
    # inside experiments: run (picks the mode) -> local_mode / langfuse_mode -> driver ->
    # prepare -> runner; a mode never imports the other mode or the entry point
    # an analysis reads stored runs: it never starts one
    "extraction_eval.analysis": (*_MODES, f"{_EXP}.driver", f"{_EXP}.prepare"),
    f"{_EXP}.driver": _MODES,
    f"{_EXP}.prepare": (*_MODES, f"{_EXP}.driver"),
    f"{_EXP}.runner": (*_MODES, f"{_EXP}.driver", f"{_EXP}.prepare"),
    f"{_EXP}.local_mode": (f"{_EXP}.langfuse_mode", f"{_EXP}.run"),
    f"{_EXP}.langfuse_mode": (f"{_EXP}.local_mode", f"{_EXP}.run"),
}

# Known violations still to fix, each with why it is there. The test fails when one of them is
# gone (so the entry is removed with the fix) as well as when a new one appears.
KNOWN: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _layer(module: str) -> tuple[str, int] | None:
    if module == PACKAGE:
        return PACKAGE, ROOT_LAYER
    matches = [(p, n) for p, n in LAYERS.items() if module == p or module.startswith(p + ".")]
    return max(matches, key=lambda m: len(m[0]), default=None)


def _imports(path: Path, module: str, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported module) for every import of this package in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{base}.{alias.name}"
                out.append((node.lineno, sub if sub in known else base))
    return sorted(out)


def _violations() -> tuple[list[str], set[tuple[str, str]]]:
    """Offending imports (one line each), and which ``KNOWN`` exceptions were seen."""
    modules = _modules()
    known = set(modules)
    problems: list[str] = []
    excused: set[tuple[str, str]] = set()
    for module, path in modules.items():
        own = _layer(module)
        assert own is not None, f"{module} has no layer: add it to LAYERS"
        for line, target in _imports(path, module, known):
            if (module, target) in KNOWN:
                excused.add((module, target))
                continue
            theirs = _layer(target)
            assert theirs is not None, f"{module}:{line} imports {target}, which has no layer"
            where = f"{path.relative_to(ROOT.parent)}:{line}: {module} imports {target}"
            if theirs[1] > own[1]:
                problems.append(f"{where} (layer {own[1]} imports layer {theirs[1]})")
            for importer, banned in FORBIDDEN.items():
                inside = module == importer or module.startswith(importer + ".")
                if inside and any(target == b or target.startswith(b + ".") for b in banned):
                    problems.append(f"{where} ({importer} must not import {', '.join(banned)})")
    return problems, excused


def test_no_module_imports_a_higher_layer() -> None:
    problems, _ = _violations()
    assert not problems, "imports against the layer order:\n" + "\n".join(problems)


# What a command module may import from ``commands/``: the shared consoles, checks and options.
# A helper two commands need is library code (``analysis/``) or, when it prints or names a
# flag, ``commands/common.py``; only ``cli`` imports the command modules (issue 26).
COMMAND_SHARED = (
    f"{PACKAGE}.commands",
    f"{PACKAGE}.commands.common",
    f"{PACKAGE}.commands.options",
    f"{PACKAGE}.commands.help_layout",
)


def command_borrowings(modules: dict[str, Path]) -> list[str]:
    """Imports of one command module by another (one line each)."""
    known = set(modules)
    out: list[str] = []
    for module, path in modules.items():
        if not module.startswith(f"{PACKAGE}.commands."):
            continue
        for line, target in _imports(path, module, known):
            if target.startswith(f"{PACKAGE}.commands.") and target not in COMMAND_SHARED:
                out.append(f"{module}:{line} imports {target}")
    return sorted(set(out))


def test_a_command_module_imports_no_other_command_module() -> None:
    modules = _modules()
    assert f"{PACKAGE}.commands.compare" in modules  # the commands were found
    found = command_borrowings(modules)
    assert not found, (
        "a command module calls into another one (move the helper to analysis/, or to"
        " commands/common.py when it prints or names a flag):\n" + "\n".join(found)
    )


def test_the_borrowing_check_finds_a_borrowed_helper(tmp_path: Path) -> None:
    """The rule fails on a command that imports another command module (so it cannot pass
    vacuously); the shared modules are allowed."""
    names = ("report", "options", "common", "compare")
    modules = {f"{PACKAGE}.commands.{n}": tmp_path / f"{n}.py" for n in names}
    for path in modules.values():
        path.write_text("", encoding="utf-8")
    (tmp_path / "report.py").write_text(
        "from extraction_eval.commands import options as o\n"
        "from extraction_eval.commands.common import fail\n"
        "def f() -> None:\n"
        "    from extraction_eval.commands.compare import judges_for\n",
        encoding="utf-8",
    )
    found = command_borrowings(modules)
    assert found == [f"{PACKAGE}.commands.report:4 imports {PACKAGE}.commands.compare"]


def test_known_exceptions_are_still_needed() -> None:
    _, excused = _violations()
    fixed = sorted(set(KNOWN) - excused)
    assert not fixed, f"no longer imported, remove from KNOWN: {fixed}"


def test_every_module_has_a_layer() -> None:
    missing = [m for m in _modules() if _layer(m) is None]
    assert not missing, f"modules with no layer in LAYERS: {missing}"


def test_the_checker_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A deferred import and one under TYPE_CHECKING are found like a top-level one."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "import extraction_eval.cli\n"
        "if TYPE_CHECKING:\n"
        "    from extraction_eval.pipeline.base import PipelineConfig\n"
        "def f() -> None:\n"
        "    from extraction_eval import commands\n"
        "    from . import base\n"
    )
    path = tmp_path / "extraction_eval" / "llm" / "probe.py"
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    known = {"extraction_eval.commands", "extraction_eval.llm.base"}
    found = _imports(path, "extraction_eval.llm.probe", known)
    assert found == [
        (2, "extraction_eval.cli"),
        (4, "extraction_eval.pipeline.base"),
        (6, "extraction_eval.commands"),
        (7, "extraction_eval.llm.base"),
    ]
