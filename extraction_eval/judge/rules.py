"""``offline:rules``: a keyless judge that never calls a model.

The rules, tried in order, each with the reason it gives:

1. **equal once set aside**: the names are equal after casefolding, accents, apostrophes,
   punctuation, honorifics (Mr, Dr, President, ...) and legal suffixes (Inc, Ltd, GmbH, ...)
   are removed (generational suffixes stay: "Jr." is not "Sr.");
2. **numbers differ**: names whose digits differ are different ("2002 Winter Olympics" is
   not "2006 Winter Olympics"), whatever else they share;
3. **acronym / initials**: one name is the initials of the other ("IBM" and "International
   Business Machines", "U.S." and "United States", "OMB" and "U.S. Office of Management and
   Budget");
4. **demonym or plural**: one name is the other plus an ending ("Australia" / "Australian",
   "Surah" / "Surahs");
5. **formal state name**: "Kingdom of Thailand" / "Thailand", "City of London" / "London";
6. **initials of a person**: given names shortened ("J. Smith" and "John Smith");
7. **token containment, with a type guard**: every word of the shorter name is a word of the
   longer one ("Obama" and "Barack Obama", "Apple" and "Apple Computer"), except for places,
   times and numbers, which nest ("Paris" is in "Paris, Texas") or differ by one word
   ("March 1963", "13 March 1963"), and works and events (MISC: "Titanfall" /
   "Titanfall: Assault"); a person's middle name alone is not the person.

Anything else is "not the same". Pure and deterministic: the same pair always gets the same
verdict, so the rules need no cache.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from extraction_eval.judge.base import JudgePair, JudgeStats, Verdict

RULES_MODEL = "offline:rules"
RULES_VERSION = "rules-v3"  # bump when a rule changes: calibrations name the version they measured

HONORIFICS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "miss",
        "mx",
        "dr",
        "prof",
        "professor",
        "sir",
        "dame",
        "lord",
        "lady",
        "st",
        "saint",
        "rev",
        "reverend",
        "fr",
        "father",
        "president",
        "gen",
        "general",
        "col",
        "colonel",
        "capt",
        "captain",
        "lt",
        "sgt",
        "gov",
        "governor",
        "sen",
        "senator",
        "rep",
        "judge",
        "justice",
        "king",
        "queen",
        "prince",
        "princess",
        "pope",
    }
)
LEGAL_SUFFIXES = frozenset(
    {
        "inc",
        "incorporated",
        "corp",
        "corporation",
        "co",
        "company",
        "ltd",
        "limited",
        "llc",
        "llp",
        "plc",
        "lp",
        "gmbh",
        "mbh",
        "ag",
        "sa",
        "sas",
        "spa",
        "srl",
        "bv",
        "nv",
        "oy",
        "ab",
        "as",
        "kk",
        "pty",
        "pvt",
        "group",
        "holdings",
    }
)
# Words initials skip ("Bank of America" -> BOA or BA)
_SMALL = frozenset(
    {
        "of",
        "the",
        "and",
        "for",
        "de",
        "du",
        "des",
        "la",
        "le",
        "el",
        "di",
        "da",
        "von",
        "van",
        "der",
        "den",
        "in",
        "on",
        "at",
        "&",
        "a",
        "an",
        "to",
    }
)
# Type classes whose names nest or differ by one word: containment proves nothing there
_NESTING = ("loc", "gpe", "place", "city", "country", "time", "date", "num", "money", "percent")
_PERSON = ("per", "peop", "person", "human", "people")
# Works and events nest too ("Titanfall" / "Titanfall: Assault", "World Championships")
_WORKS = ("misc", "event", "work", "title", "product")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Apostrophes and transliteration marks inside a word ("Qurʾān", "Qur'an" -> quran)
_MARKS = re.compile(r"[\'’ʼʾʿ`´]")
# A demonym or plural of a name ("Australia" / "Australian", "Surah" / "Surahs")
_ENDINGS = ("s", "es", "n", "an", "ian", "i", "ese", "ish")
# Words that make a state's formal name out of its short one ("Kingdom of Thailand")
_STATES = frozenset(
    {
        "kingdom",
        "republic",
        "state",
        "states",
        "commonwealth",
        "federation",
        "empire",
        "city",
        "province",
        "county",
        "principality",
        "union",
        "emirate",
        "sultanate",
        "duchy",
        "grand",
    }
)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=1 << 14)
def _tokens(name: str) -> tuple[str, ...]:
    """Casefolded words, accents dropped, dotted initials joined ("U.S." -> "us")."""
    folded = _MARKS.sub("", _fold(name))
    folded = re.sub(r"\b(\w)\.(?=\w\.)", r"\1", folded)  # u.s.a. -> usa.
    return tuple(_WORD.findall(folded))


def core(tokens: Sequence[str]) -> tuple[str, ...]:
    """The words that name the entity: honorifics, legal suffixes and a leading "the" out."""
    words = [t for t in tokens if t not in HONORIFICS and t not in LEGAL_SUFFIXES]
    if words and words[0] == "the":
        words = words[1:]
    return tuple(words) or tuple(tokens)


def _type_class(type_: str | None) -> str:
    if not type_:
        return "unknown"
    key = _fold(type_).strip()
    if key.startswith(_PERSON):
        return "person"
    if key.startswith(_NESTING):
        return "nesting"
    if key.startswith(_WORKS):
        return "works"
    return "other"


def _acronym(short: tuple[str, ...], long: tuple[str, ...], raw_short: str) -> bool:
    if len(short) != 1 or len(long) < 2:
        return False
    letters = short[0]
    if not 2 <= len(letters) <= 10 or not letters.isalpha():
        return False
    upper_in_raw = sum(c.isupper() for c in raw_short) >= 2 or "." in raw_short
    if not upper_in_raw:
        return False  # "bank" is a word, not the initials of "Bank of America Network Kit"
    full = "".join(w[0] for w in long)
    content = "".join(w[0] for w in long if w not in _SMALL)
    if letters in (full, content):
        return True
    # a leading qualifier left out ("OMB": U.S. Office of Management and Budget)
    return len(letters) >= 3 and len(content) > len(letters) and content.endswith(letters)


def _initials(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Person names equal up to given names shortened to initials ("J. R. Smith")."""
    if len(a) != len(b) or len(a) < 2 or a[-1] != b[-1]:
        return False
    shortened = False
    for x, y in zip(a[:-1], b[:-1], strict=True):
        if x == y:
            continue
        if (len(x) == 1 and y.startswith(x)) or (len(y) == 1 and x.startswith(y)):
            shortened = True
            continue
        return False
    return shortened


