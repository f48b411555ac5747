"""``judge calibrate``'s path against llama.cpp's real server (SmolLM2-135M-Instruct): a
handful of Re-DocRED-derived labelled pairs (``judge pairs``' builder on the shared gold),
read as ``--pairs`` reads them, judged by the server, summarised into κ.

What is checked is the path, not the judge (a 135M model is none): every pair comes back as
a verdict or a counted error (nothing lost), the κ printed is the κ its own per-pair rows
give, and the calibration is stored under the judge's identity (the endpoint and the
built-in prompt version). Run with scripts/test-servers.sh.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.datasets.pairs import read_pairs
from extraction_eval.judge.calibrate import calibrate, summarise
from extraction_eval.judge.model import ModelJudge
from extraction_eval.judge.pairs import build_pairs
from extraction_eval.judge.prompt import BUILTIN
from extraction_eval.llm.retry import RetryPolicy

pytestmark = pytest.mark.timeout(1800)
PER_LABEL = 3  # same and not-same pairs each: a handful, one or two calls


def _pairs_file(shared_data: Path, out: Path) -> int:
    """``PER_LABEL`` pairs of each label from the first document that has that many (one
    context: the pairs go to the server together)."""
    records, _ = read_gold(shared_data / "redocred_dev_first100.jsonl")
    for record in records:
        rows = build_pairs([record])
        same = [r for r in rows if r["same"]][:PER_LABEL]
        other = [r for r in rows if not r["same"]][:PER_LABEL]
        if len(same) == len(other) == PER_LABEL:
            out.write_text("".join(json.dumps(r) + "\n" for r in same + other), "utf-8")
            return len(same) + len(other)
    raise AssertionError("no Re-DocRED document has both kinds of pair")


def test_the_real_server_calibrates_on_redocred_pairs(
    llama_server: str, shared_data: Path, tmp_path: Path
) -> None:
    path = tmp_path / "pairs.jsonl"
    n = _pairs_file(shared_data, path)
    pairs, warnings = read_pairs(path)
    assert len(pairs) == n and warnings == []
    with LocalStore(seed=False) as store:
        judge = ModelJudge(
            "openai:smollm2",
            base_url=llama_server,
            cache=store.cache(),
            retry=RetryPolicy.immediate(max_attempts=1, timeout_s=600),
            timeout_s=600,
        )
        result, rows = calibrate(judge, pairs, resamples=200, seed=7, source=path.name)
        store.add_judge_calibration(result.judge, result.to_json())
        stored = store.latest_judge_calibration(judge.identity)
    # nothing lost: each pair a verdict, or an error that was counted
    assert len(rows) == n
    for row in rows:
        assert row["verdict"] in (True, False, None)
        assert (row["verdict"] is None) == ("error" in row), row
    errors = sum(r["verdict"] is None for r in rows)
    assert result.errors == errors == judge.stats.errors
    assert result.judged + result.errors == n
    assert 1 <= judge.stats.calls <= n
    # κ is the κ its own per-pair rows give (None only when undefined: one class, or none)
    again = summarise(
        result.judge, [r["same"] for r in rows], [r["verdict"] for r in rows], resamples=0, seed=7
    )
    assert again.kappa == result.kappa
    if result.kappa is not None:
        assert -1.0 <= result.kappa <= 1.0
    assert result.judge == judge.identity and BUILTIN.ref in result.judge
    assert "127.0.0.1" in result.judge
    assert stored is not None and stored["kappa"] == result.kappa
