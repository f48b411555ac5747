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
    "from tests.support.openai_server import LoopbackServer\n"
    "from extraction_eval import PipelineConfig, RunConfig\n"
    "from extraction_eval.backends.local import LocalStore\n"
    "from extraction_eval.experiments import prepare\n"
    "answer = {'entities': [], 'relationships': []}\n"
    "server = LoopbackServer(latency_s=0.05, answer=lambda body: answer).start()\n"
    "threads, real = [], prepare.preload_scoring\n"
    "def preload():\n"
    "    threads.append(threading.current_thread().name)\n"
    "    real()\n"
    "prepare.preload_scoring = preload\n"
    "def scipy_loaded():\n"
    "    return sorted(m for m in ('scipy.optimize', 'scipy.sparse', 'scipy.special')"
    " if m in sys.modules)\n"
    "before = scipy_loaded()\n"
    "config = RunConfig(dataset='extraction-eval', name='p', backend='local', limit=3,"
    " pipeline=PipelineConfig(model='openai:m', base_url=server.url))\n"
    "planned = prepare.plan(config, LocalStore())\n"
    "choice = planned.record['response_format_choice']['how']\n"
    "print(json.dumps([before, scipy_loaded(), threads, choice]))\n"
)


def test_a_run_setup_imports_scipy_while_its_format_probe_waits(tmp_path: Path) -> None:
    """The first item whose alignment needs the solver used to import scipy inside the event
    loop, every call in flight waiting behind it: the setup (which scores nothing) now imports
    it while the response format probe waits for the server, on the setup's own thread (an
    import on a thread of its own can break a concurrent ``ast.parse`` on Python < 3.11.8)."""
    repo = Path(__file__).resolve().parents[2]
    env = {"EXTRACTION_EVAL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo)}
    env["OPENAI_API_KEY"] = "sk-test-not-a-real-key"
    done = subprocess.run(
        [sys.executable, "-c", _PRELOAD], env=env, capture_output=True, text=True, check=True
    )
    before, after, threads, how = json.loads(done.stdout.strip().splitlines()[-1])
    assert how == "detected"  # the server was probed
    assert before == []
    assert after == ["scipy.optimize", "scipy.sparse", "scipy.special"]
    assert threads == ["MainThread"]


_NO_PRELOAD = (
    "import json, sys\n"
    "from dataclasses import replace\n"
    "from tests.support.openai_server import LoopbackServer\n"
    "from extraction_eval import PipelineConfig, RunConfig\n"
    "from extraction_eval.backends.local import LocalStore\n"
    "from extraction_eval.experiments import prepare\n"
    "from extraction_eval.workers import item_worker\n"
    "answer = {'entities': [], 'relationships': []}\n"
    "server = LoopbackServer(latency_s=0.05, answer=lambda body: answer).start()\n"
    "def scipy_loaded():\n"
    "    return sorted(m for m in ('scipy.optimize', 'scipy.sparse', 'scipy.special')"
    " if m in sys.modules)\n"
    "config = RunConfig(dataset='extraction-eval', name='p', backend='local', limit=3,"
    " pipeline=PipelineConfig(model='openai:m', base_url=server.url))\n"
    "store = LocalStore()\n"
    "planned = prepare.plan(config, store, scores_here=False)\n"
    "choice = planned.record['response_format_choice']['how']\n"
    "after_plan = scipy_loaded()\n"
    "job = item_worker.job_for(planned.runner, store, config.pipeline)\n"
    "item_worker._setup(job)\n"
    "print(json.dumps([after_plan, scipy_loaded(), choice]))\n"
)


def test_with_workers_neither_the_setup_nor_a_worker_imports_the_solver_before_an_item(
    tmp_path: Path,
) -> None:
    """With ``--workers`` the workers score: the run's setup (``scores_here=False``) imports
    only what the run's intervals need at its end, and a worker's setup none of scipy; the
    solver and sparse matrices are left to the first item whose alignment needs them (about
    0.4 s of CPU per process, for nothing when no item does)."""
    repo = Path(__file__).resolve().parents[2]
    env = {"EXTRACTION_EVAL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo)}
    env["OPENAI_API_KEY"] = "sk-test-not-a-real-key"
    done = subprocess.run(
        [sys.executable, "-c", _NO_PRELOAD], env=env, capture_output=True, text=True, check=True
    )
    after_plan, after_worker_setup, how = json.loads(done.stdout.strip().splitlines()[-1])
    assert how == "detected"  # the server was probed (the preload used to run meanwhile)
    assert after_plan == after_worker_setup == ["scipy.special"]
