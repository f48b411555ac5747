"""Every bound on a value the tool accepts, in one place (docs/security.md lists them).

Each stops a single number from becoming unbounded work or memory before any work starts:
a refusal is one line naming the value, exit 2. The per-item object cap is a setting
(``ScoringConfig.max_objects``, ``--max-objects``), and so is the matrix cell cap
(``MatrixConfig.max_cells``, ``--max-cells``); the others are fixed.
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
# Item worker processes of one run (--workers).
MAX_WORKERS = 64
# Attempts per model call, retries included.
MAX_ATTEMPTS = 100
# --- files and sizes (docs/security.md, "Files and sizes") ---------------------------------
# Cells of a matrix (models x prompt labels x temperatures x repeats), by default: each is a
# full run, and the cells are planned up front (20,000 models x 100 temperatures reached
# 1.5 GB before a single call). A setting: ``MatrixConfig.max_cells``, ``--max-cells``.
DEFAULT_MAX_CELLS = 1_000
# Characters of one model reply: more than a model's output limit (128k tokens is about
# 500,000 characters), and each reply is parsed, matched and stored (four 50 MB replies took
# 2.3 GB). Over it: the item's error (kind "limit"), the reply neither parsed nor kept.
MAX_REPLY_CHARS = 1_000_000
# An annotation tool's export (datasets import), and each brat file: refused above this
# before it is read, since the items it makes are held until they are stored (a 50 MB Label
# Studio export peaks at 340 MB, so this keeps an import under about 1 GB).
MAX_IMPORT_BYTES = 128 * 1024 * 1024
# Documents (NAME.txt files) in one brat folder.
MAX_BRAT_DOCUMENTS = 1_000_000
# One line of a JSONL file (uploads, gold, predictions, overrides, doccano, Batch API output)
# or of a CoNLL file: a longer line is that line's warning, read and dropped in pieces, never
# held whole (the files themselves are streamed, so this bounds what one line can cost).
MAX_LINE_BYTES = 32 * 1024 * 1024
# A schema file (--schema): a few lines; a huge file is a mistake.
MAX_SCHEMA_BYTES = 1_000_000
# A prompt message file (prompts push --system / --user): read whole, sent with every call.
MAX_PROMPT_BYTES = 1_000_000
# --- end of files and sizes ---------------------------------------------------------------
# TOML config files (matrix --config, gold build --config).
MAX_TOML_BYTES = 1_000_000
MAX_TOML_DEPTH = 32
# Mentions, and aliases, per entity: each is a surface form every prediction is compared with
# (Re-DocRED: at most a few dozen). Over it: the object is refused with one line.
MAX_SURFACE_FORMS = 1_000
# Numbers read back from a store (a shard store comes from elsewhere, maybe edited by hand): an
# item's cost (USD), latency (ms) and token counts, and a numeric score, must be finite and at
# most this (costs, latencies and counts not negative), so any sum of them stays finite. A
# merged cost of 1e308 USD made finalize's sum raise OverflowError. Over it: one line naming
# the item and the column.
MAX_STORED_NUMBER = 1e12
# Tokens one model call may report (input or output). The largest context windows are about
# 2M tokens; a count above this bound, negative or not a whole number cannot be true, and is
# priced by the estimate instead (a reported -100,000,000 once made the budget go negative).
MAX_REPORTED_TOKENS = 10_000_000
# Context of one labelled pair in a judge pairs file (characters): the judge reads windows of
# it, but the file and the per-pair file keep it whole; a longer one is that line's warning.
MAX_PAIR_CONTEXT_CHARS = 1_000_000
# The fake provider's script file (EXTRACTION_EVAL_FAKE_SCRIPT) and the current folder's .env:
# both are read whole at startup; only a regular file of at most this is read.
MAX_FAKE_SCRIPT_BYTES = 10_000_000
MAX_DOTENV_BYTES = 1_000_000
