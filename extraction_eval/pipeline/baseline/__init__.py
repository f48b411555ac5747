"""``offline:baseline`` — a deterministic pattern and gazetteer extractor, no model, no network.

It exists so the tool does something real on a fresh machine and so model runs have a floor
to beat. It reads only the input text (never gold), finds capitalised spans, dates and a few
dozen relation phrasings, and quotes its evidence verbatim. It is meant to be imperfect:
unknown names, pronouns beyond "he/she" and anything implicit are missed.

The baseline is four layers, each a module of this package:

- ``lexicon``: the word lists and gazetteers (names, places, cue words, date patterns);
- ``mentions``: sentence splitting and typed mentions (names, dates, he/she);
- ``relations``: the relation phrasings matched between mentions of one sentence;
- ``aliases``: merging mentions into entities (surnames, short org names, pronouns).

This module runs them in order and shapes the answer into the tool's ``Extraction``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.pipeline.baseline.aliases import resolve_entities
from extraction_eval.pipeline.baseline.lexicon import DATE, LOC, ORG, PERSON
from extraction_eval.pipeline.baseline.mentions import Mention, find_mentions, split_sentences
from extraction_eval.pipeline.baseline.relations import PATTERNS, find_relationships
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, Schema

__all__ = [
    "BASELINE_MODEL",
    "DATE",
    "LOC",
    "ORG",
    "PATTERNS",
    "PERSON",
    "BaselinePipeline",
    "Mention",
    "extract_baseline",
    "find_mentions",
    "find_relationships",
    "split_sentences",
]

BASELINE_MODEL = "offline:baseline"

# How a schema may spell our four types ("PER", "Peop", "GPE" ...): its spelling is used.
_TYPE_SYNONYMS = {
    PERSON: {"person", "per", "peop", "people", "human", "individual"},
    ORG: {"organization", "organisation", "org", "company", "institution"},
    LOC: {"location", "loc", "place", "gpe", "geo"},
    DATE: {"date", "time", "datetime", "temporal"},
}


def _schema_type(kind: str, schema: Schema | None) -> str | None:
    """Our label for ``kind``, or the schema's own spelling of it; None when not asked for."""
    if schema is None or not schema.entity_types:
        return kind
    for wanted in schema.entity_types:
        if wanted.lower() in _TYPE_SYNONYMS[kind]:
            return wanted
    return None


def extract_baseline(text: str, schema: Schema | None = None) -> Extraction:
    """The baseline's answer for one text.

    Aliases are resolved twice: first so relation patterns see each surname with its full
    name's type, then again so the types that relation patterns gave join in.
    """
    sentences = split_sentences(text)
    mentions = find_mentions(text, sentences)
    resolve_entities(mentions)
    relations = find_relationships(text, mentions, sentences)
    entities = resolve_entities(mentions)  # types learnt from relation patterns join in

    out_entities: list[Entity] = []
    emitted: dict[str, str] = {}
    for info in sorted(entities.values(), key=lambda e: e.start):
        if info.type is None:
            continue
        label = _schema_type(info.type, schema)
        if label is None:
            continue
        s, e = sentences[info.sentence]
        out_entities.append(
            Entity(
                name=info.name,
                type=label,
                evidence=text[s:e],
                start=info.start,
                end=info.end,
            )
        )
        emitted[info.name] = label

    allowed = set(schema.relationship_types) if schema and schema.relationship_types else None
    seen: set[tuple[str, str, str]] = set()
    out_relations: list[Relationship] = []
    for found in relations:
        rel, src, dst = found.rel, found.source, found.target
        if src.key not in emitted or dst.key not in emitted or src.key == dst.key:
            continue
        if allowed is not None and rel not in allowed:
            continue
        triple = (src.key, rel, dst.key)
        if triple in seen:
            continue
        seen.add(triple)
        s, e = sentences[found.sentence]
        out_relations.append(
            Relationship(source=src.key, type=rel, target=dst.key, evidence=text[s:e])
        )
    return Extraction(entities=out_entities, relationships=out_relations)


@dataclass
class BaselinePipeline:
    """Implements ``Pipeline`` with ``extract``; CPU-only and fast, so it runs inline."""

    config: PipelineConfig = field(default_factory=lambda: PipelineConfig(model=BASELINE_MODEL))

    async def extract(self, item: DatasetItem) -> PipelineOutput:
        return PipelineOutput(
            extraction=extract_baseline(item.text, item.schema_), model=BASELINE_MODEL
        )
