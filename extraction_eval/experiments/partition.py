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
import os
import re
from collections.abc import Iterable, Mapping
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


def parse_shard(
    spec: str, *, count: int | None = None, env: Mapping[str, str] | None = None
) -> Shard:
    """``"2/4"`` -> ``Shard(2, 4)``; ``"auto"`` -> :func:`shard_from_env` (``count``: the
    number of shards when the orchestrator does not say it); anything else is an
    ``InvalidValue`` naming ``shard``."""
    if spec.strip().lower() == AUTO:
        return shard_from_env(env, count=count)
    if count is not None:
        raise InvalidValue(
            "shard_count", f"is only read with {{shard}} {AUTO}", mentions=("shard",)
        )
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise InvalidValue("shard", f"{_HOW} or {AUTO}, got {spec!r}")
    return Shard(int(match.group(1)), int(match.group(2)))


def resolve_shard(
    spec: str | None, *, count: int | None = None, env: Mapping[str, str] | None = None
) -> Shard | None:
    """The shard asked for (``I/N`` or ``auto``), or None; ``count`` alone is refused (it
    only completes ``auto``)."""
    if spec is None:
        if count is not None:
            raise InvalidValue(
                "shard_count", f"is only read with {{shard}} {AUTO}", mentions=("shard",)
            )
        return None
    return parse_shard(spec, count=count, env=env)


AUTO = "auto"
# The passthrough for any orchestrator (a GitHub Actions matrix: ${{ strategy.job-index }} and
# ${{ strategy.job-total }}): the index counts from 0, as the orchestrators count.
ENV_SHARD_INDEX = "EXTRACTION_EVAL_SHARD_INDEX"
ENV_SHARD_COUNT = "EXTRACTION_EVAL_SHARD_COUNT"
K8S_INDEX = "JOB_COMPLETION_INDEX"  # a Kubernetes Indexed Job's pod: 0..completions-1
SLURM_ID = "SLURM_ARRAY_TASK_ID"


def shard_from_env(env: Mapping[str, str] | None = None, *, count: int | None = None) -> Shard:
    """This process's shard, from the orchestrator that started it (the first found):

    - ``EXTRACTION_EVAL_SHARD_INDEX`` (from 0) with ``EXTRACTION_EVAL_SHARD_COUNT`` (or
      ``count``): any orchestrator, e.g. a GitHub Actions matrix passing its job index/total;
    - ``JOB_COMPLETION_INDEX`` (a Kubernetes Indexed Job, from 0) with ``count`` or
      ``EXTRACTION_EVAL_SHARD_COUNT`` (the job's ``completions``; a pod cannot read it);
    - ``SLURM_ARRAY_TASK_ID`` of a Slurm job array, counted from ``SLURM_ARRAY_TASK_MIN`` in
      steps of ``SLURM_ARRAY_TASK_STEP``, out of ``SLURM_ARRAY_TASK_COUNT`` (or MIN..MAX).

    A count the orchestrator gives that differs from ``count`` is refused, as is an index
    outside the count: a shard that is not what the orchestrator meant would silently skip or
    repeat items.
    """
    env = os.environ if env is None else env
    if count is not None:
        _number("shard_count", count, minimum=1)
    if _present(env, ENV_SHARD_INDEX):
        index = _env_int(env, ENV_SHARD_INDEX, minimum=0)
        total = _agreed(count, env, ENV_SHARD_COUNT, ENV_SHARD_INDEX)
        return _shard(index, total, ENV_SHARD_INDEX)
    if _present(env, K8S_INDEX):
        index = _env_int(env, K8S_INDEX, minimum=0)
        total = _agreed(count, env, ENV_SHARD_COUNT, K8S_INDEX)
        return _shard(index, total, K8S_INDEX)
    if _present(env, SLURM_ID):
        task = _env_int(env, SLURM_ID, minimum=0)
        low = (
            _env_int(env, "SLURM_ARRAY_TASK_MIN", minimum=0)
            if _present(env, "SLURM_ARRAY_TASK_MIN")
            else 0
        )
        step = (
            _env_int(env, "SLURM_ARRAY_TASK_STEP", minimum=1)
            if _present(env, "SLURM_ARRAY_TASK_STEP")
            else 1
        )
        if _present(env, "SLURM_ARRAY_TASK_COUNT"):
            given: int | None = _env_int(env, "SLURM_ARRAY_TASK_COUNT", minimum=1)
        elif _present(env, "SLURM_ARRAY_TASK_MAX"):
            given = (_env_int(env, "SLURM_ARRAY_TASK_MAX", minimum=low) - low) // step + 1
        else:
            given = None
        if task < low or (task - low) % step:
            raise InvalidValue(
                "shard",
                f"{AUTO}: {SLURM_ID}={task} is not MIN {low} plus a multiple of STEP {step}",
            )
        total = _total(count, given, "SLURM_ARRAY_TASK_COUNT / MIN..MAX", SLURM_ID)
        return _shard((task - low) // step, total, SLURM_ID)
    raise InvalidValue(
        "shard",
        f"{AUTO} found no orchestrator's shard in the environment ({ENV_SHARD_INDEX},"
        f" {K8S_INDEX} or {SLURM_ID}); give I/N instead",
    )


def _present(env: Mapping[str, str], name: str) -> bool:
    return bool(env.get(name, "").strip())


def _env_int(env: Mapping[str, str], name: str, *, minimum: int) -> int:
    raw = env.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise InvalidValue("shard", f"{AUTO}: {name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise InvalidValue("shard", f"{AUTO}: {name} must be at least {minimum}, got {value}")
    return value


def _number(field: str, value: int, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidValue(field, f"must be a whole number >= {minimum}, got {value!r}")


def _agreed(count: int | None, env: Mapping[str, str], name: str, source: str) -> int:
    """The shard count from ``name`` in the environment and/or ``count``: both given must agree."""
    given = _env_int(env, name, minimum=1) if _present(env, name) else None
    return _total(count, given, name, source)


def _total(count: int | None, given: int | None, given_by: str, source: str) -> int:
    if given is not None and count is not None and given != count:
        raise InvalidValue(
            "shard_count", f"is {count} but the environment says {given} ({given_by})"
        )
    total = given if given is not None else count
    if total is None:
        raise InvalidValue(
            "shard_count",
            f"is needed with {{shard}} {AUTO} under {source} (the number of shards, e.g. the"
            f" Indexed Job's completions; or set {ENV_SHARD_COUNT})",
            mentions=("shard",),
        )
    return total


def _shard(index0: int, count: int, source: str) -> Shard:
    if index0 >= count:
        raise InvalidValue(
            "shard", f"{AUTO}: {source} gives shard {index0 + 1} (from 0: {index0}) of {count}"
        )
    return Shard(index0 + 1, count)


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
