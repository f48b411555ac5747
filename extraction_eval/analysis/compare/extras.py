"""What ``compare`` adds beside the paired figures when asked: PPI-corrected figures
(``--human``), judged figures with their paired Δ (``--judge``), the protocols' blocks
(``--protocol``). One value, so the JSON and the tables show the same blocks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from extraction_eval.analysis.compare.ppi import RunPPI

__all__ = ["CompareExtras"]


@dataclass(frozen=True, slots=True)
class CompareExtras:
    """The optional blocks of one comparison; each empty (or ``None``) when not asked for."""

    ppi: list[RunPPI] = field(default_factory=list)  # one per run, A then B
    judged: dict[str, Any] = field(default_factory=dict)  # run name -> judged block
    judged_paired: Any = None  # B against A on the judged figures
    protocols: dict[str, Any] = field(default_factory=dict)  # "a", "b", "paired"

    def json_blocks(self) -> dict[str, Any]:
        """The keys ``compare --format json`` adds after ``diff``, in this order; the blocks
        not asked for are left out."""
        out: dict[str, Any] = {}
        if self.protocols:
            out["protocols"] = self.protocols
        if self.ppi:
            out["ppi"] = {r.run: r.to_json() for r in self.ppi}
        if self.judged:
            out["judged"] = self.judged
            out["judged_paired"] = self.judged_paired
        return out
