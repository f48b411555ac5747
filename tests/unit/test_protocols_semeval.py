"""The SemEval-2013 modes against nervaluate 1.x itself, on real CoNLL04 and Re-DocRED gold
with seeded perturbations (spans dropped, shifted or widened by one token, types flipped,
spurious spans added): every count, every ratio, overall and per type."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from nervaluate import Evaluator

from extraction_eval.datasets.jsonl import read_gold
from extraction_eval.evaluators.protocols import ProtocolDocument, score_protocols
from extraction_eval.types import Entity, Extraction

MODES = ("strict", "exact", "partial", "ent_type")
COUNTS = ("correct", "incorrect", "partial", "missed", "spurious", "possible", "actual")
RATIOS = ("precision", "recall", "f1")


def _tokens(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\w+|[^\w\s]", text)]


def _token_at(tokens: list[tuple[int, int]], offset: int) -> int:
    return next(i for i, (s, e) in enumerate(tokens) if s <= offset < e)


def _perturb(text: str, spans: list[tuple[str, int, int]], rng: random.Random, labels: list[str]):
    """A prediction from gold spans: 10 % dropped, 10 % shifted by one token, 10 % widened by
    one token, 10 % of another type, and one spurious token span in 20 % of documents."""
    tokens = _tokens(text)
    out = []
    for label, start, end in spans:
        roll = rng.random()
        if roll < 0.1:
            continue
        try:
            first, last = _token_at(tokens, start), _token_at(tokens, end - 1)
        except StopIteration:
            out.append((label, start, end))
            continue
        if roll < 0.2:
            step = rng.choice((-1, 1))
            if first + step >= 0 and last + step < len(tokens):
                start, end = tokens[first + step][0], tokens[last + step][1]
        elif roll < 0.3 and last + 1 < len(tokens):
            end = tokens[last + 1][1]
        elif roll < 0.4:
            label = rng.choice([x for x in labels if x != label] or [label])
        out.append((label, start, end))
    if tokens and rng.random() < 0.2:
        s, e = tokens[rng.randrange(len(tokens))]
        out.insert(rng.randrange(len(out) + 1), (rng.choice(labels), s, e))
    return out


def _spans(entity_list: list[Entity]) -> list[tuple[str, int, int]]:
    out = []
    for e in entity_list:
        mentions = [(m.start, m.end) for m in e.mentions if m.start is not None]
        for start, end in mentions or [(e.start, e.end)]:
            assert start is not None and end is not None
            out.append((e.type, start, end))
    return out


def _as_entities(spans: list[tuple[str, int, int]], text: str) -> list[Entity]:
    return [Entity(name=text[s:e], type=t, start=s, end=e) for t, s, e in spans]


def _nervaluate(true: list[list[Any]], pred: list[list[Any]], tags: list[str]) -> dict[str, Any]:
    def docs(rows: list[list[Any]]) -> list[list[dict[str, Any]]]:
        return [[{"label": t, "start": s, "end": e - 1} for t, s, e in doc] for doc in rows]

    return Evaluator(docs(true), docs(pred), tags=tags, loader="dict").evaluate()


def _check(ours: dict[str, Any], theirs: Any) -> None:
    for name in COUNTS:
        assert ours[name] == getattr(theirs, name), name
    for name in RATIOS:
        assert ours[name] == pytest.approx(getattr(theirs, name), abs=1e-12), name


@pytest.mark.parametrize(
    ("name", "seed"),
    [("conll04_test.jsonl", 1), ("conll04_test.jsonl", 2), ("redocred_dev_first100.jsonl", 3)],
)
def test_modes_equal_nervaluate(shared_data: Path, name: str, seed: int) -> None:
    gold, warnings = read_gold(shared_data / name)
    assert gold and not warnings
    rng = random.Random(seed)
    labels = sorted({e.type for g in gold for e in g.extraction.entities})
    true, pred, docs = [], [], []
    for g in gold:
        spans = _spans(g.extraction.entities)
        predicted = _perturb(g.text, spans, rng, labels)
        true.append(spans)
        pred.append(predicted)
        # one entity per span: the perturbation works on mentions, as nervaluate sees them
        gold_x = Extraction(entities=_as_entities(spans, g.text))
        pred_x = Extraction(entities=_as_entities(predicted, g.text))
        docs.append(ProtocolDocument(g.id, g.text, gold_x, pred_x))
    theirs = _nervaluate(true, pred, labels)
    ours = score_protocols(["semeval"], docs).blocks["semeval"]
    for mode in MODES:
        _check(ours[mode], theirs["overall"][mode])
        assert set(ours[mode]["per_type"]) == set(theirs["entities"])
        for label, by_mode in theirs["entities"].items():
            _check(ours[mode]["per_type"][label], by_mode[mode])
    # the perturbation reaches every outcome, so no branch goes untested
    for field in ("incorrect", "missed", "spurious"):
        assert ours["strict"][field] > 0, field
    assert ours["partial"]["partial"] > 0
    assert ours["strict"]["f1"] < ours["ent_type"]["f1"] < 1.0


def test_overlap_order_follows_nervaluate() -> None:
    """A prediction overlapping two gold spans is counted against the first in list order
    (strict), the closest of its type (ent_type); the other gold span is then missed."""
    text = "Anna Maria Smith met Bob"
    gold = [("PER", 0, 10), ("PER", 5, 16), ("PER", 21, 24)]
    pred = [("PER", 5, 15), ("LOC", 21, 24)]
    docs = [
        ProtocolDocument(
            "d",
            text,
            Extraction(entities=_as_entities(gold, text)),
            Extraction(entities=_as_entities(pred, text)),
        )
    ]
    ours = score_protocols(["semeval"], docs).blocks["semeval"]
    theirs = _nervaluate([gold], [pred], ["PER", "LOC"])
    for mode in MODES:
        _check(ours[mode], theirs["overall"][mode])
    assert ours["ent_type"]["correct"] == 1 and ours["strict"]["incorrect"] == 2


def test_failed_item_counts_its_gold_missed_and_offsetless_entities_are_counted() -> None:
    text = "Ann met Bob"
    gold = Extraction(
        entities=[
            Entity(name="Ann", type="PER", start=0, end=3),
            Entity(name="Bob", type="PER"),  # no offsets: counted, not scored
        ]
    )
    pred = Extraction(entities=[Entity(name="Bob", type="PER")])
    result = score_protocols(
        ["semeval"],
        [ProtocolDocument("a", text, gold, None), ProtocolDocument("b", text, gold, pred)],
    )
    block = result.blocks["semeval"]
    assert block["strict"]["missed"] == 2 and block["strict"]["actual"] == 0
    assert block["strict"]["f1"] == 0.0
    assert block["without_offsets"] == {"gold": 2, "predicted": 1}
    assert any("without offsets" in w for w in result.warnings)


def test_ent_type_tie_goes_to_the_first_gold_span() -> None:
    """Two gold spans at the same boundary distance: the first in list order is taken, so a
    later exact prediction of it is spurious (as in nervaluate)."""
    text = "abcd  efgh  ijkl"
    gold = [("X", 0, 4), ("X", 6, 10)]
    pred = [("X", 2, 8), ("X", 0, 4)]
    docs = [
        ProtocolDocument(
            "d",
            text,
            Extraction(entities=_as_entities(gold, text)),
            Extraction(entities=_as_entities(pred, text)),
        )
    ]
    ours = score_protocols(["semeval"], docs).blocks["semeval"]
    theirs = _nervaluate([gold], [pred], ["X"])
    _check(ours["ent_type"], theirs["overall"]["ent_type"])
    assert ours["ent_type"]["spurious"] == 1
