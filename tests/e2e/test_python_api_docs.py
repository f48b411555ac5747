"""The Python API page's example runs as written, with only top-level names, and prints what
the page shows (a fresh store; the bundled example files as ``gold.jsonl`` / ``pred.jsonl``)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from extraction_eval.datasets.bundled import example_paths

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def _example() -> tuple[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- python-api-example -->\n```python\n(.*?)```\n.*?```\n(.*?)```", text, flags=re.S
    )
    assert found is not None, "the marked example and its output block"
    return found.group(1), found.group(2)


def test_the_example_imports_only_top_level_names() -> None:
    code, _ = _example()
    imports = [n for n in ast.walk(ast.parse(code)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports and all(
        isinstance(n, ast.ImportFrom) and n.module == "extraction_eval" for n in imports
    )


def test_the_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    code, shown = _example()
    gold, predictions = example_paths()
    shutil.copy(gold, tmp_path / "gold.jsonl")
    shutil.copy(predictions, tmp_path / "pred.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANGFUSE_")}
    env["EXTRACTION_EVAL_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown
