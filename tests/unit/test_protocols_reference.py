"""``re_strict`` / ``re_boundaries`` and ``docred`` against small reference implementations
written here from the definitions (Taillé et al., EMNLP 2020, section 3; thunlp/DocRED's
``evaluation.py``), on the raw JSON of the real corpora with seeded perturbations. The
references read the raw lines (``json.loads``), not this package's types."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.datasets.jsonl import parse_extraction
from extraction_eval.evaluators.protocols import ProtocolDocument, score_protocols


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


# --- Taillé et al.: a relation is correct when its type and both arguments are -------------


def _reference_re(gold: list[dict[str, Any]], pred: list[dict[str, Any]], strict: bool) -> dict:
    """Micro P/R/F1 over documents; per document the relations are sets of
    (argument, type, argument), an argument being its boundaries (and type when strict)."""

    def relations(doc: dict[str, Any]) -> set[tuple[Any, ...]]:
        out = set()
        for rel in doc["relationships"]:
            args = []
            for end in (doc["entities"][rel["head"]], doc["entities"][rel["tail"]]):
                args.append((end["start"], end["end"], end["type"] if strict else None))
            out.add((args[0], rel["type"], args[1]))
        return out

    tp = fp = fn = 0
    for g, p in zip(gold, pred, strict=True):
        gs, ps = relations(g), relations(p)
        tp, fp, fn = tp + len(gs & ps), fp + len(ps - gs), fn + len(gs - ps)
    precision = tp / (tp + fp)
    recall = tp / (tp + fn)
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall),
    }


def _perturb_re(
    doc: dict[str, Any], rng: random.Random, rel_types: list[str], ent_types: list[str]
):
    """Entities: 10 % another type, 10 % end moved one character. Relations: 10 % dropped,
    10 % another type, one spurious pair in 20 % of documents."""
    out = copy.deepcopy(doc)
    for e in out["entities"]:
        roll = rng.random()
        if roll < 0.1:
            e["type"] = rng.choice([t for t in ent_types if t != e["type"]])
        elif roll < 0.2 and e["end"] < len(doc["text"]):
            e["end"] += 1
    rels = []
    for r in out["relationships"]:
        roll = rng.random()
        if roll < 0.1:
            continue
        if roll < 0.2:
            r["type"] = rng.choice([t for t in rel_types if t != r["type"]])
        rels.append(r)
    n = len(out["entities"])
    if n >= 2 and rng.random() < 0.2:
        h, t = rng.sample(range(n), 2)
        rels.append(
            {
                "source": out["entities"][h]["name"],
                "target": out["entities"][t]["name"],
                "type": rng.choice(rel_types),
                "head": h,
                "tail": t,
            }
        )
    out["relationships"] = rels
    return out


def _doc(obj: dict[str, Any], pred: dict[str, Any] | None) -> ProtocolDocument:
    return ProtocolDocument(
        str(obj["id"]),
        obj["text"],
        parse_extraction(obj),
        None if pred is None else parse_extraction(pred),
        obj.get("meta", {}),
    )


@pytest.mark.parametrize("seed", [5, 6])
def test_re_strict_and_boundaries_equal_the_reference(shared_data: Path, seed: int) -> None:
    gold = _raw(shared_data / "conll04_test.jsonl")
    rng = random.Random(seed)
    rel_types = sorted({r["type"] for d in gold for r in d["relationships"]})
    ent_types = sorted({e["type"] for d in gold for e in d["entities"]})
    pred = [_perturb_re(d, rng, rel_types, ent_types) for d in gold]
    blocks = score_protocols(["re"], [_doc(g, p) for g, p in zip(gold, pred, strict=True)]).blocks
    for name, strict in (("re_strict", True), ("re_boundaries", False)):
        expected = _reference_re(gold, pred, strict)
        got = {k: blocks[name][k] for k in expected}
        assert got == pytest.approx(expected, abs=1e-12), name
    assert blocks["re_strict"]["f1"] < blocks["re_boundaries"]["f1"] < 1.0


# --- thunlp/DocRED evaluation.py ------------------------------------------------------------


def _vertex_set(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """DocRED's vertexSet: per entity its mentions (a CoNLL04 entity is its one mention)."""
    return [e.get("mentions") or [{"name": e["name"]}] for e in doc["entities"]]


