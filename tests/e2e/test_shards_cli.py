"""Sharded runs end to end: N processes (each its own store, via EXTRACTION_EVAL_HOME), one
``runs merge`` and one ``runs finalize`` give exactly a one-process run's scores; overlaps,
mismatched configs and missing shards are refused in one line, writing nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import InvalidValue, NotFoundError, UsageError
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.partition import Shard
from extraction_eval.experiments.run import run_experiment
from extraction_eval.experiments.shards import MissingItems, finalize_run, merge_runs
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import ItemResult

REPO = Path(__file__).resolve().parents[2]
DATASET = "extraction-eval"
NEIGHBOUR = "tests.support.pipelines:neighbour_entity"


def _cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "extraction_eval", *args],
        cwd=REPO,
        env={
            **os.environ,
            "EXTRACTION_EVAL_HOME": str(home),
            "PYTHONPATH": str(REPO),
            **(env or {}),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _run(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    return _done(_cli(home, *args, env=env))


def _item_view(r: ItemResult) -> dict[str, Any]:
    """Everything about an item's result that does not describe one invocation."""
    return {
        "output": r.output,
        "error": r.error,
        "error_kind": r.error_kind,
        "scores": sorted((s.name, repr(s.value), s.data_type, s.comment) for s in r.scores),
        "taxonomy": r.taxonomy,
    }


def _items(store: LocalStore, name: str) -> dict[str, dict[str, Any]]:
    run = store.get_run(name, DATASET)
    assert run is not None
    return {r.item_id: _item_view(r) for r in store.results(run.id)}


def _run_scores(store: LocalStore, name: str) -> list[tuple[str, str, str | None]]:
    run = store.get_run(name, DATASET)
    assert run is not None
    return sorted((s.name, repr(s.value), s.comment) for s in store.run_scores(run.id))


CASES = {
    "offline-baseline": [],
    # context_bleed across shards, and failed items
    "neighbour-with-failures": ["--pipeline", NEIGHBOUR],
}


@pytest.mark.parametrize("extra", CASES.values(), ids=CASES.keys())
def test_two_shard_processes_merge_into_exactly_the_one_process_run(
    tmp_path: Path, extra: list[str]
) -> None:
    env = {"E2E_FAIL": "sample-002,sample-017,sample-040"}
    base = ["run", "--name", "big", *extra]
    one, two, single = tmp_path / "one", tmp_path / "two", tmp_path / "single"
    procs = [  # the two shards really run at the same time, in two processes
        _cli(one, *base, "--shard", "1/2", env=env),
        _cli(two, *base, "--shard", "2/2", env=env),
        _cli(single, *base, env=env),
    ]
    for index, proc in enumerate(procs):
        code, _, err = _done(proc)
        assert code == 0, err
        if index < 2:  # a shard says its summary is the shard's
            assert f"shard {index + 1}/2 holds" in err and "this shard only" in " ".join(
                err.split()
            )
    a, b = LocalStore(one / "store.db"), LocalStore(two / "store.db")
    in_a, in_b = set(_items(a, "big")), set(_items(b, "big"))
    assert in_a and in_b and not in_a & in_b
    assert in_a == {i for i in _items(LocalStore(single / "store.db"), "big") if i in in_a}

    code, out, err = _run(one, "runs", "merge", "big", "--from", str(two / "store.db"))
    assert code == 0, err
    assert f"merged {len(in_b)} results of run 'big'" in out and "(shard 2/2)" in out
    merged_run = a.get_run("big", DATASET)
    assert merged_run is not None and merged_run.status == "merged"
    assert merged_run.config["shards"] == {"count": 2, "indices": [1, 2]}
    assert a.run_scores(merged_run.id) == []  # the shard's figures are gone until finalize

    code, out, err = _run(one, "runs", "finalize", "big")
    assert code == 0, err
    assert "48 of 48" in out

    reference = LocalStore(single / "store.db")
    assert _items(a, "big") == _items(reference, "big")  # every item score, taxonomy, output
    assert _run_scores(a, "big") == _run_scores(reference, "big")  # every run score
    final, ref = a.get_run("big", DATASET), reference.get_run("big", DATASET)
    assert final is not None and ref is not None and final.status == "finished"
    assert final.summary["values"] == ref.summary["values"]
    assert final.summary["report"] == ref.summary["report"]
    assert final.summary["errors"] == ref.summary["errors"] == (3 if extra else 0)
    if extra:  # the neighbour's entity is context_bleed, also when it sits in the other shard
        assert final.summary["report"]["taxonomy"]["context_bleed"] > 0

    # finalize gates like run-experiment does (3 of 48 failed in the second case)
    code, _, err = _run(one, "runs", "finalize", "big", "--fail-over", "error_rate=0.05")
    assert code == (1 if extra else 0), err
    assert ("threshold: error_rate=0.0625 is above 0.05" in err) == bool(extra)


