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
