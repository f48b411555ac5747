"""Schema-declared attributes: which predicted objects break their type's declaration.

A violation (an undeclared key, or a value outside the declared values) is a schema failure of
that one object, not of the item: the item is still scored, and the offending value is kept,
so on a matched pair it counts as disagreeing with the gold value (a valid gold value can never
equal a value outside the declaration). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from extraction_eval.types import Entity, Relationship, Schema

Kind = Literal["entity", "relationship"]
Reason = Literal["undeclared key", "value not allowed"]


@dataclass(frozen=True, slots=True)
class AttributeViolation:
    """One attribute of one predicted object that its type's declaration does not allow."""

    kind: Kind
    index: int  # into the item's predicted entities / relationships
    type: str
    key: str
    value: str
    reason: Reason

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "index": self.index,
            "type": self.type,
            "key": self.key,
            "value": self.value,
            "reason": self.reason,
        }

    def describe(self) -> str:
        return f"{self.kind}[{self.index}] ({self.type}) {self.key}={self.value!r}: {self.reason}"


def check_attributes(
    schema: Schema | None,
    entities: Sequence[Entity],
    relationships: Sequence[Relationship],
) -> tuple[int, tuple[AttributeViolation, ...]]:
    """(predicted objects whose type declares attributes, their violations).

    Objects of types without a declaration are not checked (their attributes stay free-form).
    A declared key the object leaves out is not a violation: it is simply not said (on a
    matched pair it then disagrees with the gold value).
    """
    if schema is None or not schema.has_attributes:
        return 0, ()
    checked = 0
    out: list[AttributeViolation] = []
    objects: list[tuple[Kind, int, str, dict[str, str]]] = [
        ("entity", i, e.type, e.attributes) for i, e in enumerate(entities)
    ] + [("relationship", i, r.type, r.attributes) for i, r in enumerate(relationships)]
    for kind, index, type_name, attributes in objects:
        declared = schema.declared_for(kind, type_name)
        if declared is None:
            continue
        checked += 1
        for key in sorted(attributes):
            value = attributes[key]
            if key not in declared:
                out.append(AttributeViolation(kind, index, type_name, key, value, "undeclared key"))
            elif value not in declared[key]:
                out.append(
                    AttributeViolation(kind, index, type_name, key, value, "value not allowed")
                )
    return checked, tuple(out)


def violating_objects(violations: Sequence[AttributeViolation]) -> int:
    """Objects with at least one violation (an object with two bad keys counts once)."""
    return len({(v.kind, v.index) for v in violations})
