"""Gold entities as clusters of surface forms: the entity's name, its mentions (Re-DocRED lists
every one), its aliases, and the alias-table groups any of those belong to.

A prediction that names an entity by any of its forms names that entity, so a model that
writes "Schneider" for gold's "Wilfried \"Willi\" Schneider" is right. The matcher compares a
prediction with every form of a gold entity and keeps the best; which form matched is kept on
the pair (``surface``: 0 is the gold's own name), so every view can say how many matches came
through a mention or alias and which one. Span mode compares evidence quotes, not names, and
is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from extraction_eval.evaluators.config import (
    MatchMode,
    ScoringConfig,
    alias_index,
    merge_alias_groups,
    type_key,
)
from extraction_eval.evaluators.similarity import name_key
from extraction_eval.types import Entity, Relationship, Schema

__all__ = [
    "Clusters",
    "alias_lookup",
    "entity_forms",
    "gold_clusters",
]


def entity_forms(
    entity: Entity, config: ScoringConfig, extra: dict[str, tuple[str, ...]] | None = None
) -> tuple[str, ...]:
    """The entity's surface forms, its own name first, each distinct under the match mode's
    key; ``extra`` is an item schema's alias index (name key -> group)."""
    mode: MatchMode = "casefold" if config.match == "span" else config.match
    forms = [entity.name]
    if config.aliases and config.match != "span":
        forms.extend(m.name for m in entity.mentions)
        forms.extend(entity.aliases)
        for name in list(forms):
            forms.extend(config.aliases_of(name))
            if extra:
                forms.extend(extra.get(type_key(name), ()))
    seen: set[str] = set()
    out: list[str] = []
    for name in forms:
        k = name_key(name, mode)
        if (k and k not in seen) or not out:
            seen.add(k)
            out.append(name)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Clusters:
    """An item's gold entities as clusters: ``forms[j]`` are gold entity j's surface forms.

    ``entity_of(name, index)`` resolves a gold relationship's endpoint to its entity (the
    ``head``/``tail`` index when it is valid, else the entity whose name, then whose one form,
    is that name), so its endpoints compare with the entity's forms too."""

    forms: tuple[tuple[str, ...], ...]
    mode: MatchMode

    @property
    def any_alias(self) -> bool:
        return any(len(f) > 1 for f in self.forms)

    def endpoint_forms(self, name: str, index: int | None) -> tuple[str, ...]:
        """The forms a gold relationship endpoint ``name`` may be written as, ``name`` first."""
        j = self._entity_of(name, index)
        if j is None:
            return (name,)
        k = name_key(name, self.mode)
        return (name, *(f for f in self.forms[j] if name_key(f, self.mode) != k))

    def _entity_of(self, name: str, index: int | None) -> int | None:
        if index is not None and 0 <= index < len(self.forms):
            return index
        k = name_key(name, self.mode)
        for j, forms in enumerate(self.forms):
            if name_key(forms[0], self.mode) == k:
                return j
        hits = [
            j
            for j, forms in enumerate(self.forms)
            if any(name_key(f, self.mode) == k for f in forms)
        ]
        return hits[0] if len(hits) == 1 else None

    def relationship_forms(
        self, rels: Sequence[Relationship]
    ) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
        """(source forms, target forms) of each gold relationship."""
        return (
            [self.endpoint_forms(r.source, r.head) for r in rels],
            [self.endpoint_forms(r.target, r.tail) for r in rels],
        )


def schema_alias_index(schema: Schema | None) -> dict[str, tuple[str, ...]] | None:
    """An item schema's own alias groups (``schema.aliases``) as an index, None without."""
    if schema is None or not schema.aliases:
        return None
    return alias_index(merge_alias_groups(schema.aliases))


def gold_clusters(
    gold: Sequence[Entity], config: ScoringConfig, schema: Schema | None = None
) -> Clusters | None:
    """The item's clusters, or None when no gold entity has a second form (the matcher then
    takes its name-only path, exactly as before clusters existed)."""
    if not config.aliases or config.match == "span" or not gold:
        return None
    extra = schema_alias_index(schema)
    if extra is None and not config.alias_groups and not any(e.mentions or e.aliases for e in gold):
        return None
    mode: MatchMode = config.match
    clusters = Clusters(tuple(entity_forms(e, config, extra) for e in gold), mode)
    return clusters if clusters.any_alias else None


def alias_lookup(
    config: ScoringConfig, schema: Schema | None = None
) -> Callable[[str], tuple[str, ...]] | None:
    """A name's alias-table groups (the config's table, the item schema's ``aliases``), for
    the protocols' name resolver (``docred``); None without a table or with aliases off."""
    if not config.aliases:
        return None
    extra = schema_alias_index(schema)
    if extra is None and not config.alias_groups:
        return None

    def groups(name: str) -> tuple[str, ...]:
        found = config.aliases_of(name)
        return found + extra.get(type_key(name), ()) if extra else found

    return groups
