"""The browser suite never passes silently without a browser: one line, and a failure under CI
(skipped only locally)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _browser_suite(ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["EXTRACTION_EVAL_CHROMIUM"] = str(ROOT / "no-such-chromium")
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rfs",
            "-p",
            "no:cacheprovider",
            "tests/browser/test_report_page.py::test_sorting_and_paging",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_a_browser_the_suite_fails_in_ci() -> None:
    done = _browser_suite(ci=True)
    assert done.returncode == 1, done.stdout
    assert "browser tests: no Chromium found" in done.stdout
    assert "1 error" in done.stdout


def test_without_a_browser_the_suite_skips_locally_saying_why() -> None:
    done = _browser_suite(ci=False)
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout and "browser tests: no Chromium found" in done.stdout
