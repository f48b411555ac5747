"""Gold scored against itself is perfect on the real corpora in ../shared/data.

The data is located through $EXTRACTION_EVAL_SHARED_DATA or next to the checkout; the package
never ships it, and the test is skipped when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from extraction_eval.analysis.score_files import score_files
from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.evaluators import MatchMode, ScoringConfig


def _shared_data() -> Path | None:
    env = os.environ.get("EXTRACTION_EVAL_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "data")
    return next((p for p in candidates if p.is_dir()), None)


DATA = _shared_data()
FILES = [
    "conll04_train.jsonl",
    "conll04_dev.jsonl",
    "conll04_test.jsonl",
    "conll04_negatives.jsonl",
    "redocred_dev_first100.jsonl",
]
PERFECT = ("precision", "recall", "f1")


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("match", ["fuzzy", "exact", "span"])
def test_gold_against_itself_is_perfect(name: str, match: MatchMode) -> None:
    if DATA is None or not (DATA / name).is_file():
        pytest.skip(f"shared data not found ({name}); set EXTRACTION_EVAL_SHARED_DATA")
    path = DATA / name
    gold, warnings = read_gold(path)
    assert warnings == []
    scored = score_files(path, path, ScoringConfig(match=match, resamples=200))
    r = scored.report
    assert r["items"] == len(gold) and r["warnings"] == [] and r["no_prediction"]["count"] == 0
    n_ent = sum(len(g.extraction.entities) for g in gold)
    n_rel = sum(len(g.extraction.relationships) for g in gold)
    for block, n in (("entities", n_ent), ("entities_typed", n_ent), ("relationships", n_rel)):
        assert (r[block]["tp"], r[block]["fp"], r[block]["fn"]) == (n, 0, 0)
        assert [r[block][k] for k in PERFECT] == [1.0, 1.0, 1.0]
    assert r["type_accuracy"] == r["relationship_accuracy"] == 1.0
    assert all(v in (None, 1.0) for k, v in r["macro"].items() if k != "evidence_coverage_rate")
    assert all(v == 0 for v in r["taxonomy"].values()), r["taxonomy"]
    for prefix in ("entity", "entity_typed", "relationship"):
        assert r["ci"][f"{prefix}_f1"] == {"low": 1.0, "high": 1.0}
    if match == "fuzzy":
        assert r["match_types"]["exact"] == n_rel
    # Every gold evidence quote (Re-DocRED's evidence sentences) is found in its text.
    assert r["evidence"]["grounded"] == r["evidence"]["with_evidence"]
    empty = sum(1 for g in gold if not g.extraction.entities and not g.extraction.relationships)
    assert r["negative_space"]["gold_empty_items"] == empty
    if empty:
        assert r["negative_space"]["zero_fp_pass_rate"] == 1.0
        assert r["negative_space"]["hallucination_count"] == 0


def test_negatives_and_redocred_have_what_the_tests_rely_on() -> None:
    if DATA is None:
        pytest.skip("shared data not found; set EXTRACTION_EVAL_SHARED_DATA")
    negatives, _ = read_gold(DATA / "conll04_negatives.jsonl")
    assert sum(1 for g in negatives if not g.extraction.entities) == 30
    redocred, _ = read_gold(DATA / "redocred_dev_first100.jsonl")
    with_evidence = [r for g in redocred for r in g.extraction.relationships if r.evidence]
    assert len(with_evidence) > 1000
    assert any(" … " in (r.evidence or "") for r in with_evidence)  # multi-sentence evidence


@pytest.mark.parametrize("name", ["conll04_test.jsonl", "redocred_dev_first100.jsonl"])
@pytest.mark.parametrize("match", ["exact", "casefold"])
def test_perturbed_counts_agree_with_multiset_intersection(name: str, match: str) -> None:
    """In exact/casefold modes a match is key equality, so the optimum is known in closed form:
    tp = sum over keys of min(#pred, #gold). Cross-checks the solver path on real data."""
    if DATA is None or not (DATA / name).is_file():
        pytest.skip(f"shared data not found ({name}); set EXTRACTION_EVAL_SHARED_DATA")
    from collections import Counter

    from extraction_eval.evaluators import aggregate, score_item
    from extraction_eval.evaluators.similarity import name_key
    from extraction_eval.types import Entity, Extraction

    mode: MatchMode = "exact" if match == "exact" else "casefold"
    cfg = ScoringConfig(match=mode, resamples=0)
    gold, _ = read_gold(DATA / name)
    items, expected_tp, expected_typed = [], 0, 0
    for n, g in enumerate(gold):
        ents = list(g.extraction.entities)
        pred = [
            e.model_copy(update={"name": e.name.lower()}) if i % 3 == 0 else e
            for i, e in enumerate(ents)
            if i % 5 != 4
        ]
        if ents:
            pred.append(ents[0])  # a duplicate
            pred.append(Entity(name=ents[-1].name, type="WRONG"))
        pred.append(Entity(name=f"spurious {n}", type="X"))

        def keys(es: list[Entity], typed: bool) -> Counter[tuple[str, str]]:
            return Counter((name_key(e.name, mode), e.type.casefold() if typed else "") for e in es)

        for typed in (False, True):
            kp, kg = keys(pred, typed), keys(ents, typed)
            overlap = sum(min(c, kg[k]) for k, c in kp.items())
            if typed:
                expected_typed += overlap
            else:
                expected_tp += overlap
        p = Extraction(entities=pred)
        items.append(score_item(item_id=g.id, text=g.text, gold=g.extraction, pred=p, config=cfg))
    r = aggregate(items, cfg)
    assert r["entities"]["tp"] == expected_tp
    assert r["entities_typed"]["tp"] == expected_typed
    assert expected_typed < expected_tp  # the WRONG-typed copies matched by name only
