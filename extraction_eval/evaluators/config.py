"""Scoring configuration: one frozen value passed to every evaluator, so a run is reproducible
from its config alone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, get_args

from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.stats.intervals import CI_METHODS, CiMethod
from extraction_eval.limits import DEFAULT_MAX_OBJECTS, MAX_RESAMPLES
from extraction_eval.validation import check_choice, check_int, check_number

MatchMode = Literal["exact", "casefold", "fuzzy", "span"]
EvidenceMode = Literal["strict", "relaxed"]

MATCH_MODES: tuple[str, ...] = get_args(MatchMode)
EVIDENCE_MODES: tuple[str, ...] = get_args(EvidenceMode)

DEFAULT_INVERSE_PAIRS: tuple[tuple[str, str], ...] = (
    ("parent_of", "child_of"),
    ("employs", "employed_by"),
    ("contains", "contained_in"),
    ("owns", "owned_by"),
    ("manages", "managed_by"),
    ("created", "created_by"),
    ("supervises", "supervised_by"),
    ("leads", "led_by"),
    ("member_of", "has_member"),
    ("located_in", "contains_location"),
    ("lived_in", "was_residence_of"),
    ("born_in", "birthplace_of"),
    ("died_in", "deathplace_of"),
    ("originated_from", "origin_of"),
)

DEFAULT_SYMMETRIC: frozenset[str] = frozenset(
    {
        "married_to",
        "sibling_of",
        "related_to",
        "colleague_of",
        "friend_of",
        "neighbor_of",
        "connected_to",
        "associated_with",
        "partnered_with",
    }
)


@lru_cache(maxsize=1 << 14)
def type_key(value: str) -> str:
    """Types compare casefolded with whitespace collapsed, so 'Located_In' == 'located_in'."""
    return " ".join(value.casefold().split())


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    """How predictions are compared with gold. Defaults follow issue 2.

    Relationship type names in ``inverse_pairs``/``symmetric`` are normalised with
    :func:`type_key` on construction, so callers may pass any casing and any iterable.
    """

    match: MatchMode = "fuzzy"
    threshold: float = 0.85
    span_threshold: float = 0.5
    evidence: EvidenceMode = "relaxed"
    inverse_pairs: tuple[tuple[str, str], ...] = DEFAULT_INVERSE_PAIRS
    symmetric: frozenset[str] = DEFAULT_SYMMETRIC
    resamples: int = 10_000
    seed: int = 42
    confidence: float = 0.95
    # how bootstrap quantiles make an interval (evaluators/stats/intervals.py)
    ci: CiMethod = "expanded"
    # objects of one kind (entities, relationships) per item and side; more is the item's error
    max_objects: int = DEFAULT_MAX_OBJECTS
    # gold entities' mentions and aliases (and the alias groups below) name the entity too;
    # False (--no-aliases) scores the surface names only
    aliases: bool = True
    # an alias table (--aliases FILE): groups of names of one entity, merged where they share
    # a name (so overlapping or cyclic groups become one group), each sorted
    alias_groups: tuple[tuple[str, ...], ...] = ()
    _inverse: dict[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _alias_index: dict[str, tuple[str, ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        # InvalidValue is a ValueError too: callers that catch ValueError keep working.
        check_choice("match", self.match, MATCH_MODES)
        check_choice("evidence", self.evidence, EVIDENCE_MODES)
        check_choice("ci", self.ci, CI_METHODS)
        check_number("threshold", self.threshold, minimum=0.0, maximum=1.0)
        check_number("span_threshold", self.span_threshold, minimum=0.0, maximum=1.0)
        check_number("confidence", self.confidence, above=0.0)
        if self.confidence >= 1.0:
            raise InvalidValue("confidence", f"must be below 1, got {self.confidence:g}")
        check_int("resamples", self.resamples, minimum=0, maximum=MAX_RESAMPLES)
        check_int("max_objects", self.max_objects, minimum=1)
        check_int("seed", self.seed, minimum=0)  # numpy refuses negative seeds
        pairs = _normalise_pairs(self.inverse_pairs)
        object.__setattr__(self, "inverse_pairs", pairs)
        object.__setattr__(self, "symmetric", frozenset(type_key(t) for t in self.symmetric))
        inverse: dict[str, str] = {}
        for a, b in pairs:
            inverse[a] = b
            inverse[b] = a
        object.__setattr__(self, "_inverse", inverse)
        groups = merge_alias_groups(self.alias_groups)
        object.__setattr__(self, "alias_groups", groups)
        object.__setattr__(self, "_alias_index", alias_index(groups))

    def aliases_of(self, name: str) -> tuple[str, ...]:
        """The alias-table group holding ``name`` (compared casefolded, spaces collapsed), or
        () when the table has none or aliases are off."""
        if not self.aliases or not self._alias_index:
            return ()
        return self._alias_index.get(type_key(name), ())

    def inverse_of(self, relation_type_key: str) -> str | None:
        """The inverse of a (normalised) relationship type, if one is configured."""
        return self._inverse.get(relation_type_key)

    def to_json(self) -> dict[str, object]:
        """The config as recorded in a report (sorted, so the report stays byte-stable)."""
        return {
            "match": self.match,
            "threshold": self.threshold,
            "span_threshold": self.span_threshold,
            "evidence": self.evidence,
            "inverse_pairs": [list(p) for p in self.inverse_pairs],
            "symmetric": sorted(self.symmetric),
            "resamples": self.resamples,
            "seed": self.seed,
            "confidence": self.confidence,
            "ci": self.ci,
            # left out at their defaults, so configs recorded before they existed read back
            # (and compare) as they were
            **({} if self.aliases else {"aliases": False}),
            **({"alias_groups": [list(g) for g in self.alias_groups]} if self.alias_groups else {}),
        }

    def count_fields(self) -> dict[str, object]:
        """The settings that decide an item's counts (how objects match and are grounded), not
        the bootstrap's resamples, seed, confidence level and interval method."""
        out = self.to_json()
        for key in ("resamples", "seed", "confidence", "ci"):
            out.pop(key)
        return out


