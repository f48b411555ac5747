"""Where the names are: sentence splitting, candidate spans and their entity types.

The first layer of the baseline. It splits the text into sentences (so evidence quotes a
whole sentence verbatim), finds dates and runs of capitalised words, trims titles and
stopwords off them, and gives each a type from the lexicon's cues. A type with no positive
cue is *weak*: the relation layer may still correct it ("works at X" makes X an organisation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from extraction_eval.pipeline.baseline.lexicon import (
    ABBREVIATIONS,
    DATE,
    DATE_RE,
    FIRST_NAMES,
    HONORIFICS,
    LOC,
    LOCATION_PREFIXES,
    LOCATION_SUFFIXES,
    MONTH_WORDS,
    NAME_CONNECTOR_WORDS,
    ORG,
    ORG_PREFIXES,
    ORG_SUFFIXES,
    PERSON,
    PLACES,
    ROLE_PREFIXES,
    STOPWORDS,
)

# A name is capitalised words, optionally joined by particles: "Bank of England", "van Gogh".
_CAPITALISED_WORD = r"(?:[A-Z][\w'’&.-]*[\w.]|[A-Z]|[A-Z]\.)"
_NAME_CONNECTOR = r"(?:of|of\s+the|de|da|dos|van|von|der|den|del|la|le|du|al|bin|&)"
SPAN_RE = re.compile(rf"{_CAPITALISED_WORD}(?:(?:\s+{_NAME_CONNECTOR})?\s+{_CAPITALISED_WORD})*")

# A preposition right before a name makes it a place: "in Larchmont", "near Palo Alto".
_PLACE_CUE = re.compile(
    r"\b(?:in|near|outside|across|throughout|to)\s+(?:suburban\s+|rural\s+|downtown\s+)?\Z"
)

PRONOUN_RE = re.compile(r"\b(?:He|She|he|she)\b")

# End punctuation (and closing quotes) followed by what may start a sentence.
_SENTENCE_BOUNDARY = re.compile(r"[.!?][\"'”’)]*\s+(?=[\"'“‘(]?[A-Z0-9])")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans (start, end) that quote the text verbatim; abbreviations do not split."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_BOUNDARY.finditer(text):
        before = text[start : match.start() + 1]
        last = re.search(r"([\w.]+)\.$", before)
        if last:
            word = last.group(1)
            following = text[match.end() :].split(maxsplit=1)
            starts_sentence = bool(following) and following[0].strip("\"'“‘(") in STOPWORDS
            if (word in ABBREVIATIONS or (len(word) == 1 and word.isupper())) and not (
                starts_sentence and word not in HONORIFICS and word + "." not in HONORIFICS
            ):
                continue
        end = match.start() + 1
        while end < len(text) and text[end] in "\"'”’)":
            end += 1
        spans.append((start, end))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


@dataclass
class Mention:
    """One occurrence of a name, date or pronoun.

    ``key`` starts as the text; aliases point it at the entity's canonical name, and a relation
    pattern may replace a weak ``type``.
    """

    start: int
    end: int
    text: str
    type: str | None
    sentence: int
    key: str = ""  # canonical entity name
    pronoun: bool = False
    honorific: bool = False
    weak: bool = False  # typed by the "capitalised words" fallback; a relation cue may retype


def _classify(tokens: list[str], honorific: bool, role: bool) -> tuple[str | None, bool]:
    """(type, weak): weak types come from no positive cue and may be overridden."""
    kind = _classify_strong(tokens, honorific)
    if kind is not None:
        return kind, False
    if role:
        return PERSON, False
    if len(tokens) in (2, 3) and all(t[:1].isupper() and not t.isupper() for t in tokens):
        return PERSON, True  # two or three capitalised words with no other cue: often a name
    return None, False


def _classify_strong(tokens: list[str], honorific: bool) -> str | None:
    name = " ".join(tokens)
    last, first = tokens[-1], tokens[0]
    if honorific:
        return PERSON
    if last in ORG_SUFFIXES or (len(tokens) > 2 and first in ORG_PREFIXES and tokens[1] == "of"):
        return ORG
    if "&" in tokens:
        return ORG  # "Harrow & Lisle"
    if name in PLACES or name.rstrip(".") in PLACES:
        return LOC
    if len(tokens) > 1 and (last in LOCATION_SUFFIXES or first in LOCATION_PREFIXES):
        return LOC
    if first in FIRST_NAMES and len(tokens) <= 4:
        return PERSON
    if len(tokens) == 1 and first.isupper() and 2 <= len(first.rstrip(".")) <= 6:
        return ORG  # acronyms: IBM, NASA, UNESCO
    return None


def _strip_span(text: str, start: int, end: int) -> tuple[int, int, bool, bool]:
    """Drop leading stopwords / honorifics / role words and trailing possessives."""
    honorific = False
    role = False
    while True:
        m = re.match(r"([\w.'’&-]+)\s+", text[start:end])
        if not m:
            break
        word = m.group(1)
        # "President Lincoln" / "CEO Jane Doe" are titles; "President of the United States"
        # and "CEO of Acme" name what follows, which is not a person.
        rest = text[start + m.end() : end].split(maxsplit=1)
        titles = not rest or rest[0] not in NAME_CONNECTOR_WORDS
        if word in HONORIFICS or word.rstrip(".") in HONORIFICS:
            honorific = titles
        elif word in ROLE_PREFIXES:
            role = titles
        elif word not in STOPWORDS and word not in MONTH_WORDS and word not in NAME_CONNECTOR_WORDS:
            break
        start += m.end()
    while True:
        m = re.search(r"\s+([\w&]+)$", text[start:end])
        if not (m and m.group(1) in NAME_CONNECTOR_WORDS):
            break
        end = start + m.start()
    if text[start:end] in STOPWORDS or text[start:end] in HONORIFICS:
        return start, start, honorific, role
    for suffix in ("'s", "’s", "'", "’"):
        if text[start:end].endswith(suffix):
            end -= len(suffix)
            break
    while end > start and text[end - 1] == "." and not _keeps_period(text[start:end]):
        end -= 1
    return start, end, honorific, role


def _keeps_period(span: str) -> bool:
    """ "Acme Co." and "U.S." keep their period; a sentence's full stop does not join a name."""
    last = span.split()[-1]
    return (
        last in ORG_SUFFIXES
        or last in ABBREVIATIONS
        or last.rstrip(".") + "." in PLACES
        or (len(last) == 2 and last[0].isupper())
    )


