"""What a written HTML report embeds, read back (the page's ``meta``, the item ``table`` and
every item as one dict): how the report tests check a page holds what the data said. Test-only,
so it lives here rather than in ``reports/html.py``."""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Iterator
from typing import Any

from extraction_eval.analysis.html_report.data import merge_rows

# the data blocks ``reports/html.py`` writes: JSON (meta, table) and base64 zlib chunks
_DATA_BLOCK = re.compile(
    r'<script type="application/(json|octet-stream)" id="(report-data|report-table|chunk-\d+)">'
    r"(.*?)</script>",
    re.S,
)


def read_embedded(html: str) -> dict[str, Any]:
    """The page's ``meta`` (runs, types, categories), the item ``table`` and every item as one
    dict (``items``, as :attr:`ReportData.items`)."""
    blocks = {m.group(2): m.group(3) for m in _DATA_BLOCK.finditer(html)}
    meta = json.loads(blocks["report-data"])
    table = json.loads(blocks["report-table"])
    chunks = sorted((int(k.split("-")[1]), v) for k, v in blocks.items() if k.startswith("chunk-"))

    def details() -> Iterator[dict[str, Any]]:
        for _, text in chunks:
            yield from json.loads(zlib.decompress(base64.b64decode(text)))

    items = merge_rows(table, details(), meta["types"], meta["categories"])
    return {**meta, "table": table, "items": items}
