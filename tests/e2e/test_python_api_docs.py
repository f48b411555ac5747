"""The Python API page's example uses only top-level names (that it runs as written and prints
what the page shows is ``test_docs_run.py``'s check of the page)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def _example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"<!-- python-api-example -->\n```python\n(.*?)```\n", text, flags=re.S)
    assert found is not None, "the marked example"
    return found.group(1)


def test_the_example_imports_only_top_level_names() -> None:
    code = _example()
    imports = [n for n in ast.walk(ast.parse(code)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports and all(
        isinstance(n, ast.ImportFrom) and n.module == "extraction_eval" for n in imports
    )