def _labels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "h": r["head"],
            "t": r["tail"],
            "r": r["type"],
            "evidence": sorted({ev["sent_id"] for ev in r.get("evidence") or []}),
        }
        for r in doc["relationships"]
    ]


def _train_facts(train: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    facts = set()
    for doc in train:
        vertex = _vertex_set(doc)
        for label in _labels(doc):
            for n1 in vertex[label["h"]]:
                for n2 in vertex[label["t"]]:
                    facts.add((n1["name"], n2["name"], label["r"]))
    return facts


def _official(submission: list[dict[str, Any]], truth: list[dict[str, Any]], train: list | None):
    """thunlp/DocRED ``official_evaluate``: (re_p, re_r, re_f1, evi_f1, ign_f1)."""
    fact_in_train = _train_facts(train or [])
    std: dict[tuple[Any, ...], set[int]] = {}
    tot_evidences = 0
    title2vertex = {}
    for x in truth:
        title2vertex[x["id"]] = _vertex_set(x)
        for label in _labels(x):
            std[(x["id"], label["r"], label["h"], label["t"])] = set(label["evidence"])
            tot_evidences += len(label["evidence"])
    tot_relations = len(std)
    answers, seen = [], set()
    for x in submission:
        key = (x["title"], x["h_idx"], x["t_idx"], x["r"])
        if key not in seen:
            seen.add(key)
            answers.append(x)
    correct_re = correct_evidence = pred_evi = correct_in_train = 0
    for x in answers:
        title, h_idx, t_idx, r = x["title"], x["h_idx"], x["t_idx"], x["r"]
        vertex = title2vertex[title]
        evi = set(x.get("evidence", []))
        pred_evi += len(evi)
        if (title, r, h_idx, t_idx) in std:
            correct_re += 1
            correct_evidence += len(std[(title, r, h_idx, t_idx)] & evi)
            if any(
                (n1["name"], n2["name"], r) in fact_in_train
                for n1 in vertex[h_idx]
                for n2 in vertex[t_idx]
            ):
                correct_in_train += 1
    re_p = correct_re / len(answers)
    re_r = correct_re / tot_relations
    re_f1 = 2 * re_p * re_r / (re_p + re_r) if re_p + re_r else 0.0
    evi_f1 = None
    if tot_evidences:
        evi_p = correct_evidence / pred_evi if pred_evi > 0 else 0
        evi_r = correct_evidence / tot_evidences
        evi_f1 = 2 * evi_p * evi_r / (evi_p + evi_r) if evi_p + evi_r else 0.0
    ign_p = (correct_re - correct_in_train) / (len(answers) - correct_in_train)
    ign_f1 = 2 * ign_p * re_r / (ign_p + re_r) if ign_p + re_r else 0.0
    return re_p, re_r, re_f1, evi_f1, ign_f1


def _unique_name(doc: dict[str, Any], index: int) -> str | None:
    """A surface form of entity ``index`` that no other entity of the document has."""

    def key(s: str) -> str:
        return " ".join(s.casefold().split())

    others = {key(m["name"]) for i, v in enumerate(_vertex_set(doc)) if i != index for m in v}
    others |= {key(e["name"]) for i, e in enumerate(doc["entities"]) if i != index}
    return next((m["name"] for m in _vertex_set(doc)[index] if key(m["name"]) not in others), None)


def _submission(doc: dict[str, Any], rng: random.Random, rel_types: list[str], by_name: bool):
    """Facts of one document as a model would submit them (10 % dropped, 10 % another
    relation, 5 % head and tail swapped, 20 % evidence changed, a spurious fact in 20 %) in
    both spellings: the reference's indices and the prediction line."""
    sentences = doc.get("meta", {}).get("sentences") or []
    facts = []
    for label in _labels(doc):
        roll = rng.random()
        if roll < 0.1:
            continue
        h, t, r, evi = label["h"], label["t"], label["r"], list(label["evidence"])
        if roll < 0.2:
            r = rng.choice([x for x in rel_types if x != r])
        elif roll < 0.25:
            h, t = t, h
        if sentences and rng.random() < 0.2:
            evi = evi[1:] if evi and rng.random() < 0.5 else [*evi, rng.randrange(len(sentences))]
        facts.append((h, t, r, sorted(set(evi))))
    n = len(doc["entities"])
    if n >= 2 and rng.random() < 0.2:
        h, t = rng.sample(range(n), 2)
        facts.append((h, t, rng.choice(rel_types), []))
    reference, relationships = [], []
    for h, t, r, evi in facts:
        quote = " … ".join(doc["text"][sentences[i]["start"] : sentences[i]["end"]] for i in evi)
        rel: dict[str, Any] = {"type": r, "evidence": quote or None}
        if by_name:
            source, target = _unique_name(doc, h), _unique_name(doc, t)
            if source is None or target is None:
                continue  # the name would be ambiguous: not a fact this test submits
            rel.update(source=source, target=target)
        else:
            rel.update(
                source=doc["entities"][h]["name"], target=doc["entities"][t]["name"], head=h, tail=t
            )
        relationships.append(rel)
        reference.append({"title": doc["id"], "h_idx": h, "t_idx": t, "r": r, "evidence": evi})
    pred = {
        "id": doc["id"],
        "relationships": relationships,
        "entities": [] if by_name else doc["entities"],
    }
    return reference, pred


def _repeats_a_sentence(doc: dict[str, Any]) -> bool:
    sentences = [
        doc["text"][s["start"] : s["end"]] for s in doc.get("meta", {}).get("sentences", [])
    ]
    return len(set(sentences)) != len(sentences)


@pytest.mark.parametrize(
    ("name", "train_name", "by_name"),
    [
        ("conll04_test.jsonl", "conll04_train.jsonl", True),
        ("redocred_dev.jsonl", "redocred_dev_first100.jsonl", True),
        ("redocred_dev_first100.jsonl", "conll04_train.jsonl", False),
    ],
)
def test_docred_equals_the_official_evaluation(
    shared_data: Path, name: str, train_name: str, by_name: bool
) -> None:
    # a sentence the text repeats cannot be told apart by its quote (evidence is quoted)
    truth = [d for d in _raw(shared_data / name) if not _repeats_a_sentence(d)]
    train = _raw(shared_data / train_name)
    rng = random.Random(7)
    rel_types = sorted({r["type"] for d in truth for r in d["relationships"]})
    submission, docs = [], []
    for doc in truth:
        ref, pred = _submission(doc, rng, rel_types, by_name)
        submission += ref
        docs.append(_doc(doc, pred))
    re_p, re_r, re_f1, evi_f1, ign_f1 = _official(submission, truth, train)
    result = score_protocols(["docred"], docs, train=[parse_extraction(d) for d in train])
    block = result.blocks["docred"]
    assert block["precision"] == pytest.approx(re_p, abs=1e-12)
    assert block["recall"] == pytest.approx(re_r, abs=1e-12)
    assert block["f1"] == pytest.approx(re_f1, abs=1e-12)
    assert block["ign_f1"] == pytest.approx(ign_f1, abs=1e-12)
    if evi_f1 is None:
        assert block["evidence_f1"] is None
    else:
        assert block["evidence_f1"] == pytest.approx(evi_f1, abs=1e-12)
    assert block["ambiguous"] == block["unresolved"] == 0
    assert 0 < block["f1"] < 1.0
    if "redocred" in train_name:
        assert 0 < block["in_train"] < block["correct"] and block["ign_f1"] < block["f1"]


def test_docred_ambiguous_name_is_counted_not_guessed() -> None:
    gold = {
        "id": "d",
        "text": "Paris met Paris in Rome.",
        "entities": [
            {"name": "Paris", "type": "PER", "start": 0, "end": 5},
            {"name": "Paris", "type": "LOC", "start": 10, "end": 15},
            {"name": "Rome", "type": "LOC", "start": 19, "end": 23},
        ],
        "relationships": [
            {"source": "Paris", "target": "Rome", "type": "in", "head": 0, "tail": 2}
        ],
    }
    pred = {"relationships": [{"source": "paris", "target": "Rome", "type": "in"}]}
    result = score_protocols(["docred"], [_doc(gold, pred)])
    block = result.blocks["docred"]
    assert block["ambiguous"] == 1 and block["correct"] == 0 and block["submitted"] == 1
    assert any("ambiguous" in w for w in result.warnings)
