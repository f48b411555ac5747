"""The bundled journal example (``journal-example``) is valid gold for its own schema."""

from __future__ import annotations

import io
from importlib import resources
from pathlib import Path

from extraction_eval.datasets.bundled import journal_items
from extraction_eval.datasets.jsonl import read_items, write_items

JOURNAL = Path(str(resources.files("extraction_eval").joinpath("data", "journal_dataset.jsonl")))


def test_size_ids_negatives_and_canonical_form() -> None:
    items, warnings = read_items(JOURNAL)
    assert warnings == []
    assert 15 <= len(items) <= 30
    assert len({i.id for i in items}) == len(items)
    empty = [i for i in items if not i.expected.entities and not i.expected.relationships]
    assert 3 <= len(empty) < len(items) // 2  # negatives, but mostly entries with content
    buf = io.StringIO()
    write_items(items, buf)
    assert buf.getvalue() == JOURNAL.read_text(encoding="utf-8")  # export gives the same bytes
    assert [i.id for i in journal_items()] == [i.id for i in items]


def test_every_object_is_grounded_and_every_attribute_is_declared() -> None:
    for item in journal_items():
        schema = item.schema_
        assert schema is not None and schema.attributes, item.id
        assert item.expected.relationships == []
        for e in item.expected.entities:
            assert e.evidence and e.evidence in item.text, (item.id, e.evidence)  # exact quote
            declared = schema.declared_for("entity", e.type)
            assert declared is not None, (item.id, e.type)
            # every declared key is set, and only to an allowed value
            assert set(e.attributes) == set(declared), (item.id, e.name)
            for key, value in e.attributes.items():
                assert value in declared[key], (item.id, e.name, key, value)


def test_every_declared_value_of_polarity_and_domain_is_used() -> None:
    """The example exercises the enums, not just their most common value."""
    items = journal_items()
    seen: dict[str, set[str]] = {}
    for item in items:
        for e in item.expected.entities:
            for key, value in e.attributes.items():
                seen.setdefault(key, set()).add(value)
    schema = items[0].schema_
    assert schema is not None
    declared = schema.attributes["observation"]
    for key in ("polarity", "domain"):
        assert seen[key] == set(declared[key]), key
