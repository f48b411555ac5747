"""Importing the scoring API must not import scipy (~0.5 s): only aligning objects needs it.

Checked in a fresh interpreter, since this test session has long imported scipy.
"""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


def test_importing_the_evaluators_does_not_import_scipy() -> None:
    loaded = _loaded_after("import extraction_eval.evaluators")
    assert "extraction_eval.evaluators.matching" in loaded  # the module that uses scipy is loaded
    assert not {m for m in loaded if m == "scipy" or m.startswith("scipy.")}


def test_a_real_solve_imports_scipy_when_needed() -> None:
    loaded = _loaded_after(
        "import numpy as np\n"
        "from extraction_eval.evaluators import assign\n"
        "from extraction_eval.evaluators.similarity import jaccard_matrix\n"
        "r, c = assign(np.ones((2, 2), dtype=bool), np.eye(2))\n"
        "assert sorted(zip(r.tolist(), c.tolist())) == [(0, 0), (1, 1)]\n"
        "assert jaccard_matrix([frozenset('ab')], [frozenset('bc')]).tolist() == [[1 / 3]]"
    )
    assert {"scipy.optimize", "scipy.sparse"} <= loaded