def _inflected(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Equal word for word but one word is the other plus a demonym or plural ending."""
    if len(a) != len(b) or a == b:
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        short, long = (x, y) if len(x) <= len(y) else (y, x)
        if len(short) < 4 or not long.startswith(short) or long[len(short) :] not in _ENDINGS:
            return False
    return True


def _formal_state(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    """``long`` is "<state words> of <short>" ("People's Republic of China", "City of London")."""
    n = len(short)
    if len(long) < n + 2 or long[-n:] != short or long[-n - 1] != "of":
        return False
    return any(w in _STATES for w in long[: -n - 1])


def _digits(words: Sequence[str]) -> frozenset[str]:
    return frozenset(w for w in words if any(c.isdigit() for c in w))


def rules_verdict(a: str, b: str, type_: str | None = None) -> tuple[bool, str]:
    """(same, reason) for one pair by the four rules above."""
    ta, tb = _tokens(a), _tokens(b)
    ca, cb = core(ta), core(tb)
    if not ca or not cb:
        return False, "a name has no words"
    if ca == cb:
        return True, "equal once case, punctuation, honorifics and legal suffixes are set aside"
    if _digits(ca) != _digits(cb):
        return False, "their numbers differ"
    short_raw, (short, long) = (a, (ca, cb)) if len(ca) <= len(cb) else (b, (cb, ca))
    if _acronym(short, long, short_raw):
        return True, f"{short_raw.strip()!r} is the initials of the other name"
    if _inflected(ca, cb):
        return True, "one name is the other with a demonym or plural ending"
    kind = _type_class(type_)
    if _formal_state(short, long):
        return True, "the longer name is the formal name of the shorter (state of X)"
    if kind in ("person", "unknown") and _initials(ca, cb):
        return True, "the same name with given names as initials"
    meaningful = [w for w in short if w not in _SMALL and len(w) > 1]
    if meaningful and set(short) <= set(long):
        if kind == "nesting":
            return False, "places, times and numbers nest: containment is not identity"
        if kind == "works":
            return False, "works and events nest: containment is not identity"
        if kind == "person" and len(short) == 1 and short[0] not in (long[0], long[-1]):
            return False, "a middle name alone does not name the person"
        return True, "every word of the shorter name is in the longer one"
    return False, "no rule links the names"


class RulesJudge:
    """The ``offline:rules`` judge: no key, no call, no cost, no cache needed."""

    def __init__(self) -> None:
        self._stats = JudgeStats()

    @property
    def identity(self) -> str:
        return f"{RULES_MODEL}@{RULES_VERSION}"

    @property
    def stats(self) -> JudgeStats:
        return self._stats

    async def judge(self, pairs: Sequence[JudgePair]) -> list[Verdict]:
        self._stats.pairs += len(pairs)
        out = []
        for p in pairs:
            same, reason = rules_verdict(p.a, p.b, p.type)
            out.append(Verdict(same, reason, "rules"))
        return out

    async def aclose(self) -> None:
        return None
