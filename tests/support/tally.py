"""The adversarial suite's tally: what it tried and what held, added up over the session (and
over pytest-xdist's workers by the root conftest), printed at the end of every run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class Tally:
    """Counts across the whole session (one instance, shared by every adversarial test)."""

    inputs_tried: int = 0
    inputs_held: int = 0
    faults_injected: int = 0
    items_lost: int = 0
    secrets_found: int = 0

    def input(self, held: bool) -> None:
        """One hostile input tried; held = handled as documented (clear error, nothing lost)."""
        self.inputs_tried += 1
        self.inputs_held += int(held)

    def faults(self, injected: int, lost: int) -> None:
        """Faults injected into one run and the items that run lost (rows missing)."""
        self.faults_injected += injected
        self.items_lost += lost

    def secrets(self, found: int) -> None:
        """Secret values found in an output (store, logs, exports, report, LangFuse body)."""
        self.secrets_found += found

    def add(self, other: dict[str, Any]) -> None:
        """Another process's counts (an xdist worker's ``asdict``) added to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + int(other.get(f.name, 0)))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def line(self) -> str | None:
        """The summary line; None when no adversarial test ran."""
        if not (self.inputs_tried or self.faults_injected or self.secrets_found):
            return None
        return (
            f"adversarial: inputs tried {self.inputs_tried} / held {self.inputs_held}; "
            f"faults injected {self.faults_injected} / items lost {self.items_lost}; "
            f"secrets found in outputs {self.secrets_found}"
        )


TALLY = Tally()
