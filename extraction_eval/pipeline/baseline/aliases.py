"""Which mentions are the same entity: full names, surnames, short and legal org names.

The third layer of the baseline. Mentions are merged into entities keyed by their fullest
name: "Maria Gonzalez" then "Gonzalez", "Acme" for "Acme Corp", "Horizon Robotics" for
"Horizon Robotics Inc.", and "he/she" for the last person named. Full names are collected
before any alias is looked up, so a surname used before its full name still finds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from extraction_eval.pipeline.baseline.lexicon import ORG, ORG_SUFFIXES, PERSON
from extraction_eval.pipeline.baseline.mentions import Mention


@dataclass
class ResolvedEntity:
    """An entity: its canonical name and type, and where it is first named (for evidence)."""

    name: str
    type: str | None
    start: int
    end: int
    sentence: int


def resolve_entities(mentions: list[Mention]) -> dict[str, ResolvedEntity]:
    """Merge mentions into entities: full names first, then surnames / short org names."""
    entities: dict[str, ResolvedEntity] = {}
    for m in mentions:
        if m.pronoun or m.type is None or (len(m.text.split()) < 2 and m.type == PERSON):
            continue
        if m.key not in entities:
            entities[m.key] = ResolvedEntity(m.key, m.type, m.start, m.end, m.sentence)
    for name in list(entities):  # "Horizon Robotics" and "Horizon Robotics Inc." are one
        if _legal_name_alias(name, entities) is not None:
            del entities[name]
    last_person: Mention | None = None
    for m in mentions:
        if m.pronoun:
            if last_person is not None:
                m.key = last_person.key
            else:
                m.type = None
            continue
        if m.key in entities:
            m.type = entities[m.key].type
        else:
            alias = _short_name_alias(m.text, entities) or _legal_name_alias(m.text, entities)
            if alias is not None:
                m.key, m.type = alias.name, alias.type
            elif m.type is not None:
                entities[m.key] = ResolvedEntity(m.key, m.type, m.start, m.end, m.sentence)
        if m.type == PERSON:
            last_person = m
    return entities


def _short_name_alias(name: str, entities: dict[str, ResolvedEntity]) -> ResolvedEntity | None:
    """'Gonzalez' or 'Maria' for a known 'Maria Gonzalez'; 'Acme' for a known 'Acme Corp'."""
    tokens = name.split()
    if len(tokens) != 1:
        return None
    for info in entities.values():
        parts = info.name.split()
        if len(parts) < 2:
            continue
        if info.type == PERSON and name in (parts[-1], parts[0]):
            return info
        if info.type == ORG and name == parts[0]:
            return info
    return None


def _legal_name_alias(name: str, entities: dict[str, ResolvedEntity]) -> ResolvedEntity | None:
    """'Horizon Robotics' for 'Horizon Robotics Inc.': the same name without legal suffixes."""
    for info in entities.values():
        if info.type != ORG or not info.name.startswith(name + " "):
            continue
        rest = info.name[len(name) :].split()
        if rest and all(word.strip(",") in ORG_SUFFIXES for word in rest):
            return info
    return None
