"""Properties of the offset protocols (hypothesis): a prediction equal to gold scores 1 in
every protocol; naming a relationship's endpoint by another mention of its own cluster keeps
the DocRED figures, naming it by another cluster's mention lowers them."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extraction_eval.evaluators.protocols import PROTOCOLS, ProtocolDocument, score_protocols
from extraction_eval.types import Entity, Extraction, Mention, Relationship

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WORDS = ["Ann", "Bob", "Acme", "Paris", "Oslo", "ann", "Rome", "it", "Corp"]


@st.composite
def documents(draw: st.DrawFn) -> ProtocolDocument:
    """A text of sentences, entities over its words (some with several mentions, some
    overlapping), relationships by index with whole-sentence evidence."""
    sentences = draw(
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=4)
    )
    text, words, bounds = "", [], []
    for sentence in sentences:
        start = len(text)
        for w in sentence:
            words.append((len(text), len(text) + len(w)))
            text += w + " "
        text = text[:-1] + ". "
        bounds.append({"start": start, "end": len(text) - 1})
    n = draw(st.integers(min_value=0, max_value=min(6, len(words))))
    entities = []
    for _ in range(n):
        picks = draw(st.lists(st.integers(0, len(words) - 1), min_size=1, max_size=3, unique=True))
        wide = draw(st.booleans())
        mentions = []
        for i in picks:
            s, e = words[i][0], words[min(i + 1, len(words) - 1)][1] if wide else words[i][1]
            mentions.append(Mention(name=text[s:e], start=s, end=e))
        first = mentions[0]
        entities.append(
            Entity(
                name=first.name,
                type=draw(st.sampled_from(["PER", "LOC"])),
                start=first.start,
                end=first.end,
                mentions=mentions,
            )
        )
    relationships: list[Relationship] = []
    if entities:
        for _ in range(draw(st.integers(0, 4))):
            h, t = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            k = draw(st.integers(0, len(bounds) - 1))
            kind = draw(st.sampled_from(["in", "knows"]))
            if any((r.head, r.tail, r.type) == (h, t, kind) for r in relationships):
                continue  # a fact is stated once (DocRED's data never repeats one)
            relationships.append(
                Relationship(
                    source=entities[h].name,
                    target=entities[t].name,
                    type=kind,
                    head=h,
                    tail=t,
                    evidence=text[bounds[k]["start"] : bounds[k]["end"]],
                )
            )
    gold = Extraction(entities=entities, relationships=relationships)
    return ProtocolDocument("d", text, gold, gold, {"sentences": bounds})


def _figures(blocks: dict[str, Any]) -> dict[str, float]:
    out = {
        f"semeval.{m}.f1": blocks["semeval"][m]["f1"]
        for m in ("strict", "exact", "partial", "ent_type")
    }
    out["re_strict.f1"] = blocks["re_strict"]["f1"]
    out["re_boundaries.f1"] = blocks["re_boundaries"]["f1"]
    out["docred.f1"] = blocks["docred"]["f1"]
    out["docred.evidence_f1"] = blocks["docred"]["evidence_f1"]
    return out


@FAST
@given(st.lists(documents(), min_size=1, max_size=4))
def test_prediction_equal_to_gold_scores_one_everywhere(docs: list[ProtocolDocument]) -> None:
    docs = [
        ProtocolDocument(f"d{i}", d.text, d.gold, d.pred, d.metadata) for i, d in enumerate(docs)
    ]
    result = score_protocols(PROTOCOLS, docs, train=[])
    assert set(_figures(result.blocks).values()) == {1.0}
    assert result.blocks["docred"]["ign_f1"] == 1.0
    assert result.warnings == []


def _key(name: str) -> str:
    return " ".join(name.casefold().split())


def _owners(gold: Extraction) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for i, e in enumerate(gold.entities):
        for name in [e.name, *(m.name for m in e.mentions)]:
            out.setdefault(_key(name), set()).add(i)
    return out


@FAST
@given(documents(), st.data())
def test_renaming_an_endpoint_by_a_mention(doc: ProtocolDocument, data: st.DataObject) -> None:
    gold = doc.gold
    owners = _owners(gold)
    unique = {
        i: [m.name for m in e.mentions if owners[_key(m.name)] == {i}]
        for i, e in enumerate(gold.entities)
    }
    usable = [r for r in gold.relationships if unique[r.head] and unique[r.tail]]
    if not usable:
        return
    named = [
        Relationship(
            source=data.draw(st.sampled_from(unique[r.head])),
            target=data.draw(st.sampled_from(unique[r.tail])),
            type=r.type,
            evidence=r.evidence,
        )
        for r in usable
    ]
    base = [
        Relationship(
            source=unique[r.head][0],
            target=unique[r.tail][0],
            type=r.type,
            evidence=r.evidence,
        )
        for r in usable
    ]

    def f1(rels: list[Relationship]) -> float:
        pred = Extraction(relationships=rels)
        docs = [ProtocolDocument(doc.item_id, doc.text, gold, pred, doc.metadata)]
        return float(score_protocols(["docred"], docs).blocks["docred"]["f1"])

    assert f1(named) == f1(base)  # its own mention: never lower (here: equal)
    first = usable[0]
    others = [n for i, names in unique.items() if i != first.head for n in names]
    if not others:
        return
    wrong = Relationship(
        source=data.draw(st.sampled_from(others)),
        target=named[0].target,
        type=first.type,
        evidence=first.evidence,
    )
    facts = {(r.head, r.tail, r.type) for r in gold.relationships}
    new_head = next(iter(owners[_key(wrong.source)]))
    if (new_head, first.tail, first.type) in facts:
        return  # renamed onto another gold fact: not a wrong fact
    assert f1([wrong, *named[1:]]) < f1(named)  # another entity's mention: always lower
