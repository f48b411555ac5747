"""Datasets from annotation tools, into our items: ``import_dataset(path, format)``.

One module per format (``label_studio``, ``doccano``, ``brat``, ``conll``); each returns an
:class:`Imported`: the items (span text as ``name`` and ``evidence``, character offsets as
``start`` / ``end``) and one warning per skipped record, ``FILE:N (id X): problem; skipped``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from extraction_eval.datasets.importers.common import Imported
from extraction_eval.errors import InvalidValue

__all__ = ["FORMATS", "Imported", "import_dataset"]

FORMATS: tuple[str, ...] = ("label-studio", "doccano", "brat", "conll")


def _importer(fmt: str) -> Callable[[Path], Imported]:
    if fmt == "label-studio":
        from extraction_eval.datasets.importers.label_studio import import_label_studio

        return import_label_studio
    if fmt == "doccano":
        from extraction_eval.datasets.importers.doccano import import_doccano

        return import_doccano
    if fmt == "brat":
        from extraction_eval.datasets.importers.brat import import_brat

        return import_brat
    if fmt == "conll":
        from extraction_eval.datasets.importers.conll import import_conll

        return import_conll
    raise InvalidValue("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")


def import_dataset(path: str | Path, fmt: str) -> Imported:
    """The items of an annotation tool's export (``path`` is a folder for brat)."""
    return _importer(fmt)(Path(path))
