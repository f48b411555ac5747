"""The sharding page's Kubernetes Indexed Job and GitHub Actions workflow run as written: each
shard's script with the variables its orchestrator sets (``JOB_COMPLETION_INDEX``;
``${{ strategy.job-index }}``...), temporary folders for the volumes and the workspace, the
offline model instead of ``MODEL``; then the merge-and-finalize step. The finalized run equals
a one-process run of the same dataset, and the gate's exit code is the one its figure gives.

Only what no test machine has is stood in for: the cluster and the runners (a subprocess per
pod or job), the volumes (folders), the artifact store (a folder) and ``pip install``."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from extraction_eval.backends.local import LocalStore
from extraction_eval.datasets.bundled import sample_items
from extraction_eval.datasets.jsonl import write_items

PAGE = Path(__file__).resolve().parents[2] / "docs" / "sharding.md"
BIN = Path(sys.executable).parent
ITEMS = 16  # enough for every one of 4 shards to hold items, small enough to be quick
ORCHESTRATOR_VARS = (
    "JOB_COMPLETION_INDEX",
    "EXTRACTION_EVAL_SHARD_INDEX",
    "EXTRACTION_EVAL_SHARD_COUNT",
    "SLURM_ARRAY_TASK_ID",
)


def _yaml_blocks() -> list[Any]:
    text = PAGE.read_text(encoding="utf-8")
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ORCHESTRATOR_VARS}
    env = {k: v for k, v in env.items() if not k.startswith("LANGFUSE_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _dataset(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fp:
        write_items(sample_items()[:ITEMS], fp)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same dataset run in one process: what the shards must add up to."""
    tmp = tmp_path_factory.mktemp("one-process")
    home = tmp / "home"
    _dataset(tmp / "one.jsonl")
    env = _env(EXTRACTION_EVAL_HOME=str(home))
    for cmd in (
        ["extraction-eval", "datasets", "upload", "my-set", str(tmp / "one.jsonl")],
        ["run-experiment", "--dataset", "my-set", "--name", "whole", "--model", "offline:baseline"],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    run = LocalStore(home / "store.db").get_run("whole", "my-set")
    assert run is not None and run.summary is not None
    return dict(run.summary["values"])


def _gate_exit(values: dict[str, Any], script: str) -> int:
    threshold = float(re.findall(r"--fail-under entity_f1=([\d.]+)", script)[-1])
    return 0 if values["entity_f1"] >= threshold else 1


def _pod_script(container: dict[str, Any], root: Path) -> tuple[str, dict[str, str]]:
    """The container's script and env with the volumes' mount paths moved under ``root``."""

    def moved(text: str) -> str:
        for mount in ("/work", "/results", "/data"):
            text = re.sub(rf"(?<![\w/]){mount}\b", f"{root}{mount}", text)
        return text

    assert container["command"] == ["sh", "-c"]
    env = {e["name"]: moved(str(e["value"])) for e in container.get("env", [])}
    if "MODEL" in env:
        env["MODEL"] = "offline:baseline"
    return moved(container["args"][0]), env


def test_the_kubernetes_indexed_job_and_its_finalize_job_run_as_documented(
    tmp_path: Path, one_process: dict[str, Any]
) -> None:
    jobs = [b for b in _yaml_blocks() if isinstance(b, dict) and b.get("kind") == "Job"]
    shard_job = next(j for j in jobs if j["spec"].get("completionMode") == "Indexed")
    final_job = next(j for j in jobs if j is not shard_job)
    completions = shard_job["spec"]["completions"]
    assert (
        f"--shard-count {completions}"
        in shard_job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    )
    shared = tmp_path / "cluster"
    _dataset(shared / "data" / "my-set.jsonl")  # the configMap
    (shared / "results").mkdir()  # the persistent volume
    for index in range(completions):  # one pod each, its own emptyDir at /work
        pod = tmp_path / f"pod-{index}"
        pod.mkdir()
        for volume in ("results", "data"):
            (pod / volume).symlink_to(shared / volume)
        script, env = _pod_script(shard_job["spec"]["template"]["spec"]["containers"][0], pod)
        done = subprocess.run(
            ["sh", "-c", script],
            env=_env(**env, JOB_COMPLETION_INDEX=str(index)),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (shared / "results").iterdir()) == [
        f"shard-{i}.db" for i in range(completions)
    ]
    final = tmp_path / "final-pod"
    final.mkdir()
    (final / "results").symlink_to(shared / "results")
    script, env = _pod_script(final_job["spec"]["template"]["spec"]["containers"][0], final)
    done = subprocess.run(
        ["sh", "-c", script], env=_env(**env), capture_output=True, text=True, check=False
    )
    expected = one_process
    assert done.returncode == _gate_exit(expected, script), done.stderr
    run = LocalStore(final / "work" / "final" / "store.db").get_run("gpt-v1", "my-set")
    assert run is not None and run.summary is not None and run.status == "finished"
    assert run.summary["items"] == ITEMS
    assert run.summary["values"] == expected


def _expand(text: str, context: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        if key.startswith("secrets."):
            return ""
        return context[key]

    return re.sub(r"\$\{\{(.*?)\}\}", value, text)


def _run_job(
    job: dict[str, Any], context: dict[str, str], workspace: Path, artifacts: Path, data: Path
) -> int:
    """The job's steps in ``workspace``: ``run`` steps in bash -e (the runners' default), the
    actions it uses stood in for. Returns the exit code of the first failing step, or 0."""
    workspace.mkdir(parents=True)
    context = {**context, "github.workspace": str(workspace)}
    env = _env(**{k: _expand(str(v), context) for k, v in (job.get("env") or {}).items()})
    if "MODEL" in env:
        env["MODEL"] = "offline:baseline"
    for step in job["steps"]:
        uses = step.get("uses", "")
        args = {k: _expand(str(v), context) for k, v in (step.get("with") or {}).items()}
        if uses.startswith("actions/checkout"):
            shutil.copytree(data, workspace, dirs_exist_ok=True)  # the repository's files
        elif uses.startswith("actions/upload-artifact"):
            target = artifacts / args["name"]
            target.mkdir(parents=True)
            shutil.copy(workspace / args["path"], target)
        elif uses.startswith("actions/download-artifact"):
            for found in sorted(artifacts.iterdir()):
                if fnmatch.fnmatch(found.name, args["pattern"]):
                    shutil.copytree(found, workspace / found.name)
        elif "run" in step:
            script = _expand(step["run"], context)
            if script.strip() == "pip install .":
                continue  # the test runs in the installed package's venv
            done = subprocess.run(
                ["bash", "-e", "-c", script],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode:
                return done.returncode
        else:
            assert uses.startswith("actions/setup-python"), f"no stand-in for step {step}"
    return 0


def test_the_github_actions_matrix_workflow_runs_as_documented(
    tmp_path: Path, one_process: dict[str, Any]
) -> None:
    workflow = next(b for b in _yaml_blocks() if isinstance(b, dict) and "jobs" in b)
    repo = tmp_path / "repo"
    _dataset(repo / "data" / "my-set.jsonl")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    shard_job, final_job = workflow["jobs"]["shard"], workflow["jobs"]["finalize"]
    assert final_job["needs"] == "shard"
    values = shard_job["strategy"]["matrix"]["shard"]
    github = {"github.run_id": "4242"}
    for index, value in enumerate(values):  # strategy.job-index: matrix order, from 0
        context = {
            **github,
            "strategy.job-index": str(index),
            "strategy.job-total": str(len(values)),
            "matrix.shard": str(value),
        }
        code = _run_job(shard_job, context, tmp_path / f"shard-{value}", artifacts, repo)
        assert code == 0
    workspace = tmp_path / "finalize"
    code = _run_job(final_job, github, workspace, artifacts, repo)
    script = final_job["steps"][-1]["run"]
    expected = one_process
    assert code == _gate_exit(expected, script)
    run = LocalStore(workspace / "store-1" / "store.db").get_run("nightly-4242", "my-set")
    assert run is not None and run.summary is not None and run.status == "finished"
    assert run.summary["items"] == ITEMS
    assert run.summary["values"] == expected
    # every shard ran its own part: shard k's store holds shard k/4 of the run
    for value in values:
        store = LocalStore(artifacts / f"store-{value}" / "store.db")
        shard_run = store.get_run("nightly-4242", "my-set")
        assert shard_run is not None
        assert shard_run.config["shard"] == {"index": value, "count": len(values)}


@pytest.fixture(autouse=True)
def _no_orchestrator(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ORCHESTRATOR_VARS:
        monkeypatch.delenv(name, raising=False)
