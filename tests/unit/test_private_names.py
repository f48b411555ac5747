"""A module uses another module's private (``_name``) names only inside a package split out of
one module (e.g. the local store's table families sharing ``backends/local/connection``);
anywhere else it asks for a public function, as ``experiments/langfuse_mode`` does of the
LangFuse backend and ``experiments/matrix`` of ``langfuse_mode``. Checked on the source with
``ast``, like the import direction."""

from __future__ import annotations

import ast
from pathlib import Path

import extraction_eval

ROOT = Path(extraction_eval.__file__).parent
PACKAGE = "extraction_eval"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _uses(source: str, module: str) -> list[tuple[int, str, str]]:
    """(line, other module, private name) of every private name ``module`` takes from
    another module of the package: ``from m import _x`` and ``m._x`` on an imported module."""
    tree = ast.parse(source)
    found: list[tuple[int, str, str]] = []
    modules: dict[str, str] = {}  # local name -> module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                if _private(alias.name):
                    found.append((node.lineno, str(node.module), alias.name))
                else:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE) and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append((node.lineno, modules[node.value.id], node.attr))
    return [u for u in found if not _one_split_package(module, u[1])]


def _one_split_package(a: str, b: str) -> bool:
    """Both modules are parts of one package split out of a module (``backends.local``,
    ``backends.langfuse``, ``pipeline.baseline``): they share its private helpers. The
    top-level packages (``experiments``, ``evaluators``, ...) are not one module's parts."""
    parent = a.rsplit(".", 1)[0]
    return parent == b.rsplit(".", 1)[0] and parent.count(".") >= 2


def test_the_check_finds_both_kinds_of_use() -> None:
    source = (
        "from extraction_eval.experiments import langfuse_mode as lfm\n"
        "from extraction_eval.backends.langfuse.datasets import _parse_version\n"
        "from extraction_eval.backends.local.connection import _now\n"
        "lfm._install_log_filter()\n"
    )
    assert _uses(source, "extraction_eval.experiments.matrix") == [
        (2, "extraction_eval.backends.langfuse.datasets", "_parse_version"),
        (3, "extraction_eval.backends.local.connection", "_now"),
        (4, "extraction_eval.experiments.langfuse_mode", "_install_log_filter"),
    ]
    # a table family of the local store shares its connection's helpers
    assert _uses(source, "extraction_eval.backends.local.runs") == [
        (2, "extraction_eval.backends.langfuse.datasets", "_parse_version"),
        (4, "extraction_eval.experiments.langfuse_mode", "_install_log_filter"),
    ]


def test_no_module_uses_a_private_name_of_another_package() -> None:
    uses = [
        f"{path.relative_to(ROOT.parent)}:{line}: {other}.{name}"
        for path in sorted(ROOT.rglob("*.py"))
        for line, other, name in _uses(path.read_text(encoding="utf-8"), _module(path))
    ]
    assert uses == []