def _normalise_pairs(pairs: Iterable[Iterable[str]]) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for pair in pairs:
        items = tuple(pair)
        if len(items) != 2:
            raise ValueError(f"an inverse pair needs exactly two types, got {items!r}")
        out.append((type_key(items[0]), type_key(items[1])))
    return tuple(out)


def merge_alias_groups(groups: Iterable[Iterable[str]]) -> tuple[tuple[str, ...], ...]:
    """Groups that share a name (casefolded) are one entity's names: merge them (union-find),
    so a table that chains A=B, B=C, C=A is one group, not a loop. Each group sorted, groups
    sorted, names of fewer than two distinct keys dropped: the result is canonical."""
    parent: dict[str, str] = {}
    spelling: dict[str, str] = {}

    def find(k: str) -> str:
        root = k
        while parent[root] != root:
            root = parent[root]
        while parent[k] != root:
            parent[k], k = root, parent[k]
        return root

    for group in groups:
        keys: list[str] = []
        for name in group:
            if not isinstance(name, str) or not name.strip():
                continue
            k = type_key(name)
            if k not in parent:
                parent[k] = k
                spelling[k] = name.strip()
            elif name.strip() < spelling[k]:
                spelling[k] = name.strip()
            keys.append(k)
        for k in keys[1:]:
            a, b = find(keys[0]), find(k)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for k in parent:
        members.setdefault(find(k), []).append(spelling[k])
    return tuple(sorted(tuple(sorted(m)) for m in members.values() if len(m) > 1))


def alias_index(groups: tuple[tuple[str, ...], ...]) -> dict[str, tuple[str, ...]]:
    """Each name's key -> its whole group."""
    return {type_key(name): group for group in groups for name in group}
