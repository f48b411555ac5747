"""Bootstrap CIs of the protocol figures: the per-document rows sum to the reported counts
(so the bootstrap resamples exactly the figures reported), each interval holds its point
value, and without resamples there is none."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.evaluators.protocols import PROTOCOLS, ProtocolDocument, ProtocolScorer
from extraction_eval.types import Extraction


def _documents(path: Path, seed: int) -> list[ProtocolDocument]:
    """Gold with a seeded third of each document's entities and relationships dropped, and
    every tenth item failed."""
    gold, _ = read_gold(path)
    rng = random.Random(seed)
    docs = []
    for n, g in enumerate(gold):
        ents = [e for e in g.extraction.entities if rng.random() > 0.3]
        keep = {id(e) for e in ents}
        rels = [
            r
            for r in g.extraction.relationships
            if r.head is not None
            and r.tail is not None
            and id(g.extraction.entities[r.head]) in keep
            and id(g.extraction.entities[r.tail]) in keep
            and rng.random() > 0.3
        ]
        # indices must point into the kept list
        index = {id(e): i for i, e in enumerate(ents)}
        rels = [
            r.model_copy(
                update={
                    "head": index[id(g.extraction.entities[r.head])],  # type: ignore[index]
                    "tail": index[id(g.extraction.entities[r.tail])],  # type: ignore[index]
                }
            )
            for r in rels
        ]
        pred = None if n % 10 == 0 else Extraction(entities=ents, relationships=rels)
        docs.append(ProtocolDocument(g.id, g.text, g.extraction, pred, g.metadata or {}))
    return docs


def test_rows_sum_to_the_figures_and_intervals_hold_them(shared_data: Path) -> None:
    scorer = ProtocolScorer(PROTOCOLS)
    for doc in _documents(shared_data / "redocred_dev_first100.jsonl", 11):
        scorer.add(doc)
    rows = {k: np.frombuffer(v, dtype=np.int64).reshape(-1, 3) for k, v in scorer.rows.rows.items()}
    assert all(r.shape == (100, 3) for r in rows.values())
    result = scorer.result(resamples=500, seed=1)
    blocks = result.blocks
    for mode in ("strict", "exact", "ent_type"):
        block = blocks["semeval"][mode]
        tp, fp, fn = rows[f"semeval.{mode}"].sum(axis=0)
        assert (tp, tp + fp, tp + fn) == (block["correct"], block["actual"], block["possible"])
    partial = blocks["semeval"]["partial"]
    tp, fp, fn = rows["semeval.partial"].sum(axis=0)
    assert tp == 2 * partial["correct"] + partial["partial"] and tp + fp == 2 * partial["actual"]
    for name in ("re_strict", "re_boundaries"):
        assert tuple(rows[name].sum(axis=0)) == tuple(blocks[name][k] for k in ("tp", "fp", "fn"))
    docred = blocks["docred"]
    tp, fp, fn = rows["docred"].sum(axis=0)
    assert (tp, tp + fp, tp + fn) == (docred["correct"], docred["submitted"], docred["gold"])
    for block in [
        *(blocks["semeval"][m] for m in ("strict", "exact", "partial", "ent_type")),
        blocks["re_strict"],
        blocks["re_boundaries"],
        docred,
    ]:
        for metric in ("precision", "recall", "f1"):
            ci = block["ci"][metric]
            assert ci["low"] <= block[metric] <= ci["high"], metric
            if metric != "precision":  # predictions are a subset of gold: precision is 1
                assert ci["low"] < ci["high"], metric
    assert "ci" not in ProtocolScorer(["re"]).result().blocks["re_strict"]


def test_a_failed_item_never_earns_the_both_empty_one_in_a_resample() -> None:
    docs = [ProtocolDocument("a", "x", Extraction(), None)]
    scorer = ProtocolScorer(["re"])
    for doc in docs:
        scorer.add(doc)
    block = scorer.result(resamples=50, seed=2).blocks["re_strict"]
    assert block["f1"] == 0.0 and block["ci"]["f1"] == {"low": 0.0, "high": 0.0}
    assert pytest.approx(0.0) == block["ci"]["precision"]["high"]
