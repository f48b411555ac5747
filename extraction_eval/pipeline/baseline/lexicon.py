"""The baseline's vocabulary: entity labels, gazetteers, cue words and date patterns.

Everything the extractor "knows" about English names lives here, as plain data, so the
rules in ``mentions`` and ``relations`` stay readable and the lists can grow without touching
them. The lists are small on purpose: this is a baseline, not a knowledge base.
"""

from __future__ import annotations

import re

PERSON, ORG, LOC, DATE = "person", "organization", "location", "date"


def _words(text: str) -> frozenset[str]:
    """A whitespace-separated word list as a set (the lists below read like prose)."""
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


def _phrases(text: str) -> frozenset[str]:
    """Multi-word names, one per ``|``: "New York" must stay one entry."""
    return frozenset(x.strip() for x in text.replace("\n", "").split("|") if x.strip())


# Countries, US states and a few provinces and continents: the "Y" of "X, Y".
REGIONS = _phrases(
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

CITIES = _phrases(
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
_ORDINAL_SUFFIX = r"(?:st|nd|rd|th)?"
_DATE_PATTERNS = [
    rf"\b(?:{MONTHS})\s+\d{{1,2}}{_ORDINAL_SUFFIX},?\s+\d{{4}}\b",
    rf"\b\d{{1,2}}{_ORDINAL_SUFFIX}\s+(?:of\s+)?(?:{MONTHS}),?\s+\d{{4}}\b",
    rf"\b(?:early|mid|late)[\s-](?:{MONTHS})\s+\d{{4}}\b",
    rf"\b(?:{MONTHS})\s+(?:of\s+)?\d{{4}}\b",
    rf"\b(?:{MONTHS})\s+\d{{1,2}}{_ORDINAL_SUFFIX}\b(?!\s*(?:,\s*)?\d)",
    rf"\b\d{{1,2}}{_ORDINAL_SUFFIX}\s+(?:of\s+)?"
    rf"(?:January|February|March|April|May|June|July|August|"
    rf"September|October|November|December)\b",
    r"\b\d{4}-\d{2}-\d{2}\b",
    r"\b\d{1,2}/\d{1,2}/\d{2,4}\b",
    rf"\b(?:{WEEKDAYS})\b",
    r"\b(?:1[5-9]\d\d|20\d\d)s?\b(?![%\d])",
]
DATE_RE = re.compile("|".join(f"(?:{p})" for p in _DATE_PATTERNS))

# Abbreviations whose period does not end a sentence (and is kept on a name: "Acme Co.").
ABBREVIATIONS = _words(
    "Mr Mrs Ms Dr Prof St Jr Sr Inc Corp Co Ltd Mt Gen Sen Rep Gov Lt Col Capt Sgt No vs etc "
    "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Ave Bros U.S U.K D.C"
)

# Particles inside a name ("Bank of England", "van Gogh"), never a name's edge.
NAME_CONNECTOR_WORDS = _words("of the de da dos van von der den del la le du al bin &")

# The last word of a group one *joins* as a member (else "joined X" is a job).
GROUP_WORDS = _words(
    "Party Club Union League Team Band Committee Council Society Association Federation "
    "Alliance Orchestra Choir Board Guild Chapter Caucus Coalition Movement Congress Senate"
)
