"""The per-item object cap: matching compares every predicted object with every gold object
of its kind, so memory and time grow with their product (10,000 x 10,000 entities took 4.5 GB;
50,000 x 50,000 was killed at 22 GB). An item over the cap is that item's error instead."""

from __future__ import annotations

from typing import Any

from extraction_eval.datasets.lines import over_cap
from extraction_eval.errors import OverLimit
from extraction_eval.limits import DEFAULT_MAX_OBJECTS
from extraction_eval.types import Extraction

__all__ = ["DEFAULT_MAX_OBJECTS", "TooManyObjects", "check_object_cap", "over_cap"]


class TooManyObjects(OverLimit):
    """An item's gold or prediction has more objects of one kind than the cap; carries what
    the model call returned (``raw``, ``usage``, ``attempts``) so its row keeps them."""


def check_object_cap(extraction: Extraction, limit: int, *, side: str, **carry: Any) -> None:
    """Raise :class:`TooManyObjects` when ``extraction`` (``side``: gold | prediction) is over
    ``limit`` objects of one kind; ``carry`` goes onto the error (raw, usage, attempts)."""
    found = over_cap(extraction, limit)
    if found is not None:
        raise TooManyObjects(
            f"the {side} has {found}, over the limit of {limit:,} per item"
            " (max_objects; matching would need memory quadratic in the count)",
            **carry,
        )
