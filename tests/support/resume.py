"""After a run of ``killed`` (30 items of the pipeline that logs each call to
``E2E_CALL_LOG``) was stopped part-way: ``--resume`` runs the rest, each item once."""

from __future__ import annotations

import subprocess
from pathlib import Path

from extraction_eval.backends.local import LocalStore

REPO = Path(__file__).resolve().parents[2]


def resume_runs_the_rest(
    tmp_path: Path, cmd: list[str], env: dict[str, str], *, name: str = "killed", total: int = 30
) -> None:
    """Part of the run was stored; ``cmd --resume`` stores every item once and calls the
    pipeline for none that was finished, nor twice for any."""
    store = LocalStore()
    run = store.get_run(name, "extraction-eval")
    assert run is not None
    done_before = {r.item_id for r in store.results(run.id)}
    assert 6 <= len(done_before) < total
    env["E2E_CALL_LOG"] = str(tmp_path / "resume.log")
    env["E2E_DELAY"] = "0"
    subprocess.run([*cmd, "--resume"], cwd=REPO, env=env, check=True, capture_output=True)
    results = store.results(run.id)
    assert len(results) == total and len({r.item_id for r in results}) == total
    resumed_calls = (tmp_path / "resume.log").read_text().split()
    assert not set(resumed_calls) & done_before  # finished items were not called again
    assert len(resumed_calls) == len(set(resumed_calls))