def _shard_run(home: Path, shard: Shard | None, **kw: Any) -> LocalStore:
    store = LocalStore(home / "store.db")
    config = RunConfig(dataset=DATASET, name="r", shard=shard, limit=12, **kw)
    run_experiment(config, store=store)
    return store


def test_finalize_refuses_a_run_with_missing_items_naming_the_count(tmp_path: Path) -> None:
    store = _shard_run(tmp_path / "a", Shard(1, 2))
    have = len(store.result_ids(store.get_run("r", DATASET).id))  # type: ignore[union-attr]
    with pytest.raises(MissingItems) as info:
        finalize_run(store, "r")
    assert f"results for {have} of the 12 items" in str(info.value)
    assert f"{12 - have} missing" in str(info.value) and len(info.value.missing) == 12 - have
    assert store.get_run("r", DATASET).status == "finished"  # type: ignore[union-attr]

    code, _, err = _run(tmp_path / "a", "runs", "finalize", "r")
    assert code == 2 and err.count("\n") == 1 and f"{12 - have} missing" in err, err
    assert "--allow-missing" in err
    outcome = finalize_run(store, "r", allow_missing=True)
    assert outcome.summary.items == have and outcome.summary.missing == 12 - have
    assert any(f"{12 - have} missing" in w for w in outcome.warnings)


def test_merging_an_unfinished_shard_warns_and_finalize_counts_what_it_lacks(
    tmp_path: Path,
) -> None:
    _shard_run(tmp_path / "a", Shard(1, 2))
    half = _shard_run(tmp_path / "b", Shard(2, 2))
    run = half.get_run("r", DATASET)
    assert run is not None
    # as a shard killed mid-run leaves it: status running, its last two items never done
    half.update_run(run.id, status="running")
    lost = half.result_ids(run.id)[-2:]
    with half._tx(write=True) as conn:
        conn.executemany(
            "DELETE FROM results WHERE run_id = ? AND item_id = ?", [(run.id, i) for i in lost]
        )
    target = LocalStore(tmp_path / "t" / "store.db")
    report = merge_runs(target, "r", [tmp_path / "a" / "store.db", half.path])
    [warning] = report.warnings
    assert "is running, not finished" in warning and str(half.path) in warning
    assert report.items == 10
    with pytest.raises(MissingItems) as info:
        finalize_run(target, "r")
    assert "2 missing" in str(info.value) and sorted(info.value.missing) == sorted(lost)


def test_the_same_shard_twice_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    target = _shard_run(tmp_path / "a", Shard(1, 2))
    _shard_run(tmp_path / "b", Shard(1, 2))
    before = target.result_ids(target.get_run("r", DATASET).id)  # type: ignore[union-attr]
    with pytest.raises(UsageError, match=r"shard 1/2 of run 'r' is in both .* nothing merged"):
        merge_runs(target, "r", [tmp_path / "b" / "store.db"])
    run = target.get_run("r", DATASET)
    assert run is not None and target.result_ids(run.id) == before and "shards" not in run.config


def test_an_item_in_two_stores_is_refused(tmp_path: Path) -> None:
    _shard_run(tmp_path / "a", None)
    _shard_run(tmp_path / "b", None)
    target = LocalStore(tmp_path / "t" / "store.db")
    sources = [tmp_path / "a" / "store.db", tmp_path / "b" / "store.db"]
    with pytest.raises(UsageError, match=r"item 'sample-001' of run 'r' is in both .*overlapping"):
        merge_runs(target, "r", sources)
    assert target.get_run("r", DATASET) is None


def test_a_config_mismatch_is_refused_naming_what_differs(tmp_path: Path) -> None:
    _shard_run(tmp_path / "a", Shard(1, 2))
    _shard_run(tmp_path / "b", Shard(2, 2), pipeline=PipelineConfig(temperature=0.5))
    code, out, err = _run(
        tmp_path / "a", "runs", "merge", "r", "--from", str(tmp_path / "b" / "store.db")
    )
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "does not match" in err and "config pipeline, temperature differ" in err


def test_a_dataset_version_mismatch_is_refused(tmp_path: Path) -> None:
    _shard_run(tmp_path / "a", Shard(1, 2))
    other = LocalStore(tmp_path / "b" / "store.db")
    items = other.get_items(DATASET)
    other.upload_items(DATASET, [items[0].model_copy(update={"text": items[0].text + " Also."})])
    _shard_run(tmp_path / "b", Shard(2, 2))
    target = LocalStore(tmp_path / "a" / "store.db")
    with pytest.raises(UsageError) as info:
        merge_runs(target, "r", [tmp_path / "b" / "store.db"])
    assert "dataset version 2 vs 1" in str(info.value)
    assert "dataset_fingerprint" in str(info.value)


