"""A run asked for in local mode (``backend="local"``) never imports the LangFuse backend or
its SDK: local mode needs neither, and importing them cost a local run about 0.1 s of CPU
(an import check in a fresh interpreter, not a timing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_PROBE = (
    "import json, sys\n"
    "from extraction_eval import RunConfig, run_experiment\n"
    "out = run_experiment(RunConfig(dataset='extraction-eval', name='local', backend='local',"
    " limit=3))\n"
    "print(json.dumps([out.summary.items, sorted(m for m in sys.modules"
    " if m == 'langfuse' or m.startswith(('langfuse.', 'extraction_eval.backends.langfuse')))]))\n"
)


def test_a_local_run_imports_no_langfuse(tmp_path: Path) -> None:
    env = {"EXTRACTION_EVAL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    items, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert items == 3 and loaded == []


_PRELOAD = (
    "import json, sys, threading\n"
    "from extraction_eval import RunConfig\n"
    "from extraction_eval.backends.local import LocalStore\n"
    "from extraction_eval.evaluators.preload import THREAD_NAME\n"
    "from extraction_eval.experiments.prepare import plan\n"
    "def scipy_loaded():\n"
    "    return sorted(m for m in ('scipy.optimize', 'scipy.sparse', 'scipy.special')"
    " if m in sys.modules)\n"
    "before = scipy_loaded()\n"
    "plan(RunConfig(dataset='extraction-eval', name='p', backend='local', limit=3), LocalStore())\n"
    "for t in threading.enumerate():\n"
    "    if t.name == THREAD_NAME:\n"
    "        t.join()\n"
    "print(json.dumps([before, scipy_loaded()]))\n"
)


def test_a_run_setup_preloads_scipy_before_its_first_item(tmp_path: Path) -> None:
    """The first scored item used to import scipy inside the event loop, every call in flight
    waiting behind it: the setup (which scores nothing) now starts that import on a thread."""
    env = {"EXTRACTION_EVAL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _PRELOAD], env=env, capture_output=True, text=True, check=True
    )
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == []
    assert after == ["scipy.optimize", "scipy.sparse", "scipy.special"]
