"""Shards: a deterministic partition of a dataset's items by a stable hash of the item id.

Shard ``i/N`` (``1 <= i <= N``, numbered from 1 like Playwright's ``--shard=1/3``) holds the
items whose id hashes to ``i``: ``int.from_bytes(sha256(id as UTF-8)[:8], "big") % N + 1``.
SHA-256, not Python's ``hash()`` (salted per process), so every process and machine puts an
item in the same shard; the shards cover the items exactly once whatever their order, and an
item keeps its shard when others are added. (Hand check: the first 8 bytes of the digest are
its first 16 hex digits; modulo 2 is the parity of the 16th digit, modulo 3 the sum of the 16
digits modulo 3.)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from extraction_eval.backends.base import canonical_json, item_content_hash
from extraction_eval.errors import InvalidValue
from extraction_eval.types import DatasetItem

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
_HOW = "expects I/N with 1 <= I <= N (shards are numbered from 1, e.g. 1/4)"


def shard_of(item_id: str, count: int) -> int:
    """The shard (1..count) that holds ``item_id``."""
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based); refuses impossible values on construction."""

    index: int
    count: int

    def __post_init__(self) -> None:
        for value in (self.index, self.count):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidValue("shard", f"{_HOW}, got {self.index!r}/{self.count!r}")
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise InvalidValue("shard", f"{_HOW}, got {self}")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, item_id: str) -> bool:
        return shard_of(item_id, self.count) == self.index

    def select(self, items: Iterable[DatasetItem]) -> list[DatasetItem]:
        """This shard's items, in dataset order."""
        return [item for item in items if self.holds(item.id)]

    def record(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def parse_shard(spec: str) -> Shard:
    """``"2/4"`` -> ``Shard(2, 4)``; anything else is an ``InvalidValue`` naming ``shard``."""
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise InvalidValue("shard", f"{_HOW}, got {spec!r}")
    return Shard(int(match.group(1)), int(match.group(2)))


def dataset_fingerprint(items: Iterable[DatasetItem]) -> str:
    """One hash of the items a sharded run was cut from (ids, order and content): shards of
    one run must have cut the same items, whatever the stores call the dataset version."""
    return _fingerprint(items)[0]


def _fingerprint(items: Iterable[DatasetItem]) -> tuple[str, int]:
    """(fingerprint, item count) in one pass over a stream: the SHA-256 of the canonical JSON
    list of [id, content hash] rows, fed row by row (the same text ``canonical_json`` gives
    for the whole list, so the hash does not depend on how it was computed)."""
    digest = hashlib.sha256(b"[")
    count = 0
    for item in items:
        row = canonical_json([item.id, item_content_hash(item)])
        digest.update((b"," if count else b"") + row.encode("utf-8"))
        count += 1
    digest.update(b"]")
    return digest.hexdigest(), count


def shard_record(shard: Shard, items: Iterable[DatasetItem]) -> dict[str, Any]:
    """What a shard run records besides the config: its shard, and the whole item set's size
    and fingerprint (checked by ``runs merge`` and ``runs finalize``); ``items`` is read once."""
    fingerprint, count = _fingerprint(items)
    return {
        "shard": shard.record(),
        "dataset_items": count,
        "dataset_fingerprint": fingerprint,
    }
