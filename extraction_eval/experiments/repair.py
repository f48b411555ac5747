"""Text that cannot be stored, made storable before an item's row is written: the runner's
side of ``textsafe``. Whatever was repaired is recorded on the item as a ``text_repaired``
score (its comment names the fields), so a repaired row is never mistaken for a clean one."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_core import PydanticSerializationError

from extraction_eval.textsafe import clean_json_value, clean_optional
from extraction_eval.types import Extraction, ItemResult, Score

REPAIRED_SCORE = "text_repaired"
# An answer that held a configured secret or a token shape, stored masked (``***``): its
# scores count the masked text, so the item says so.
MASKED_SCORE = "secret_masked"


def clean_extraction(extraction: Extraction) -> tuple[Extraction, bool]:
    """The extraction with lone surrogates replaced (U+FFFD), and whether any was."""
    cleaned, dirty, _ = clean_dumped(extraction)
    return cleaned, dirty


def clean_dumped(extraction: Extraction) -> tuple[Extraction, bool, str | None]:
    """:func:`clean_extraction`, with the answer's JSON when it needed no cleaning (the test
    made it: the runner's secret scan reads it instead of dumping the answer again)."""
    try:
        text = extraction.model_dump_json()  # pydantic-core refuses a lone surrogate: a fast test
        return extraction, False, text
    except PydanticSerializationError:
        pass
    cleaned, _ = clean_json_value(extraction.model_dump(mode="python"))
    return Extraction.model_validate(cleaned), True, None


def clean_texts(**texts: str | None) -> tuple[dict[str, str | None], list[str]]:
    """Each text cleaned, and the names of those that needed it."""
    out: dict[str, str | None] = {}
    repaired: list[str] = []
    for name, text in texts.items():
        out[name], changed = clean_optional(text)
        if changed:
            repaired.append(name)
    return out, repaired


def repaired_score(fields: Sequence[str]) -> Score:
    return Score(
        name=REPAIRED_SCORE,
        value=True,
        data_type="BOOLEAN",
        comment="lone UTF-16 surrogates replaced with U+FFFD in: " + ", ".join(fields),
    )


def masked_score(fields: Sequence[str]) -> Score:
    return Score(
        name=MASKED_SCORE,
        value=True,
        data_type="BOOLEAN",
        comment="a configured secret or token-shaped text masked as *** in: " + ", ".join(fields),
    )


def clean_result(result: ItemResult) -> ItemResult | None:
    """The whole result with every string cleaned and the score added; None when it had
    nothing to clean. The last guard before the store, for whatever the runner did not see."""
    data = result.model_dump(mode="python")
    data["counts"] = result.counts
    cleaned, changed = clean_json_value(data)
    if not changed:
        return None
    cleaned["scores"] = [*cleaned["scores"], repaired_score(["result"]).model_dump()]
    return ItemResult.model_validate(cleaned)
