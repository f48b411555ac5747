"""Every bound on a value the tool accepts, in one place (docs/security.md lists them).

Each stops a single number from becoming unbounded work or memory before any work starts:
a refusal is one line naming the value, exit 2. The per-item object cap is a setting
(``ScoringConfig.max_objects``, ``--max-objects``); the others are fixed.
"""

from __future__ import annotations

# Entities, or relationships, per item and side (gold, prediction): matching compares every
# pair, so memory grows with the product (10,000 x 10,000 entities took 4.5 GB). Real
# documents have tens (Re-DocRED: under 50 entities a document). Over it: the item's error.
DEFAULT_MAX_OBJECTS = 2_000
# Bootstrap resamples: each re-sums every item's counts.
MAX_RESAMPLES = 1_000_000
# Runs per matrix cell (--repeats) and per gold model: each is a full run of the dataset.
MAX_REPEATS = 100
# Items in flight at once.
MAX_CONCURRENCY = 10_000
# Attempts per model call, retries included.
MAX_ATTEMPTS = 100
# TOML config files (matrix --config, gold build --config).
MAX_TOML_BYTES = 1_000_000
MAX_TOML_DEPTH = 32
# Mentions, and aliases, per entity: each is a surface form every prediction is compared with
# (Re-DocRED: at most a few dozen). Over it: the object is refused with one line.
MAX_SURFACE_FORMS = 1_000
# Context of one labelled pair in a judge pairs file (characters): the judge reads windows of
# it, but the file and the per-pair file keep it whole; a longer one is that line's warning.
MAX_PAIR_CONTEXT_CHARS = 1_000_000
