"""One home per idea (issue 26), checked on the source with ``ast`` like the import direction.

- The statistics over many items (bootstrap, tests, power, PPI, ...) live in
  ``evaluators/stats/``; the modules directly in ``evaluators/`` score one item (or fold items'
  counts) and neither compute statistics nor import them, bar the exceptions in
  :data:`STATS_USERS`, each with why.
- ``analysis`` (read-only over stored runs) starts no process: a large report's worker process
  is ``workers/report_worker``'s, so no module under ``analysis/`` imports what starts, forks
  or reaps one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import extraction_eval

ROOT = Path(extraction_eval.__file__).parent
STATS = "extraction_eval.evaluators.stats"

# What makes a module a statistics module: the libraries of tests and distributions, and
# random draws (the bootstrap's resampling).
STATS_IMPORTS = ("scipy.stats", "scipy.special", "statistics", "random")
STATS_CALLS = ("default_rng",)

# Per-item modules that may import the statistics package, and why. The test fails when one
# of them no longer does (remove it here then).
STATS_USERS: dict[str, str] = {
    "__init__": "re-exports bootstrap_prf, public since before the statistics moved",
    "config": "ScoringConfig checks its ci method against the interval methods",
    "report": "the run summary's CIs (the JSON summary aggregates items, like the stats)",
}

# Importing these (or ``from os import`` them) is starting, forking or reaping a process.
PROCESS_MODULES = ("subprocess", "multiprocessing", "pty")
PROCESS_NAMES = ("ProcessPoolExecutor",)
OS_PROCESS_CALLS = (
    "fork",
    "forkpty",
    "wait",
    "wait3",
    "wait4",
    "waitpid",
    "spawnl",
    "spawnv",
    "spawnve",
    "posix_spawn",
    "posix_spawnp",
    "system",
    "popen",
    "execv",
    "execve",
    "kill",
)


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every import: ``import a.b`` and each ``from a import b`` as
    ``a.b`` (relative imports are not used in the package)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, node.module or ""))
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
    return out


def _is(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def statistics_in(source: str) -> list[str]:
    """Why ``source`` reads as statistics, one entry per reason (empty: it does not)."""
    tree = ast.parse(source)
    found = [
        f"line {line}: imports {name}"
        for line, name in _imported(tree)
        if any(_is(name, p) for p in STATS_IMPORTS)
    ]
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        name = getattr(called, "attr", None) or getattr(called, "id", None)
        if name in STATS_CALLS:
            found.append(f"line {node.lineno}: calls {name}")
    return found


def processes_in(source: str) -> list[str]:
    """Where ``source`` starts, forks or reaps a process."""
    tree = ast.parse(source)
    found = [
        f"line {line}: imports {name}"
        for line, name in _imported(tree)
        if any(_is(name, m) for m in PROCESS_MODULES)
        or name.rsplit(".", 1)[-1] in PROCESS_NAMES
        or (name.startswith("os.") and name[3:] in OS_PROCESS_CALLS)
    ]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in OS_PROCESS_CALLS
        ):
            found.append(f"line {node.lineno}: os.{node.attr}")
    return found


def _per_item_modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted((ROOT / "evaluators").glob("*.py"))}


def test_the_checks_find_what_they_look_for() -> None:
    stats = (
        "import statistics\n"
        "from scipy.special import ndtr\n"
        "import numpy as np\n"
        "rng = np.random.default_rng(1)\n"
    )
    assert statistics_in(stats) == [
        "line 1: imports statistics",
        "line 2: imports scipy.special",
        "line 2: imports scipy.special.ndtr",
        "line 4: calls default_rng",
    ]
    assert statistics_in("from scipy.optimize import linear_sum_assignment\n") == []
    process = (
        "import subprocess\n"
        "from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor\n"
        "import os\n"
        "os.wait4(1, 0)\n"
        "from os import fork\n"
        "os.path.join('a')\n"
    )
    assert processes_in(process) == [
        "line 1: imports subprocess",
        "line 2: imports concurrent.futures.ProcessPoolExecutor",
        "line 5: imports os.fork",
        "line 4: os.wait4",
    ]


def test_statistics_modules_are_not_among_the_per_item_scorers() -> None:
    modules = _per_item_modules()
    assert {"item", "matching", "counts"} <= set(modules)  # the per-item scorers were found
    problems = [
        f"evaluators/{name}.py {why}"
        for name, path in modules.items()
        for why in statistics_in(path.read_text(encoding="utf-8"))
    ]
    assert not problems, "statistics outside evaluators/stats/:\n" + "\n".join(problems)


def test_per_item_scorers_import_statistics_only_where_listed() -> None:
    users = {
        name
        for name, path in _per_item_modules().items()
        if any(_is(n, STATS) for _, n in _imported(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert users <= set(STATS_USERS), f"import evaluators.stats: {sorted(users - set(STATS_USERS))}"
    gone = sorted(set(STATS_USERS) - users)
    assert not gone, f"no longer import evaluators.stats, remove from STATS_USERS: {gone}"


def test_analysis_starts_no_process() -> None:
    paths = sorted((ROOT / "analysis").rglob("*.py"))
    assert len(paths) > 10  # the package was found
    problems = [
        f"{path.relative_to(ROOT.parent)} {where}"
        for path in paths
        for where in processes_in(path.read_text(encoding="utf-8"))
    ]
    assert not problems, "analysis starts a process (move it under workers/):\n" + "\n".join(
        problems
    )
