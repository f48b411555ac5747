"""A naive pipeline of your own, for the README's tour: a second run that really differs.

It reads only the text (never the gold): every run of capitalised words is an entity, typed
by its last word (a company or club word: organization; a place word or ``in X``: location;
otherwise person), and a year or ``3 March 1961`` is a date. It finds no relationships. Run it
beside the offline baseline and compare the two:

    run-experiment --name names-v1 --pipeline examples/names_pipeline.py:run
    extraction-eval compare baseline-v1 names-v1
"""

from __future__ import annotations

import re
from typing import Any

ORG_WORDS = {"Analytics", "Club", "Company", "Institute", "University", "Press", "Bank", "Trust"}
NAME = re.compile(r"\b[A-Z][\w-]+(?: [A-Z][\w-]+)*")
DATE = re.compile(r"\b(?:\d{1,2} [A-Z][a-z]+ )?(?:1[89]|20)\d\d\b")


def _type(name: str, text: str, start: int) -> str:
    """organization / location / person from the name's last word and the word before it."""
    if name.split()[-1] in ORG_WORDS:
        return "organization"
    if re.search(r"\b(?:in|at|near|from) $", text[:start]):
        return "location"
    return "person"


def run(*, text: str, **_: Any) -> dict[str, Any]:
    """The entities of one text; ``relationships`` is always empty."""
    entities: dict[str, dict[str, str]] = {}
    for found in DATE.finditer(text):
        entities.setdefault(found.group(), {"type": "date"})
    for found in NAME.finditer(text):
        name = found.group()
        if (found.start() == 0 and " " not in name) or DATE.fullmatch(name):
            continue  # a sentence's first word alone: most often not a name
        entities.setdefault(name, {"type": _type(name, text, found.start())})
    return {
        "entities": [{"name": n, "type": e["type"], "evidence": n} for n, e in entities.items()],
        "relationships": [],
    }