def test_a_merge_that_fails_midway_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _shard_run(tmp_path / "a", Shard(1, 2))
    _shard_run(tmp_path / "b", Shard(2, 2))
    target = LocalStore(tmp_path / "t" / "store.db")
    real = LocalStore.iter_results
    calls = {"n": 0}

    def breaks_on_the_second_store(self: LocalStore, run_id: int, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk went away")
        return real(self, run_id, **kw)

    monkeypatch.setattr(LocalStore, "iter_results", breaks_on_the_second_store)
    with pytest.raises(OSError):
        merge_runs(target, "r", [tmp_path / "a" / "store.db", tmp_path / "b" / "store.db"])
    assert target.get_run("r", DATASET) is None  # not even the first store's results
    monkeypatch.setattr(LocalStore, "iter_results", real)
    report = merge_runs(target, "r", [tmp_path / "a" / "store.db", tmp_path / "b" / "store.db"])
    assert report.created and report.items == 12 and report.shards == [1, 2]
    outcome = finalize_run(target, "r")
    assert outcome.summary.items == 12 and outcome.summary.missing == 0


def test_a_shard_cannot_resume_as_another_shard(tmp_path: Path) -> None:
    store = _shard_run(tmp_path / "a", Shard(1, 2))
    with pytest.raises(UsageError, match="shard differ"):
        run_experiment(
            RunConfig(dataset=DATASET, name="r", shard=Shard(2, 2), limit=12, resume=True),
            store=store,
        )


def test_shards_of_different_experiments_or_this_store_itself_are_refused(tmp_path: Path) -> None:
    a = _shard_run(tmp_path / "a", Shard(1, 2))
    b = _shard_run(tmp_path / "b", Shard(2, 2))
    for store, experiment in ((a, "aaaa000000000001"), (b, "bbbb000000000002")):
        run = store.get_run("r", DATASET)
        assert run is not None
        store.update_run(run.id, experiment_id=experiment)  # as if the SDK drew random ids
    with pytest.raises(UsageError, match="LangFuse experiment bbbb000000000002 vs aaaa"):
        merge_runs(a, "r", [b.path])
    with pytest.raises(UsageError, match="is this store"):
        merge_runs(a, "r", [a.path])
    with pytest.raises(UsageError, match="given twice"):
        merge_runs(LocalStore(tmp_path / "t" / "store.db"), "r", [b.path, b.path])
    with pytest.raises(NotFoundError, match=r"b/store\.db: no run named 'nope'"):
        merge_runs(a, "nope", [b.path])


def test_the_merge_hint_quotes_a_run_name_for_the_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from extraction_eval.cli import app

    for home, shard in (("a", Shard(1, 2)), ("b", Shard(2, 2))):
        store = LocalStore(tmp_path / home / "store.db")
        run_experiment(
            RunConfig(dataset=DATASET, name="nightly run", shard=shard, limit=4), store=store
        )
    monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / "a"))
    result = CliRunner().invoke(
        app, ["runs", "merge", "nightly run", "--from", str(tmp_path / "b" / "store.db")]
    )
    assert result.exit_code == 0, result.stderr
    assert "`extraction-eval runs finalize 'nightly run'`" in " ".join(result.stdout.split())


def test_merge_and_finalize_refuse_a_run_another_process_is_running(tmp_path: Path) -> None:
    """Before: both went ahead, and finalize marked the run finished under the running
    process (which then went on writing results the run-level scores never counted)."""
    store = _shard_run(tmp_path / "a", Shard(1, 2))
    _shard_run(tmp_path / "b", Shard(2, 2))
    run = store.get_run("r", DATASET)
    assert run is not None
    parent = os.getppid()  # alive, and not this process: as a `run --resume` in a terminal
    with store._tx(write=True) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO run_locks VALUES (?, 'other', ?, ?, NULL, 'earlier')",
            (run.id, parent, socket.gethostname()),
        )
    before = store.result_ids(run.id)
    with pytest.raises(InvalidValue, match=f"finalize 'r' now: it is being run by pid {parent}"):
        finalize_run(store, "r", allow_missing=True)
    with pytest.raises(InvalidValue, match=f"merge into 'r' now: it is being run by pid {parent}"):
        merge_runs(store, "r", [tmp_path / "b" / "store.db"])
    after = store.get_run("r", DATASET)
    assert after is not None and after.status == run.status and after.summary == run.summary
    assert store.result_ids(run.id) == before
    held = store.run_lock(run.id)
    assert held is not None and held.pid == parent  # still theirs
    code, _, err = _run(tmp_path / "a", "runs", "finalize", "r", "--allow-missing")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: --take-over-lock is needed to finalize 'r' now"), err

    report = merge_runs(store, "r", [tmp_path / "b" / "store.db"], take_over_lock=True)
    assert any(f"took over the lock of run 'r' left by pid {parent}" in w for w in report.warnings)
    assert report.items == 12 and store.run_lock(run.id) is None  # given back
    outcome = finalize_run(store, "r")
    assert outcome.summary.items == 12 and store.run_lock(run.id) is None
