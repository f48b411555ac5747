"""The console every view prints through: text from outside (ids, item texts, model answers,
error messages) cannot drive the terminal.

An ESC sequence in an item id or a model's answer would otherwise reach the terminal raw
(recolour it, move the cursor, rewrite the title or hide what is printed). Rich strips only a
few control codes (BEL, BS, VT, FF, CR), so :class:`SafeConsole` removes every C0 and C1 control
character but newline and tab, DEL, and the bidirectional overrides that reorder what is shown,
from the text of every segment it writes; Rich's own styling and cursor control (progress bars)
are added after, so they still work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

# C0 but \t and \n, DEL, C1; bidi embeddings/overrides/isolates (U+202A-202E, U+2066-2069)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def strip_control(text: str) -> str:
    """``text`` without terminal control characters (newline and tab kept)."""
    return _CONTROL.sub("", text)


class SafeConsole(Console):
    """A Rich ``Console`` whose written text holds no terminal control character."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # Rich renders every print to segments, then styles them here: the one place where all
        # text passes, tables and panels included. Control segments are Rich's own.
        clean = (
            seg if seg.control else Segment(strip_control(seg.text), seg.style, seg.control)
            for seg in buffer
        )
        return super()._render_buffer(clean)
