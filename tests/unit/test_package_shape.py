"""The package's shelves stay readable: no module over 600 lines (issue 17's rule; one had
grown to 614 unnoticed). Split a module that outgrows it along what its parts are for."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "extraction_eval"
MAX_LINES = 600


def test_no_module_of_the_package_is_over_600_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 100  # the package was found
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
