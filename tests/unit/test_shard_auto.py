"""``--shard auto``: the shard from the orchestrator's environment (Kubernetes Indexed Jobs,
Slurm job arrays, a GitHub Actions matrix passing its index and total through), refused in one
line when it is missing, inconsistent or out of range. Every orchestrator counts from 0 (or
from its array's MIN); our shards count from 1."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from extraction_eval.commands.common import error_line
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.partition import (
    Shard,
    parse_shard,
    resolve_shard,
    shard_from_env,
)


def test_a_kubernetes_indexed_job_pod_with_the_count_given() -> None:
    env = {"JOB_COMPLETION_INDEX": "0"}
    assert shard_from_env(env, count=4) == Shard(1, 4)
    assert parse_shard("auto", count=4, env={"JOB_COMPLETION_INDEX": "3"}) == Shard(4, 4)
    # the count may come from the pod's environment instead (the manifest sets it)
    assert shard_from_env({**env, "EXTRACTION_EVAL_SHARD_COUNT": "2"}) == Shard(1, 2)


def test_a_kubernetes_pod_without_a_count_is_told_where_to_give_it() -> None:
    with pytest.raises(InvalidValue) as info:
        shard_from_env({"JOB_COMPLETION_INDEX": "1"})
    assert info.value.field == "shard_count" and "--" not in str(info.value)
    assert "JOB_COMPLETION_INDEX" in str(info.value)
    assert error_line(info.value).startswith("--shard-count is needed with --shard auto")


def test_an_index_outside_the_count_is_refused() -> None:
    with pytest.raises(InvalidValue, match=r"gives shard 5 \(from 0: 4\) of 4"):
        shard_from_env({"JOB_COMPLETION_INDEX": "4"}, count=4)


def test_a_github_actions_matrix_passes_its_job_index_and_total() -> None:
    # env: EXTRACTION_EVAL_SHARD_INDEX: ${{ strategy.job-index }}, _COUNT: ${{ strategy.job-total }}
    env = {"EXTRACTION_EVAL_SHARD_INDEX": "2", "EXTRACTION_EVAL_SHARD_COUNT": "3"}
    assert shard_from_env(env) == Shard(3, 3)
    assert shard_from_env(env, count=3) == Shard(3, 3)
    with pytest.raises(InvalidValue) as info:
        shard_from_env(env, count=4)  # two counts that disagree: which shards exist?
    assert info.value.field == "shard_count" and "environment says 3" in str(info.value)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4"}, Shard(1, 4)),  # 0-3
        (  # --array=1-4: MIN is 1
            {"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4"},
            Shard(4, 4),
        ),
        (  # --array=0-15:4 -> tasks 0, 4, 8, 12
            {
                "SLURM_ARRAY_TASK_ID": "8",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "12",
                "SLURM_ARRAY_TASK_STEP": "4",
                "SLURM_ARRAY_TASK_COUNT": "4",
            },
            Shard(3, 4),
        ),
        (  # MIN/MAX only (no COUNT): 10-12 is three tasks
            {
                "SLURM_ARRAY_TASK_ID": "11",
                "SLURM_ARRAY_TASK_MIN": "10",
                "SLURM_ARRAY_TASK_MAX": "12",
            },
            Shard(2, 3),
        ),
    ],
)
def test_a_slurm_job_array_task(env: dict[str, str], expected: Shard) -> None:
    assert shard_from_env(env) == expected


def test_slurm_task_ids_that_are_no_array_position_are_refused() -> None:
    off_step = {
        "SLURM_ARRAY_TASK_ID": "5",
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_STEP": "4",
    }
    with pytest.raises(InvalidValue, match="multiple of STEP 4"):
        shard_from_env({**off_step, "SLURM_ARRAY_TASK_COUNT": "4"})
    # --array=1,3,7 has no single step: task 7 would be shard 7 of 3
    listed = {
        "SLURM_ARRAY_TASK_ID": "7",
        "SLURM_ARRAY_TASK_MIN": "1",
        "SLURM_ARRAY_TASK_COUNT": "3",
    }
    with pytest.raises(InvalidValue, match="of 3"):
        shard_from_env(listed)


def test_the_passthrough_wins_over_the_orchestrators_own_variables() -> None:
    env = {
        "EXTRACTION_EVAL_SHARD_INDEX": "0",
        "EXTRACTION_EVAL_SHARD_COUNT": "2",
        "JOB_COMPLETION_INDEX": "1",
        "SLURM_ARRAY_TASK_ID": "1",
    }
    assert shard_from_env(env) == Shard(1, 2)
    del env["EXTRACTION_EVAL_SHARD_INDEX"]
    assert shard_from_env(env) == Shard(2, 2)  # Kubernetes next (count from _COUNT)


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({}, "found no orchestrator's shard"),
        ({"JOB_COMPLETION_INDEX": "one"}, "must be a whole number"),
        ({"JOB_COMPLETION_INDEX": "-1"}, "must be at least 0"),
        ({"EXTRACTION_EVAL_SHARD_INDEX": "0", "EXTRACTION_EVAL_SHARD_COUNT": "0"}, "at least 1"),
    ],
)
def test_no_or_bad_orchestrator_variables_are_one_line(env: dict[str, str], problem: str) -> None:
    with pytest.raises(InvalidValue) as info:
        shard_from_env(env, count=None)
    assert info.value.field in ("shard", "shard_count") and problem in str(info.value)
    assert "\n" not in str(info.value)


def test_a_count_without_auto_is_refused() -> None:
    assert resolve_shard(None) is None
    assert resolve_shard("AUTO", count=2, env={"JOB_COMPLETION_INDEX": "1"}) == Shard(2, 2)
    for spec in (None, "1/2"):
        with pytest.raises(InvalidValue) as info:
            resolve_shard(spec, count=2)
        assert error_line(info.value) == "--shard-count is only read with --shard auto"


def test_run_experiment_shard_auto_in_a_kubernetes_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI end to end: the pod's index and --shard-count make shard 2/2 (its run record
    says so); a pod without a count is refused before anything runs."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.cli import _run_app

    for var in (
        "EXTRACTION_EVAL_SHARD_INDEX",
        "EXTRACTION_EVAL_SHARD_COUNT",
        "SLURM_ARRAY_TASK_ID",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    runner = CliRunner()
    result = runner.invoke(_run_app, ["--name", "k8s", "--backend", "local", "--shard", "auto"])
    assert result.exit_code == 2 and "--shard-count is needed" in result.stderr
    assert LocalStore().get_run("k8s") is None
    args = ["--name", "k8s", "--backend", "local", "--shard", "auto", "--shard-count", "2"]
    result = runner.invoke(_run_app, args)
    assert result.exit_code == 0, result.stderr
    run = LocalStore().get_run("k8s")
    assert run is not None and run.config["shard"] == {"index": 2, "count": 2}
