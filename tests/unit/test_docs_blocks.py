"""The docs test's reading of blocks and its output comparison: robust to a table's width and a
line's wrapping, never to a changed figure (``tests/support/docs_blocks.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.support.docs_blocks import blocks, commands, console_steps, missing_lines

PRINTED = """\
run 'b' on 'extraction-eval' — offline:baseline — 48 items, match
fuzzy ≥ 0.85
                ┃     P ┃     R ┃    F1
━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━╇━━━━━━━
entities        │ 1.000 │ 0.943 │ 0.971
 latency p50 / p95 ms  0.4 / 8.9
wrote report.html (0.1 MB): 1 run(s), 48 items
"""


def test_quoted_lines_match_at_another_width_and_wrapping() -> None:
    quoted = [
        "run 'b' on 'extraction-eval' — offline:baseline — 48 items, match fuzzy ≥ 0.85",
        "   ┃ P ┃ R ┃ F1",
        "━━━━━━━╇━━━━━╇━━━━━━━╇━━━━━",
        "...",
        "entities   │ 1.000 │ 0.943 │ 0.971",
        " latency p50 / p95 ms  0.1 / 0.3",  # timing: masked on both sides
        "wrote report.html (0.3 MB): 1 run(s), 48 items",
    ]
    assert missing_lines(quoted, PRINTED) == []


def test_a_changed_figure_or_order_is_missing() -> None:
    assert missing_lines(["entities │ 1.000 │ 0.943 │ 0.972"], PRINTED) != []
    assert missing_lines(["0.97"], PRINTED) != []  # whole words only
    assert missing_lines(["entities │ 1.000", "fuzzy ≥ 0.85"], PRINTED) == ["fuzzy ≥ 0.85"]


def test_a_session_splits_into_commands_and_their_output() -> None:
    steps = console_steps("$ a --x \\\n    --y\nout 1\n[exit 1]\n$ b\nerror: no\n$ c")
    assert [s.command for s in steps] == ["a --x \\\n    --y", "b", "c"]
    assert [s.expected_exit for s in steps] == [1, None, 0]


def test_marks_and_commands_are_read(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "<!-- docs-test: needs-keys, exit=2 -->\n```bash\n"
        "X=1 extraction-eval runs show r [--all]  # c\ncat <<'EOF'\nrun-experiment\nEOF\n```\n"
        "<!-- docs-test: output -->\n```\nok\n```\n<!-- docs-test: needs-key -->\n```python\n```\n",
        encoding="utf-8",
    )
    found = blocks(page)
    assert [b.kind for b in found] == ["shell", "output", "python"]
    assert found[0].marks == {"needs-keys"} and found[0].exit == 2 and not found[0].runs
    assert commands(found[0].code) == [["extraction-eval", "runs", "show", "r"]]
    assert found[2].bad_marks == ("needs-key",) and found[2].runs
