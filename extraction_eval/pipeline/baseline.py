"""``offline:baseline`` — a deterministic pattern and gazetteer extractor, no model, no network.

It exists so the tool does something real on a fresh machine and so model runs have a floor
to beat. It reads only the input text (never gold), finds capitalised spans, dates and a few
dozen relation phrasings, and quotes its evidence verbatim. It is meant to be imperfect:
unknown names, pronouns beyond "he/she" and anything implicit are missed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from extraction_eval.pipeline.base import PipelineConfig, PipelineOutput
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship, Schema

BASELINE_MODEL = "offline:baseline"

PERSON, ORG, LOC, DATE = "person", "organization", "location", "date"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# --- gazetteers (small on purpose: this is a baseline) ------------------------------------

FIRST_NAMES = _words(
    """
    Aaron Abigail Adam Adrian Ahmed Aisha Alan Albert Alejandro Alex Alexander Alexandra Alice
    Alicia Amanda Amara Amelia Amir Amy Ana Andrea Andrew Angela Anita Ann Anna Anne Anthony
    Antonio Arjun Arthur Ashley Aurora Ava Barbara Beatriz Ben Benjamin Beth Bill Bob Brandon
    Brian Bruce Carl Carla Carlos Carmen Caroline Catherine Charles Charlotte Chen Chloe Chris
    Christian Christina Christopher Claire Clara Daniel Daniela David Deborah Diana Diego
    Dmitri Dominic Donald Dorothy Edward Elena Eli Elijah Elizabeth Ella Ellen Emily Emma
    Eric Erik Ethan Eva Fatima Felix Fernando Fiona Francesca Francis Frank Fred Gabriel
    Gabriela George Georgia Grace Greg Hannah Hans Harold Harry Hassan Heather Helen Henry
    Hiroshi Hugo Ian Ibrahim Igor Ingrid Isaac Isabel Isabella Ivan Jack Jacob James Jamal
    Jan Jane Janet Jason Javier Jean Jennifer Jessica Jin Joan Joe John Jonathan Jorge Jose
    José Joseph Joshua Juan Julia Julian Julie Karen Karim Kate Katherine Kenji Kevin Kim
    Klaus Kofi Kumar Laura Lauren Layla Leah Lena Leo Leon Li Liam Lily Linda Lisa Liu Lucas
    Lucy Luis Luisa Maria María Marie Mark Marco Margaret Mario Marta Martin Mary Matthew Maya
    Mei Melissa Michael Michelle Miguel Mohammed Muhammad Nadia Naomi Natalia Nathan Nicholas
    Nicole Nina Noah Nora Olivia Omar Oscar Pablo Patricia Patrick Paul Paula Pedro Peter
    Philip Priya Rachel Rafael Rahul Raj Rebecca Richard Robert Roberto Rosa Ryan Sakura Sam
    Samantha Samuel Sandra Sara Sarah Sean Sebastian Sergei Sofia Sophia Sophie Stephen Steven
    Susan Takeshi Tanya Thomas Tim Timothy Tom Tomás Victor Victoria Vikram Walter Wei William
    Xavier Yuki Yusuf Zainab Zara Zoe
    """
)


def _names(text: str) -> frozenset[str]:
    return frozenset(x.strip() for x in text.replace("\n", "").split("|") if x.strip())


# Countries, US states and a few provinces and continents: the "Y" of "X, Y".
REGIONS = _names(
    """
    Afghanistan|Albania|Algeria|Argentina|Armenia|Australia|Austria|Bangladesh|Belgium|Bolivia|
    Brazil|Bulgaria|Cambodia|Cameroon|Canada|Chile|China|Colombia|Croatia|Cuba|Cyprus|Czechia|
    Denmark|Ecuador|Egypt|England|Estonia|Ethiopia|Finland|France|Germany|Ghana|Greece|Hungary|
    Iceland|India|Indonesia|Iran|Iraq|Ireland|Israel|Italy|Jamaica|Japan|Jordan|Kazakhstan|
    Kenya|Korea|South Korea|North Korea|Latvia|Lebanon|Lithuania|Luxembourg|Malaysia|Mexico|
    Morocco|Nepal|Netherlands|New Zealand|Nigeria|Norway|Pakistan|Peru|Philippines|Poland|
    Portugal|Romania|Russia|Saudi Arabia|Scotland|Senegal|Serbia|Singapore|Slovakia|Slovenia|
    South Africa|Spain|Sri Lanka|Sweden|Switzerland|Syria|Taiwan|Tanzania|Thailand|Tunisia|
    Turkey|Uganda|Ukraine|United Kingdom|United States|United States of America|Uruguay|
    Venezuela|Vietnam|Wales|Zambia|Zimbabwe|USA|UK|US|U.S.|UAE|Africa|Asia|Europe|North America|
    South America|Antarctica|Oceania|Middle East|Scandinavia|Alabama|Alaska|Arizona|Arkansas|
    California|Colorado|Connecticut|Delaware|Florida|Hawaii|Idaho|Illinois|Indiana|Iowa|Kansas|
    Kentucky|Louisiana|Maine|Maryland|Massachusetts|Michigan|Minnesota|Mississippi|Missouri|
    Montana|Nebraska|Nevada|New Hampshire|New Jersey|New Mexico|New York|North Carolina|
    North Dakota|Ohio|Oklahoma|Oregon|Pennsylvania|Rhode Island|South Carolina|South Dakota|
    Tennessee|Texas|Utah|Vermont|Virginia|Washington|West Virginia|Wisconsin|Wyoming|Ontario|
    Quebec|Bavaria|Catalonia|Tuscany
    """
)

CITIES = _names(
    """
    Amsterdam|Athens|Atlanta|Auckland|Austin|Baltimore|Bangkok|Barcelona|Beijing|Beirut|Berlin|
    Bogotá|Bogota|Boston|Brussels|Budapest|Buenos Aires|Cairo|Calgary|Cape Town|Chicago|
    Copenhagen|Dallas|Delhi|New Delhi|Denver|Detroit|Dhaka|Dubai|Dublin|Edinburgh|Florence|
    Frankfurt|Geneva|Glasgow|Hamburg|Havana|Helsinki|Hong Kong|Honolulu|Houston|Istanbul|
    Jakarta|Jerusalem|Johannesburg|Karachi|Kyoto|Kiev|Kyiv|Lagos|Las Vegas|Lima|Lisbon|
    Liverpool|London|Los Angeles|Lyon|Madrid|Manchester|Manila|Marseille|Melbourne|Mexico City|
    Miami|Milan|Minneapolis|Montreal|Moscow|Mumbai|Munich|Nairobi|Naples|Nashville|New Orleans|
    Osaka|Oslo|Ottawa|Oxford|Cambridge|Paris|Philadelphia|Phoenix|Pittsburgh|Portland|Prague|
    Rio de Janeiro|Rome|Rotterdam|San Diego|San Francisco|San Jose|Santiago|São Paulo|Sao Paulo|
    Seattle|Seoul|Shanghai|Stockholm|Sydney|Taipei|Tokyo|Toronto|Vancouver|Venice|Vienna|Warsaw|
    Washington D.C.|Zurich|Zürich|Lagos|Accra|Addis Ababa|Casablanca|Tunis|Hanoi|Kuala Lumpur|
    Bangalore|Bengaluru|Chennai|Kolkata|Hyderabad|Lahore|Tehran|Baghdad|Doha|Riyadh|Tel Aviv|
    Krakow|Kraków|Porto|Seville|Valencia|Salzburg|Heidelberg|Cologne|Stuttgart|Leeds|Bristol|
    Belfast|Cardiff|Quito|Montevideo|Caracas|Medellín|Medellin|Guadalajara|Monterrey|
    Springfield|Brooklyn|Manhattan|Queens|Silicon Valley
    """
)

PLACES = REGIONS | CITIES

HONORIFICS = _words(
    """
    Mr Mr. Mrs Mrs. Ms Ms. Miss Mx Dr Dr. Prof Prof. Professor Sir Dame Lady Lord Rev Rev.
    Reverend Judge Justice Senator Sen. Governor Gov. Mayor President Chancellor Minister
    Captain Capt. Colonel Col. General Gen. Lieutenant Lt. Sergeant Sgt. King Queen Prince
    Princess Pope Sheikh Rabbi Imam Father Saint
    """
)

ROLE_PREFIXES = _words(
    """
    CEO Chairman Chairwoman Chair Director Founder Co-founder Chief Executive Officer Manager
    Coach Dean Editor Architect Engineer Scientist Researcher Author Actor Actress Singer
    Artist Novelist Economist Physicist Chemist Lawyer Attorney Detective Officer Nurse Doctor
    Surgeon Mathematician Historian Journalist Reporter Spokesman Spokeswoman Spokesperson
    """
)

ORG_SUFFIXES = _words(
    """
    Inc Inc. Incorporated Corp Corp. Corporation Company Co Co. Ltd Ltd. Limited LLC L.L.C.
    PLC plc GmbH AG SA S.A. NV N.V. Group Holdings Bank Bancorp University College Institute
    Foundation Association Society Agency Laboratories Laboratory Labs Lab Technologies
    Technology Tech Systems Solutions Industries Enterprises Partners Studios Studio Records
    Press Publishing Publishers Airlines Airways Motors Pharmaceuticals Pharma Therapeutics
    Biotech Hospital Clinic School Academy Museum Library Council Committee Commission Ministry
    Department Bureau Party Union Federation League Club Church Times Post Journal Tribune
    Herald Gazette News Network Networks Broadcasting Bakery Café Cafe Restaurant Hotel Hotels
    Orchestra Theatre Theater Trust Fund Capital Ventures Investments Works Organization
    Organisation Authority Services Board Consulting Consultants Software Media Energy Robotics
    Dynamics Analytics Logistics Foods Brewery Mills Motors Electric Electronics Telecom
    Communications Insurance Securities Bros. Brothers Initiative Alliance Coalition Council
    Cooperative Collective Lab Labs Center Centre Institute Observatory Gallery Zoo
    Parliament Government Army Navy Police Congress Senate Court Embassy Cabinet Assembly
    Administration Commission Corps
    """
)

ORG_PREFIXES = _words("University Bank Ministry Department Institute College Museum Academy")

LOCATION_SUFFIXES = _words(
    """
    City County River Lake Mountain Mountains Mount Island Islands Valley Bay Street St. Avenue
    Ave. Road Boulevard Square Province Region Desert Ocean Sea Coast Peninsula Canyon Falls
    Bridge Harbor Harbour Park Heights Hills Village Town Borough District Quarter Plaza Beach
    Forest Glacier Gulf Strait Canal Territory Republic Kingdom Emirates Islands Airport
    """
)

LOCATION_PREFIXES = _words("Mount Mt. Lake Port Fort Gulf Isle Cape Lake Saint San Santa")

STOPWORDS = _words(
    """
    The A An In On At By For From With Without After Before During Since Until Upon Under
    Over Between Among Into Onto Through Across Despite Although Though Because While When
    Whenever Where Whereas If Unless Once As But And Or Nor So Yet Then Thus Hence However
    Meanwhile Moreover Furthermore Also Still Even Only Just Both Each Every Either Neither
    Some Many Most Much More Several All Any No Not None He She It They We You I Me Him Her
    Us Them His Hers Its Our Their Your My This That These Those There Here What Which Who
    Whom Whose Why How Yesterday Today Tomorrow Tonight Last Next Later Earlier Recently
    Now Later According Born Married Following Like Unlike Per Via Despite Together Along
    Mr Mrs Ms Dr Prof Sir Is Was Are Were Be Been Being Has Have Had Do Does Did Will Would
    Can Could Should May Might Must Shall Her Hers Its Our Ours Their Theirs Of To Up Out
    Off Down Another Other Such Same Own First Second Third Former Current New Old
    """
)

MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan\\.?|Feb\\.?|Mar\\.?|Apr\\.?|Jun\\.?|Jul\\.?|Aug\\.?|Sept?\\.?|Oct\\.?|Nov\\.?|Dec\\.?"
)
WEEKDAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
MONTH_WORDS = _words(
    "January February March April May June July August September October November December "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday"
)

_ORDINAL = r"(?:st|nd|rd|th)?"
_DATE_PATTERNS = [
    rf"\b(?:{MONTHS})\s+\d{{1,2}}{_ORDINAL},?\s+\d{{4}}\b",
    rf"\b\d{{1,2}}{_ORDINAL}\s+(?:of\s+)?(?:{MONTHS}),?\s+\d{{4}}\b",
    rf"\b(?:early|mid|late)[\s-](?:{MONTHS})\s+\d{{4}}\b",
    rf"\b(?:{MONTHS})\s+(?:of\s+)?\d{{4}}\b",
    rf"\b(?:{MONTHS})\s+\d{{1,2}}{_ORDINAL}\b(?!\s*(?:,\s*)?\d)",
    rf"\b\d{{1,2}}{_ORDINAL}\s+(?:of\s+)?(?:January|February|March|April|May|June|July|August|"
    rf"September|October|November|December)\b",
    r"\b\d{4}-\d{2}-\d{2}\b",
    r"\b\d{1,2}/\d{1,2}/\d{2,4}\b",
    rf"\b(?:{WEEKDAYS})\b",
    r"\b(?:1[5-9]\d\d|20\d\d)s?\b(?![%\d])",
]
DATE_RE = re.compile("|".join(f"(?:{p})" for p in _DATE_PATTERNS))

_TOKEN = r"(?:[A-Z][\w'’&.-]*[\w.]|[A-Z]|[A-Z]\.)"
_CONNECTOR = r"(?:of|of\s+the|de|da|dos|van|von|der|den|del|la|le|du|al|bin|&)"
_CONNECTOR_WORDS = _words("of the de da dos van von der den del la le du al bin &")
SPAN_RE = re.compile(rf"{_TOKEN}(?:(?:\s+{_CONNECTOR})?\s+{_TOKEN})*")

_PLACE_CUE = re.compile(
    r"\b(?:in|near|outside|across|throughout|to)\s+(?:suburban\s+|rural\s+|downtown\s+)?\Z"
)

PRONOUN_RE = re.compile(r"\b(?:He|She|he|she)\b")

_ABBREVIATIONS = _words(
    "Mr Mrs Ms Dr Prof St Jr Sr Inc Corp Co Ltd Mt Gen Sen Rep Gov Lt Col Capt Sgt No vs etc "
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Ave Bros U.S U.K D.C"
)

# --- sentences ------------------------------------------------------------------------------

_BOUNDARY = re.compile(r"[.!?][\"'”’)]*\s+(?=[\"'“‘(]?[A-Z0-9])")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans (start, end) that quote the text verbatim; abbreviations do not split."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        before = text[start : match.start() + 1]
        last = re.search(r"([\w.]+)\.$", before)
        if last:
            word = last.group(1)
            following = text[match.end() :].split(maxsplit=1)
            starts_sentence = bool(following) and following[0].strip("\"'“‘(") in STOPWORDS
            if (word in _ABBREVIATIONS or (len(word) == 1 and word.isupper())) and not (
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


# --- mentions -------------------------------------------------------------------------------


@dataclass
class Mention:
    start: int
    end: int
    text: str
    type: str | None
    sentence: int
    key: str = ""  # canonical entity name
    pronoun: bool = False
    honorific: bool = False
    weak: bool = False  # typed by the "capitalised words" fallback; a relation cue may retype


@dataclass
class _EntityInfo:
    name: str
    type: str | None
    start: int
    end: int
    sentence: int


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
        titles = not rest or rest[0] not in _CONNECTOR_WORDS
        if word in HONORIFICS or word.rstrip(".") in HONORIFICS:
            honorific = titles
        elif word in ROLE_PREFIXES:
            role = titles
        elif word not in STOPWORDS and word not in MONTH_WORDS and word not in _CONNECTOR_WORDS:
            break
        start += m.end()
    while True:
        m = re.search(r"\s+([\w&]+)$", text[start:end])
        if not (m and m.group(1) in _CONNECTOR_WORDS):
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
    last = span.split()[-1]
    return (
        last in ORG_SUFFIXES
        or last in _ABBREVIATIONS
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
    cuts = sorted((x, y) for x, y in taken if x < end and y > start)
    pos = start
    for x, y in cuts:
        if x > pos:
            yield pos, x
        pos = max(pos, y)
    if pos < end:
        yield pos, end


# --- relationships --------------------------------------------------------------------------

# Job words for "X, a <job> at Y": a closed list keeps "a native of", "the victim of" out.
_JOB = (
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
_W = r"[\w\s,'’-]"


@dataclass(frozen=True)
class _Pattern:
    rel: str
    between: re.Pattern[str]
    source: frozenset[str]
    target: frozenset[str]
    reverse: bool = False  # the relation reads from the second mention to the first
    tail: re.Pattern[str] | None = None  # must follow the second mention ("are siblings")
    strict: bool = False  # both mentions must already have a firm type (weak cues are not enough)
    regional: bool = False  # the target must be a known country / state / region


def _p(
    rel: str,
    between: str,
    source: Iterable[str],
    target: Iterable[str],
    *,
    reverse: bool = False,
    tail: str | None = None,
    strict: bool = False,
    regional: bool = False,
) -> _Pattern:
    return _Pattern(
        rel,
        re.compile(between),
        frozenset(source),
        frozenset(target),
        reverse,
        re.compile(tail) if tail else None,
        strict,
        regional,
    )


_P, _O, _L = {PERSON}, {ORG}, {LOC}
_WHO = (
    r"^\s*,?\s*(?:who\s+|which\s+|that\s+)?(?:(?:has|had|have)\s+)?"
    r"(?:also\s+|now\s+|still\s+|later\s+)?"
)
_IS = r"(?:is|was|has\s+been|had\s+been|became|becomes|remains|served\s+as|serves\s+as)\s+"
_APPOS = rf"^\s*(?:,\s*|\s+{_IS})(?:(?:now|also|currently|formerly|later)\s+)?"
_ART = r"(?:an?|the|his|her|their|its)\s+"
# Lowercase words before a name: "married the painter X", "works for the shipping firm X".
_NP = r"(?:(?:the|a|an|his|her|their|its)\s+)?(?:[a-z][a-z-]*\s+){0,3}?"
_POSS = r"^(?:'s|’s|\s+and\s+(?:his|her|their))\s+"
_AGE = r"(?:younger\s+|older\s+|elder\s+|twin\s+|little\s+|big\s+)?"
_ROLE = (
    r"(?:CEO|chief\s+[a-z]+\s+officer|president|chairman|chairwoman|director|manager|head|"
    r"founder|employee|engineer|lead\s+[a-z]+)"
)

# Checked in order; the first pattern that matches the text between two mentions wins.
PATTERNS: list[_Pattern] = [
    # family and partners
    _p("married_to", rf"{_WHO}(?:(?:is|was|got|had\s+been)\s+)?married\s+(?:to\s+)?{_NP}$", _P, _P),
    _p("married_to", rf"{_APPOS}{_ART}?(?:wife|husband|spouse|partner)\s+of\s+$", _P, _P),
    _p("married_to", rf"{_POSS}(?:wife|husband|spouse),?\s+$", _P, _P),
    _p("married_to", r"^\s+and\s+$", _P, _P, tail=r"^\s+(?:are|were|got|have\s+been)\s+married"),
    _p("sibling_of", rf"{_APPOS}{_ART}?{_AGE}(?:sister|brother|sibling)\s+of\s+{_NP}$", _P, _P),
    _p("sibling_of", rf"{_POSS}{_AGE}(?:sister|brother|sibling),?\s+$", _P, _P),
    _p(
        "sibling_of",
        r"^\s+and\s+$",
        _P,
        _P,
        tail=r"^\s+(?:are|were)\s+(?:[a-z]+\s+)?(?:siblings|sisters|brothers|twins)",
    ),
    _p("parent_of", rf"{_APPOS}{_ART}?(?:mother|father|parent)\s+of\s+{_NP}$", _P, _P),
    _p("parent_of", rf"{_POSS}(?:son|daughter|child|kid)s?,?\s+$", _P, _P),
    _p("child_of", rf"{_APPOS}{_ART}?(?:son|daughter|child)\s+of\s+{_NP}$", _P, _P),
    _p("child_of", rf"{_POSS}(?:mother|father|parents?),?\s+$", _P, _P),
    _p("colleague_of", rf"{_APPOS}{_ART}?(?:colleague|co-worker|coworker)\s+of\s+$", _P, _P),
    _p(
        "colleague_of",
        rf"{_WHO}(?:works|worked|working)\s+(?:closely\s+)?(?:with|alongside)\s+$",
        _P,
        _P,
    ),
    _p("colleague_of", r"^(?:'s|’s)\s+(?:colleague|co-worker|coworker),?\s+$", _P, _P),
    _p(
        "colleague_of",
        r"^\s+and\s+$",
        _P,
        _P,
        tail=r"^\s+(?:are|were|have\s+been)\s+(?:[a-z]+\s+)?(?:colleagues|co-workers|coworkers)",
    ),
    # places
    _p("born_in", rf"{_WHO}(?:(?:was|were)\s+)?born\b{_W}{{0,40}}?\bin\s+(?:the\s+)?$", _P, _L),
    _p("died_in", rf"{_WHO}died\b{_W}{{0,40}}?\b(?:in|at)\s+(?:the\s+)?$", _P, _L),
    _p(
        "lived_in",
        rf"{_WHO}(?:(?:is|was)\s+)?(?:live|lives|lived|living|resides|resided|grew\s+up|settled|"
        r"moved|relocated)\s+(?:[a-z]+\s+)?(?:in|to)\s+(?:the\s+)?$",
        _P,
        _L,
    ),
    _p(
        "located_in",
        rf"{_WHO}(?:(?:is|was|are|were)\s+)?(?:located|situated|based|headquartered|found)\s+in\s+(?:the\s+)?$",
        _O | _L,
        _L,
    ),
    _p(
        "located_in",
        rf"{_WHO}(?:has|had)\s+(?:its\s+)?(?:headquarters|head\s+office|main\s+office|offices?|base)\s+in\s+$",
        _O,
        _L,
    ),
    _p(
        "located_in",
        rf"{_APPOS}{_ART}?(?:[a-z]+\s+)?(?:city|town|village|capital|region|province|state|country|"
        r"district|neighbou?rhood|suburb|island|port|area)\s+(?:located\s+)?(?:in|of)\s+(?:the\s+)?$",
        _L,
        _L,
    ),
    # "X, a survey firm based in Y", "X, a studio in Y"
    _p(
        "located_in",
        r"^\s*,\s*(?:an?|the)\s+(?:[a-z][a-z-]*\s+){1,3}(?:(?:located|based|headquartered)\s+)?in\s+$",
        _O,
        _L,
    ),
    _p(
        "located_in",
        r"^(?:'s|’s)\s+(?:headquarters|head\s+office|offices?|campus|factory|base)\s+(?:is|are|was|were)\s+in\s+$",
        _O,
        _L,
    ),
    _p("located_in", r"^\s*,\s*$", _L | _O, _L, strict=True, regional=True),
    _p("located_in", r"^\s+in\s+(?:the\s+)?$", _L, _L, strict=True),
    # organisations
    _p(
        "created_by",
        rf"{_WHO}(?:co-?founded|founded|established|created|started|launched|set\s+up)\s+{_NP}$",
        _P,
        _O,
        reverse=True,
    ),
    _p(
        "created_by",
        r"^\s*,?\s*(?:which\s+|that\s+)?(?:(?:is|was|were)\s+)?(?:co-?founded|founded|established|"
        r"created|started|set\s+up)\s+(?:[a-z]+\s+)?by\s+$",
        _O,
        _P,
    ),
    _p(
        "created_by",
        rf"{_APPOS}{_ART}?(?:co-?founder|founder|creator)\s+of\s+{_NP}$",
        _P,
        _O,
        reverse=True,
    ),
    _p("owns", rf"{_WHO}(?:owns|owned|own|acquired|bought|purchased)\s+{_NP}$", _P | _O, _O),
    _p("owns", rf"{_APPOS}{_ART}?(?:owner|proprietor)\s+of\s+{_NP}$", _P | _O, _O),
    _p(
        "owns",
        r"^\s*,?\s*(?:which\s+|that\s+)?(?:is|was|are|were)\s+(?:[a-z]+\s+)?(?:owned|acquired|bought)\s+by\s+$",
        _O,
        _P | _O,
        reverse=True,
    ),
    _p("joined", rf"{_WHO}(?:rejoined|joined)\s+{_NP}$", _P, _O),
    _p(
        "member_of",
        rf"{_WHO}(?:(?:is|was)\s+)?(?:plays\s+for|played\s+for|belongs\s+to|belonged\s+to|"
        rf"sings\s+(?:with|in)|sang\s+(?:with|in)|plays\s+(?:with|in))\s+{_NP}$",
        _P,
        _O,
    ),
    _p("member_of", rf"{_APPOS}{_ART}?(?:[a-z]+\s+)?member\s+of\s+{_NP}$", _P, _O),
    _p(
        "manages",
        rf"{_WHO}(?:manages|managed|runs|ran|leads|led|heads|headed|directs|directed|oversees|"
        rf"oversaw|chairs|chaired)\s+{_NP}$",
        _P,
        _O,
    ),
    _p("employs", rf"{_WHO}(?:employs|employed|hired|hires|recruited)\s+{_NP}$", _O, _P),
    _p(
        "employed_by",
        rf"{_WHO}(?:(?:is|was)\s+)?(?:employed|hired|recruited)\s+by\s+{_NP}$",
        _P,
        _O,
    ),
    _p(
        "employed_by",
        rf"{_WHO}(?:(?:is|was)\s+)?(?:works|worked|working|work|teaches|taught|studies|studied|"
        rf"interned|consults)\b{_W}{{0,40}}?\b(?:for|at)\s+{_NP}$",
        _P,
        _O,
    ),
    _p(
        "employed_by",
        rf"{_APPOS}{_ART}?(?:[\w-]+\s+){{0,3}}?{_JOB}\s+(?:at|for|of|with)\s+{_NP}$",
        _P,
        _O,
    ),
    _p("employed_by", rf"^(?:'s|’s)\s+(?:new\s+|former\s+)?{_ROLE}\s*,?\s+$", _O, _P, reverse=True),
]


def _type_ok(mention: Mention, allowed: frozenset[str]) -> bool:
    return mention.type in allowed or mention.type is None or mention.weak


def _retype(mention: Mention, allowed: frozenset[str]) -> None:
    if (mention.type is None or mention.weak) and mention.type not in allowed and len(allowed) == 1:
        mention.type = next(iter(allowed))
        mention.weak = False


_GROUP_WORDS = _words(
    "Party Club Union League Team Band Committee Council Society Association Federation "
    "Alliance Orchestra Choir Board Guild Chapter Caucus Coalition Movement Congress Senate"
)


@dataclass(frozen=True)
class _Found:
    rel: str
    source: Mention
    target: Mention
    sentence: int


_AND = re.compile(r"^\s*(?:,\s*|,?\s+and\s+|,?\s+&\s+)$")
_PREDICATE_AND = re.compile(r"^\s*,?\s+and\s+")


def _match(pattern: _Pattern, a: Mention, b: Mention, between: str, tail: str) -> bool:
    if not pattern.between.search(between):
        return False
    if pattern.tail and not pattern.tail.search(tail):
        return False
    if b.pronoun:
        return False
    if pattern.regional and (b.text not in REGIONS or a.text in REGIONS):
        return False  # "Berlin, Germany" yes; "Colombia, Bolivia" (a list) no
    # ``source`` / ``target`` constrain the mentions in text order.
    if pattern.strict:
        return _firm(a, pattern.source) and _firm(b, pattern.target)
    return _type_ok(a, pattern.source) and _type_ok(b, pattern.target)


def _firm(mention: Mention, allowed: frozenset[str]) -> bool:
    return mention.type in allowed and not mention.weak


def _coordinated(text: str, items: list[Mention], index: int, step: int) -> list[Mention]:
    """Mentions joined to ``items[index]`` by "and" / commas: "A and B work at C"."""
    out: list[Mention] = []
    here = items[index]
    j = index + step
    while 0 <= j < len(items):
        other = items[j]
        gap = text[other.end : here.start] if step < 0 else text[here.end : other.start]
        if other.type != here.type or other.pronoun or not _AND.match(gap):
            break
        if here.type == LOC and "and" not in gap and "&" not in gap:
            break  # "Berlin, Germany" is one place, not two
        out.append(other)
        here = other
        j += step
    return out


def find_relationships(
    text: str, mentions: list[Mention], sentences: list[tuple[int, int]]
) -> list[_Found]:
    """The first matching pattern between each ordered pair of mentions in a sentence.

    Coordinated names share the relation ("A and B work at C", "founded by A and B"), and a
    second predicate keeps the sentence's subject ("A was born in X and died in Y").
    """
    found: list[_Found] = []
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
                pattern = next(
                    (p for p in PATTERNS if _match(p, a, b, between, text[b.end : sent_end])), None
                )
                if pattern is None and _PREDICATE_AND.match(between) and a.type != PERSON:
                    rest = _PREDICATE_AND.sub(" ", between, count=1)
                    people = [m for m in items[:i] if m.type == PERSON and not m.pronoun]
                    if people:
                        subject = people[0]
                        pattern = next(
                            (
                                p
                                for p in PATTERNS
                                if p.between.pattern.startswith(_WHO)
                                and _match(p, subject, b, rest, text[b.end : sent_end])
                            ),
                            None,
                        )
                if pattern is None:
                    continue
                rel = pattern.rel
                if rel == "joined":  # a party or a club: membership; else a job
                    rel = "member_of" if b.text.split()[-1] in _GROUP_WORDS else "employed_by"
                _retype(subject, pattern.source)
                _retype(b, pattern.target)
                lefts = [subject, *(_coordinated(text, items, i, -1) if subject is a else [])]
                rights = [b, *_coordinated(text, items, k, +1)]
                if pattern.tail is not None:  # "A and B are siblings": the pair itself
                    lefts, rights = [subject], [b]
                for left in lefts:
                    for right in rights:
                        first, second = (right, left) if pattern.reverse else (left, right)
                        found.append(_Found(rel, first, second, si))
    return found


# --- the extractor --------------------------------------------------------------------------

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


def _resolve(mentions: list[Mention]) -> dict[str, _EntityInfo]:
    """Merge mentions into entities: full names first, then surnames / short org names."""
    entities: dict[str, _EntityInfo] = {}
    for m in mentions:
        if m.pronoun or m.type is None or (len(m.text.split()) < 2 and m.type == PERSON):
            continue
        if m.key not in entities:
            entities[m.key] = _EntityInfo(m.key, m.type, m.start, m.end, m.sentence)
    for name in list(entities):  # "Horizon Robotics" and "Horizon Robotics Inc." are one
        if _org_alias(name, entities) is not None:
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
            alias = _alias(m.text, entities) or _org_alias(m.text, entities)
            if alias is not None:
                m.key, m.type = alias.name, alias.type
            elif m.type is not None:
                entities[m.key] = _EntityInfo(m.key, m.type, m.start, m.end, m.sentence)
        if m.type == PERSON:
            last_person = m
    return entities


def _alias(name: str, entities: dict[str, _EntityInfo]) -> _EntityInfo | None:
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


def _org_alias(name: str, entities: dict[str, _EntityInfo]) -> _EntityInfo | None:
    """'Horizon Robotics' for 'Horizon Robotics Inc.': the same name without legal suffixes."""
    for info in entities.values():
        if info.type != ORG or not info.name.startswith(name + " "):
            continue
        rest = info.name[len(name) :].split()
        if rest and all(word.strip(",") in ORG_SUFFIXES for word in rest):
            return info
    return None


def extract_baseline(text: str, schema: Schema | None = None) -> Extraction:
    """The baseline's answer for one text."""
    sentences = split_sentences(text)
    mentions = find_mentions(text, sentences)
    _resolve(mentions)
    relations = find_relationships(text, mentions, sentences)
    entities = _resolve(mentions)  # types learnt from relation patterns join in

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
