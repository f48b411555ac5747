"""An example user pipeline for the bundled ``journal-example`` dataset: offline, deterministic.

A keyword lexicon finds observations (symptom / food / emotion / mind) clause by clause and sets
their attributes from cue words in the same clause. It reads only the text and the item's
schema, never the gold, and it is imperfect on purpose, like a first real attempt:

- one observation per keyword, so a clause with two keywords yields two observations with the
  same evidence (only one can match a gold object);
- attribute cues only look inside the clause ("felt a bit calmer after" does not inherit the
  sentence's "this morning");
- "quite" is mapped to intensity "medium", a value the schema does not declare ("moderate" is):
  an attribute violation that the scores report per object;
- ordinary words ("cold" weather, a shopping list) trigger observations on entries that have
  none.

Run it (see the README, "Schema-declared attributes"):

    extraction-eval datasets upload journal-example
    run-experiment --dataset journal-example --pipeline examples/journal_pipeline.py:run \
        --match span --name journal-v1
"""

from __future__ import annotations

import re
from typing import Any

# keyword (lowercase, matched on word boundaries) -> (observation name, domain)
LEXICON: dict[str, tuple[str, str]] = {
    "headache": ("headache", "symptom"),
    "stomach ache": ("stomach ache", "symptom"),
    "sore throat": ("sore throat", "symptom"),
    "cold": ("cold", "symptom"),
    "jitters": ("jitters", "symptom"),
    "pain": ("pain", "symptom"),
    "heartburn": ("heartburn", "symptom"),
    "tiredness": ("tiredness", "symptom"),
    "sore": ("soreness", "symptom"),
    "dizzy": ("dizzy", "symptom"),
    "migraine": ("migraine", "symptom"),
    "bloated": ("bloated", "symptom"),
    "slept badly": ("slept badly", "symptom"),
    "porridge": ("porridge", "food"),
    "soup": ("soup", "food"),
    "coffee": ("coffee", "food"),
    "almonds": ("almonds", "food"),
    "noodles": ("noodles", "food"),
    "eggs": ("eggs", "food"),
    "pasta": ("pasta", "food"),
    "wine": ("wine", "food"),
    "tea": ("tea", "food"),
    "milk": ("milk", "food"),
    "snack": ("snack", "food"),
    "calm": ("calm", "emotion"),
    "calmer": ("calmer", "emotion"),
    "relief": ("relief", "emotion"),
    "anxious": ("anxious", "emotion"),
    "anxiety": ("anxiety", "emotion"),
    "irritable": ("irritable", "emotion"),
    "sad": ("sad", "emotion"),
    "cheered": ("cheered up", "emotion"),
    "cheerful": ("cheerful", "emotion"),
    "nervous": ("nervous", "emotion"),
    "proud": ("proud", "emotion"),
    "mood": ("mood", "emotion"),
    "thoughts": ("thoughts", "mind"),
    "focus": ("focus", "mind"),
    "concentrate": ("concentration", "mind"),
    "brain fog": ("brain fog", "mind"),
    "forgot": ("forgetfulness", "mind"),
    "replaying": ("rumination", "mind"),
    "mind": ("mind", "mind"),
}

HEDGES = ("might", "maybe", "possibly", "probably", "not sure", "i think")
NEGATIONS = ("no", "not", "never", "without", "skipped", "cut out", "didn't", "couldn't", "don't")
HIGH = ("really", "very", "extremely", "huge", "strong", "pounding", "a lot")
LOW = ("slightly", "a bit", "a little", "mild")
MID = ("quite",)  # mapped to "medium": not a declared value (a deliberate bug, see above)
TIMES = (
    ("morning", ("morning", "breakfast")),
    ("afternoon", ("afternoon", "lunch")),
    ("evening", ("evening", "dinner")),
    ("night", ("night", "tonight")),
)

# Clauses: split on sentence ends, semicolons, and commas.
_CLAUSE = re.compile(r"[^.;!?,]+")


def _has(clause: str, cues: tuple[str, ...]) -> bool:
    lowered = clause.casefold()
    return any(re.search(rf"(?<![a-z']){re.escape(cue)}(?![a-z])", lowered) for cue in cues)


def _attributes(clause: str, domain: str) -> dict[str, str]:
    if _has(clause, HEDGES):
        polarity = "uncertain"
    elif _has(clause, NEGATIONS):
        polarity = "absent"
    else:
        polarity = "present"
    if _has(clause, LOW):
        intensity = "low"
    elif _has(clause, MID):
        intensity = "medium"
    elif _has(clause, HIGH):
        intensity = "high"
    else:
        intensity = "unspecified"
    time = next((name for name, cues in TIMES if _has(clause, cues)), "unspecified")
    return {"domain": domain, "polarity": polarity, "intensity": intensity, "time": time}


def extract(text: str) -> list[dict[str, Any]]:
    """Observations found in ``text``, with the clause as evidence (an exact quote)."""
    out: list[dict[str, Any]] = []
    for match in _CLAUSE.finditer(text):
        clause = match.group().strip()
        if not clause:
            continue
        for keyword, (name, domain) in LEXICON.items():
            if _has(clause, (keyword,)):
                out.append(
                    {
                        "name": name,
                        "type": "observation",
                        "evidence": clause,
                        "attributes": _attributes(clause, domain),
                    }
                )
    return out


def run(*, text: str, **_: Any) -> dict[str, Any]:
    """The ``--pipeline`` entry point: an extraction dict (entities only)."""
    return {"entities": extract(text), "relationships": []}
