#!/usr/bin/env bash
# The one test command (README, CI): fresh venv, install, lint, type-check, docs site, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
# The browser tests' Chromium: Debian's package (playwright's own browser download is never
# used). Installed only when missing; without root or apt-get, say how and go on (the browser
# suite then fails under CI=1 and skips locally, in one line).
if [ ! -x /usr/bin/chromium ] && [ -z "${EXTRACTION_EVAL_CHROMIUM:-}" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "note: /usr/bin/chromium is missing; the browser tests need it: apt-get install -y chromium" >&2
  fi
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# The docs site: a broken link or anchor between pages fails here.
site_tmp=$(mktemp -d)
.venv/bin/mkdocs build --strict --quiet --site-dir "$site_tmp"
rm -rf "$site_tmp"
# Two worker processes (pytest-xdist): the suite is CPU-bound and a CI machine has two cores.
# EXTRACTION_EVAL_TEST_WORKERS=0 runs it in this one process (for a debugger, or -x order).
.venv/bin/python -m pytest -q -p no:cacheprovider -n "${EXTRACTION_EVAL_TEST_WORKERS:-2}" "$@"
