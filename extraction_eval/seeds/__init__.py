"""Seeding datasets from production traces (``from_trace``); reading and writing JSONL files
is ``datasets/``."""
