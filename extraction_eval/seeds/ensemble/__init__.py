"""Ensemble gold: several models extract every item, a weighted vote keeps what they agree on,
people override the rest, and the result becomes a new version of the dataset.

``config`` (what a build asks for), ``build`` (plan and build), ``review`` (overrides and the
items to look at). The vote itself is pure and lives in ``evaluators.vote``; the store's
override and vote tables in ``backends.local.gold``.
"""
