"""Extraction pipelines: prompt + provider + parsing, the offline baseline, or a user's function."""
