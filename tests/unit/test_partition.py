"""The shard partition: stable (a fixed id is in a fixed shard, checked by hand), covering
every item exactly once, independent of order; bad shard specs refused naming ``shard``."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from extraction_eval.datasets.bundled import sample_items
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.partition import (
    Shard,
    dataset_fingerprint,
    parse_shard,
    shard_of,
)


def test_a_fixed_id_is_in_a_fixed_shard_checked_by_hand() -> None:
    # `printf sample-001 | sha256sum` starts bd2b148bb03fe215 (the 8 bytes the shard uses).
    assert hashlib.sha256(b"sample-001").hexdigest()[:16] == "bd2b148bb03fe215"
    # mod 2: the last of the 16 hex digits, 5, is odd -> remainder 1 -> shard 2 of 2.
    assert shard_of("sample-001", 2) == 2
    # mod 3 (16 = 1 mod 3): digit sum b+d+2+b+1+4+8+b+b+0+3+f+e+2+1+5 = 112 = 1 mod 3 -> 2 of 3.
    assert shard_of("sample-001", 3) == 2
    # sample-002 starts 93dd364bc60e480a: a is even -> 1 of 2; digit sum 116 = 2 mod 3 -> 3 of 3.
    assert hashlib.sha256(b"sample-002").hexdigest()[:16] == "93dd364bc60e480a"
    assert shard_of("sample-002", 2) == 1
    assert shard_of("sample-002", 3) == 3
    assert shard_of("anything", 1) == 1


def test_the_partition_does_not_depend_on_the_process() -> None:
    """Python's hash() is salted per process; the shard must not be."""
    code = "from extraction_eval.experiments.partition import shard_of; print(shard_of('x-17', 7))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert seen == {str(shard_of("x-17", 7))}


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_shards_cover_every_item_exactly_once_whatever_the_order(count: int) -> None:
    items = sample_items()
    shards = [Shard(i, count).select(items) for i in range(1, count + 1)]
    ids = [item.id for shard in shards for item in shard]
    assert sorted(ids) == sorted(item.id for item in items)  # each exactly once
    for i, shard in enumerate(shards, start=1):
        assert [x.id for x in Shard(i, count).select(reversed(items))] == [
            x.id for x in reversed(shard)
        ]
        assert [x.id for x in shard] == [x.id for x in items if x in shard]  # dataset order
    if count > 1:
        assert all(shards), "48 items in <= 7 shards: none empty"


@pytest.mark.parametrize("spec", ["0/2", "3/2", "1/0", "0/0", "half", "1-2", "", "-1/2", "1/2/3"])
def test_bad_shard_specs_are_refused_naming_the_field(spec: str) -> None:
    with pytest.raises(InvalidValue) as info:
        parse_shard(spec)
    assert info.value.field == "shard" and "1 <= I <= N" in info.value.problem


def test_good_specs_and_the_config_field() -> None:
    assert parse_shard(" 2 / 4 ") == Shard(2, 4) and str(Shard(2, 4)) == "2/4"
    assert RunConfig(shard=Shard(1, 1)).shard == Shard(1, 1)
    with pytest.raises(InvalidValue) as info:
        RunConfig(shard="1/2")  # type: ignore[arg-type]
    assert info.value.field == "shard"
    with pytest.raises(InvalidValue):
        Shard(True, 2)  # type: ignore[arg-type]


def test_the_fingerprint_changes_with_any_item() -> None:
    items = sample_items()
    edited = [items[0].model_copy(update={"text": items[0].text + " More."}), *items[1:]]
    assert dataset_fingerprint(items) == dataset_fingerprint(list(items))
    assert dataset_fingerprint(edited) != dataset_fingerprint(items)
    assert dataset_fingerprint(items[::-1]) != dataset_fingerprint(items)