def _split_of(tokens_text: str) -> list[str]:
    """'John Smith of Acme Corp' and 'Queens College of the City University' are two names."""
    parts = re.split(r"\s+of\s+(?:the\s+)?", tokens_text, maxsplit=1)
    if len(parts) != 2:
        return [tokens_text]
    head, tail = parts[0].split(), parts[1].split()
    if not head or not tail:  # "of Ada", "Smith of": nothing on one side to split off
        return [tokens_text]
    if head[0] in FIRST_NAMES:
        return parts
    if len(head) > 1 and head[-1] in ORG_SUFFIXES and _classify_strong(tail, False) in (ORG, LOC):
        return parts
    return [tokens_text]


def find_mentions(text: str, sentences: list[tuple[int, int]]) -> list[Mention]:
    """Dates first ("May" in "3 May 2020" is no name), then names and he/she, in text order."""
    mentions: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for si, (s, e) in enumerate(sentences):
        for m in DATE_RE.finditer(text, s, e):
            mentions.append(Mention(m.start(), m.end(), m.group(0), DATE, si, key=m.group(0)))
            taken.append((m.start(), m.end()))

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken)

    for si, (s, e) in enumerate(sentences):
        for m in SPAN_RE.finditer(text, s, e):
            for sub in _spans_without_dates(m.start(), m.end(), taken):
                a, b, honorific, role = _strip_span(text, *sub)
                if b <= a or not free(a, b):
                    continue
                piece = text[a:b]
                offset = a
                for part in _split_of(piece):
                    p_start = text.index(part, offset)
                    p_end = p_start + len(part)
                    offset = p_end
                    tokens = part.split()
                    if not tokens or all(t in STOPWORDS or t in MONTH_WORDS for t in tokens):
                        continue
                    kind, weak = _classify(tokens, honorific, role)
                    if (kind is None or weak) and _PLACE_CUE.search(text, s, p_start):
                        kind, weak = LOC, False  # "in Larchmont", "near Palo Alto"
                    mentions.append(
                        Mention(
                            p_start, p_end, part, kind, si, key=part, honorific=honorific, weak=weak
                        )
                    )
                    honorific = role = False
        for m in PRONOUN_RE.finditer(text, s, e):
            mentions.append(Mention(m.start(), m.end(), m.group(0), PERSON, si, pronoun=True))
    mentions.sort(key=lambda x: (x.start, -x.end))
    return mentions


def _spans_without_dates(
    start: int, end: int, taken: list[tuple[int, int]]
) -> Iterable[tuple[int, int]]:
    """The parts of a capitalised run not already taken by a date ("March" in "March 3, 1975")."""
    cuts = sorted((x, y) for x, y in taken if x < end and y > start)
    pos = start
    for x, y in cuts:
        if x > pos:
            yield pos, x
        pos = max(pos, y)
    if pos < end:
        yield pos, end
