"""Who relates to whom: the relation phrasings and the matcher over pairs of mentions.

The second layer of the baseline. A relation is read off the words *between* two mentions in
one sentence, by an ordered list of regular expressions built from small named phrase pieces
(a copula, an apposition, a determiner ...), each constrained to the entity types it may join.
A match may also fix a weak type: "works at X" makes X an organisation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from extraction_eval.pipeline.baseline.lexicon import DATE, GROUP_WORDS, LOC, ORG, PERSON, REGIONS
from extraction_eval.pipeline.baseline.mentions import Mention

# Job words for "X, a <job> at Y": a closed list keeps "a native of", "the victim of" out.
JOB_TITLE = (
    r"(?:CEO|CFO|CTO|COO|chief|president|vice[\s-]president|chairman|chairwoman|chair|director|"
    r"manager|head|executive|officer|employee|worker|staffer|engineer|developer|programmer|"
    r"designer|architect|analyst|scientist|researcher|professor|lecturer|teacher|instructor|"
    r"dean|librarian|curator|statistician|economist|accountant|auditor|lawyer|attorney|counsel|"
    r"consultant|adviser|advisor|specialist|technician|nurse|doctor|physician|surgeon|chef|"
    r"baker|clerk|secretary|treasurer|editor|reporter|correspondent|journalist|photographer|"
    r"writer|producer|coach|pilot|spokesman|spokeswoman|spokesperson|assistant|associate|"
    r"intern|fellow|partner|administrator|commander|official|minister|ambassador|agent|"
    r"strategist|planner|buyer|broker|trader|banker|lead|leader|owner-operator)s?"
)
# A short clause between a verb and its preposition: "born on 3 May 1975 in", "works, now, at".
WORD_CHARS = r"[\w\s,'’-]"


@dataclass(frozen=True)
class RelationPattern:
    """One phrasing of a relation; ``source`` / ``target`` are the types allowed in text order."""

    rel: str
    between: re.Pattern[str]
    source: frozenset[str]
    target: frozenset[str]
    reverse: bool = False  # the relation reads from the second mention to the first
    tail: re.Pattern[str] | None = None  # must follow the second mention ("are siblings")
    strict: bool = False  # both mentions must already have a firm type (weak cues are not enough)
    regional: bool = False  # the target must be a known country / state / region


def pattern(
    rel: str,
    between: str,
    source: Iterable[str],
    target: Iterable[str],
    *,
    reverse: bool = False,
    tail: str | None = None,
    strict: bool = False,
    regional: bool = False,
) -> RelationPattern:
    """A ``RelationPattern`` from regex text and type sets, so the table below stays short."""
    return RelationPattern(
        rel,
        re.compile(between),
        frozenset(source),
        frozenset(target),
        reverse,
        re.compile(tail) if tail else None,
        strict,
        regional,
    )


# The entity types a pattern side accepts.
PERSON_ONLY, ORG_ONLY, LOC_ONLY = {PERSON}, {ORG}, {LOC}

# --- phrase pieces the patterns are built from -----------------------------------------------

# After the subject, before its verb: ", who has also". Only patterns that start so are tried
# for a second predicate with the sentence's subject ("A was born in X and died in Y").
PREDICATE_START = (
    r"^\s*,?\s*(?:who\s+|which\s+|that\s+)?(?:(?:has|had|have)\s+)?"
    r"(?:also\s+|now\s+|still\s+|later\s+)?"
)
# "is", "was", "became", "served as" ...: the verb of "X is the CEO of Y".
COPULA = r"(?:is|was|has\s+been|had\s+been|became|becomes|remains|served\s+as|serves\s+as)\s+"
# Right after the first name, before a role noun: ", the" / " is now" ("X, the CEO of Y").
APPOSITION = rf"^\s*(?:,\s*|\s+{COPULA})(?:(?:now|also|currently|formerly|later)\s+)?"
DETERMINER = r"(?:an?|the|his|her|their|its)\s+"
# Lowercase words before a name: "married the painter X", "works for the shipping firm X".
NOUN_PHRASE_PREFIX = r"(?:(?:the|a|an|his|her|their|its)\s+)?(?:[a-z][a-z-]*\s+){0,3}?"
# "X's wife Y", "X and his wife Y".
POSSESSIVE = r"^(?:'s|’s|\s+and\s+(?:his|her|their))\s+"
AGE_QUALIFIER = r"(?:younger\s+|older\s+|elder\s+|twin\s+|little\s+|big\s+)?"
# Roles in "Acme's new CEO, Jane Doe" (read from the person to the company).
COMPANY_ROLE = (
    r"(?:CEO|chief\s+[a-z]+\s+officer|president|chairman|chairwoman|director|manager|head|"
    r"founder|employee|engineer|lead\s+[a-z]+)"
)

# --- the patterns -----------------------------------------------------------------------------

# Checked in order; the first pattern that matches the text between two mentions wins.
PATTERNS: list[RelationPattern] = [
    # family and partners
    pattern(
        "married_to",
        rf"{PREDICATE_START}(?:(?:is|was|got|had\s+been)\s+)?married\s+"
        rf"(?:to\s+)?{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "married_to",
        rf"{APPOSITION}{DETERMINER}?(?:wife|husband|spouse|partner)\s+of\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern("married_to", rf"{POSSESSIVE}(?:wife|husband|spouse),?\s+$", PERSON_ONLY, PERSON_ONLY),
    pattern(
        "married_to",
        r"^\s+and\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
        tail=r"^\s+(?:are|were|got|have\s+been)\s+married",
    ),
    pattern(
        "sibling_of",
        rf"{APPOSITION}{DETERMINER}?{AGE_QUALIFIER}(?:sister|brother|sibling)\s+"
        rf"of\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "sibling_of",
        rf"{POSSESSIVE}{AGE_QUALIFIER}(?:sister|brother|sibling),?\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "sibling_of",
        r"^\s+and\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
        tail=r"^\s+(?:are|were)\s+(?:[a-z]+\s+)?(?:siblings|sisters|brothers|twins)",
    ),
    pattern(
        "parent_of",
        rf"{APPOSITION}{DETERMINER}?(?:mother|father|parent)\s+of\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "parent_of", rf"{POSSESSIVE}(?:son|daughter|child|kid)s?,?\s+$", PERSON_ONLY, PERSON_ONLY
    ),
    pattern(
        "child_of",
        rf"{APPOSITION}{DETERMINER}?(?:son|daughter|child)\s+of\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern("child_of", rf"{POSSESSIVE}(?:mother|father|parents?),?\s+$", PERSON_ONLY, PERSON_ONLY),
    pattern(
        "colleague_of",
        rf"{APPOSITION}{DETERMINER}?(?:colleague|co-worker|coworker)\s+of\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "colleague_of",
        rf"{PREDICATE_START}(?:works|worked|working)\s+(?:closely\s+)?(?:with|alongside)\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "colleague_of",
        r"^(?:'s|’s)\s+(?:colleague|co-worker|coworker),?\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "colleague_of",
        r"^\s+and\s+$",
        PERSON_ONLY,
        PERSON_ONLY,
        tail=r"^\s+(?:are|were|have\s+been)\s+(?:[a-z]+\s+)?(?:colleagues|co-workers|coworkers)",
    ),
    # places
    pattern(
        "born_in",
        rf"{PREDICATE_START}(?:(?:was|were)\s+)?born\b{WORD_CHARS}{{0,40}}?\bin\s+(?:the\s+)?$",
        PERSON_ONLY,
        LOC_ONLY,
    ),
    pattern(
        "died_in",
        rf"{PREDICATE_START}died\b{WORD_CHARS}{{0,40}}?\b(?:in|at)\s+(?:the\s+)?$",
        PERSON_ONLY,
        LOC_ONLY,
    ),
    pattern(
        "lived_in",
        rf"{PREDICATE_START}(?:(?:is|was)\s+)?"
        rf"(?:live|lives|lived|living|resides|resided|grew\s+up|settled|"
        r"moved|relocated)\s+(?:[a-z]+\s+)?(?:in|to)\s+(?:the\s+)?$",
        PERSON_ONLY,
        LOC_ONLY,
    ),
    pattern(
        "located_in",
        rf"{PREDICATE_START}(?:(?:is|was|are|were)\s+)?"
        rf"(?:located|situated|based|headquartered|found)\s+in\s+(?:the\s+)?$",
        ORG_ONLY | LOC_ONLY,
        LOC_ONLY,
    ),
    pattern(
        "located_in",
        rf"{PREDICATE_START}(?:has|had)\s+(?:its\s+)?"
        rf"(?:headquarters|head\s+office|main\s+office|offices?|base)\s+in\s+$",
        ORG_ONLY,
        LOC_ONLY,
    ),
    pattern(
        "located_in",
        rf"{APPOSITION}{DETERMINER}?(?:[a-z]+\s+)?"
        rf"(?:city|town|village|capital|region|province|state|country|"
        r"district|neighbou?rhood|suburb|island|port|area)\s+(?:located\s+)?(?:in|of)\s+"
        r"(?:the\s+)?$",
        LOC_ONLY,
        LOC_ONLY,
    ),
    # "X, a survey firm based in Y", "X, a studio in Y"
    pattern(
        "located_in",
        r"^\s*,\s*(?:an?|the)\s+(?:[a-z][a-z-]*\s+){1,3}(?:(?:located|based|headquartered)\s+)?"
        r"in\s+$",
        ORG_ONLY,
        LOC_ONLY,
    ),
    pattern(
        "located_in",
        r"^(?:'s|’s)\s+(?:headquarters|head\s+office|offices?|campus|factory|base)\s+"
        r"(?:is|are|was|were)\s+in\s+$",
        ORG_ONLY,
        LOC_ONLY,
    ),
    pattern("located_in", r"^\s*,\s*$", LOC_ONLY | ORG_ONLY, LOC_ONLY, strict=True, regional=True),
    pattern("located_in", r"^\s+in\s+(?:the\s+)?$", LOC_ONLY, LOC_ONLY, strict=True),
    # organisations
    pattern(
        "created_by",
        rf"{PREDICATE_START}(?:co-?founded|founded|established|created|started|launched|set\s+up)"
        rf"\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
        reverse=True,
    ),
    pattern(
        "created_by",
        r"^\s*,?\s*(?:which\s+|that\s+)?(?:(?:is|was|were)\s+)?(?:co-?founded|founded|established|"
        r"created|started|set\s+up)\s+(?:[a-z]+\s+)?by\s+$",
        ORG_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "created_by",
        rf"{APPOSITION}{DETERMINER}?(?:co-?founder|founder|creator)\s+of\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
        reverse=True,
    ),
    pattern(
        "owns",
        rf"{PREDICATE_START}(?:owns|owned|own|acquired|bought|purchased)\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY | ORG_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "owns",
        rf"{APPOSITION}{DETERMINER}?(?:owner|proprietor)\s+of\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY | ORG_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "owns",
        r"^\s*,?\s*(?:which\s+|that\s+)?(?:is|was|are|were)\s+(?:[a-z]+\s+)?"
        r"(?:owned|acquired|bought)\s+by\s+$",
        ORG_ONLY,
        PERSON_ONLY | ORG_ONLY,
        reverse=True,
    ),
    pattern(
        "joined",
        rf"{PREDICATE_START}(?:rejoined|joined)\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "member_of",
        rf"{PREDICATE_START}(?:(?:is|was)\s+)?"
        rf"(?:plays\s+for|played\s+for|belongs\s+to|belonged\s+to|"
        rf"sings\s+(?:with|in)|sang\s+(?:with|in)|plays\s+(?:with|in))\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "member_of",
        rf"{APPOSITION}{DETERMINER}?(?:[a-z]+\s+)?member\s+of\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "manages",
        rf"{PREDICATE_START}(?:manages|managed|runs|ran|leads|led|heads|headed|directs|directed|"
        rf"oversees|oversaw|chairs|chaired)\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "employs",
        rf"{PREDICATE_START}(?:employs|employed|hired|hires|recruited)\s+{NOUN_PHRASE_PREFIX}$",
        ORG_ONLY,
        PERSON_ONLY,
    ),
    pattern(
        "employed_by",
        rf"{PREDICATE_START}(?:(?:is|was)\s+)?(?:employed|hired|recruited)\s+"
        rf"by\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "employed_by",
        rf"{PREDICATE_START}(?:(?:is|was)\s+)?"
        rf"(?:works|worked|working|work|teaches|taught|studies|studied|"
        rf"interned|consults)\b{WORD_CHARS}{{0,40}}?\b(?:for|at)\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "employed_by",
        rf"{APPOSITION}{DETERMINER}?(?:[\w-]+\s+){{0,3}}?{JOB_TITLE}\s+(?:at|for|of|with)"
        rf"\s+{NOUN_PHRASE_PREFIX}$",
        PERSON_ONLY,
        ORG_ONLY,
    ),
    pattern(
        "employed_by",
        rf"^(?:'s|’s)\s+(?:new\s+|former\s+)?{COMPANY_ROLE}\s*,?\s+$",
        ORG_ONLY,
        PERSON_ONLY,
        reverse=True,
    ),
]


def _type_allows(mention: Mention, allowed: frozenset[str]) -> bool:
    """Untyped and weakly typed mentions fit any pattern; the pattern then types them."""
    return mention.type in allowed or mention.type is None or mention.weak


def _retype(mention: Mention, allowed: frozenset[str]) -> None:
    """A matched pattern that allows one type gives it to an untyped or weak mention."""
    if (mention.type is None or mention.weak) and mention.type not in allowed and len(allowed) == 1:
        mention.type = next(iter(allowed))
        mention.weak = False


@dataclass(frozen=True)
class FoundRelation:
    """A relation found in sentence ``sentence``, before aliases map mentions to entities."""

    rel: str
    source: Mention
    target: Mention
    sentence: int


# Between coordinated names ("A, B and C") and before a second predicate ("... and died in").
_COORDINATION = re.compile(r"^\s*(?:,\s*|,?\s+and\s+|,?\s+&\s+)$")
_SECOND_PREDICATE = re.compile(r"^\s*,?\s+and\s+")


def _matches(rule: RelationPattern, a: Mention, b: Mention, between: str, tail: str) -> bool:
    """Whether ``rule`` relates ``a`` to the following ``b`` given the text between and after."""
    if not rule.between.search(between):
        return False
    if rule.tail and not rule.tail.search(tail):
        return False
    if b.pronoun:
        return False
    if rule.regional and (b.text not in REGIONS or a.text in REGIONS):
        return False  # "Berlin, Germany" yes; "Colombia, Bolivia" (a list) no
    # ``source`` / ``target`` constrain the mentions in text order.
    if rule.strict:
        return _firmly_typed(a, rule.source) and _firmly_typed(b, rule.target)
    return _type_allows(a, rule.source) and _type_allows(b, rule.target)


def _firmly_typed(mention: Mention, allowed: frozenset[str]) -> bool:
    """A cue-backed type: "strict" patterns (bare ", " / " in ") are too loose for guesses."""
    return mention.type in allowed and not mention.weak


def _coordinated(text: str, items: list[Mention], index: int, step: int) -> list[Mention]:
    """Mentions joined to ``items[index]`` by "and" / commas: "A and B work at C"."""
    out: list[Mention] = []
    here = items[index]
    j = index + step
    while 0 <= j < len(items):
        other = items[j]
        gap = text[other.end : here.start] if step < 0 else text[here.end : other.start]
        if other.type != here.type or other.pronoun or not _COORDINATION.match(gap):
            break
        if here.type == LOC and "and" not in gap and "&" not in gap:
            break  # "Berlin, Germany" is one place, not two
        out.append(other)
        here = other
        j += step
    return out


def find_relationships(
    text: str, mentions: list[Mention], sentences: list[tuple[int, int]]
) -> list[FoundRelation]:
    """The first matching pattern between each ordered pair of mentions in a sentence.

    Coordinated names share the relation ("A and B work at C", "founded by A and B"), and a
    second predicate keeps the sentence's subject ("A was born in X and died in Y").
    """
    found: list[FoundRelation] = []
    by_sentence: dict[int, list[Mention]] = {}
    for m in mentions:
        by_sentence.setdefault(m.sentence, []).append(m)
    for si, items in by_sentence.items():
        sent_end = sentences[si][1]
        for i, a in enumerate(items):
            for k in range(i + 1, len(items)):
                b = items[k]
                if b.start < a.end:
                    continue
                between = text[a.end : b.start]
                if len(between) > 80:
                    break
                if any(m.type != DATE and not m.pronoun for m in items[i + 1 : k]):
                    continue  # another name in between: the pair is probably not related
                subject = a
                rule = next(
                    (p for p in PATTERNS if _matches(p, a, b, between, text[b.end : sent_end])),
                    None,
                )
                if rule is None and _SECOND_PREDICATE.match(between) and a.type != PERSON:
                    rest = _SECOND_PREDICATE.sub(" ", between, count=1)
                    people = [m for m in items[:i] if m.type == PERSON and not m.pronoun]
                    if people:
                        subject = people[0]
                        rule = next(
                            (
                                p
                                for p in PATTERNS
                                if p.between.pattern.startswith(PREDICATE_START)
                                and _matches(p, subject, b, rest, text[b.end : sent_end])
                            ),
                            None,
                        )
                if rule is None:
                    continue
                rel = rule.rel
                if rel == "joined":  # a party or a club: membership; else a job
                    rel = "member_of" if b.text.split()[-1] in GROUP_WORDS else "employed_by"
                _retype(subject, rule.source)
                _retype(b, rule.target)
                lefts = [subject, *(_coordinated(text, items, i, -1) if subject is a else [])]
                rights = [b, *_coordinated(text, items, k, +1)]
                if rule.tail is not None:  # "A and B are siblings": the pair itself
                    lefts, rights = [subject], [b]
                for left in lefts:
                    for right in rights:
                        first, second = (right, left) if rule.reverse else (left, right)
                        found.append(FoundRelation(rel, first, second, si))
    return found
