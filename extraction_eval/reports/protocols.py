"""The report's protocol tables (``report --protocol``: one per protocol, a column per run, and
B against A for two runs) and its re-scored block (``report --aliases`` / ``--no-aliases``),
as plain rows for the template. JSON in, strings out: a rendering never changes a number."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from extraction_eval.reports.charts import HEADLINE

__all__ = ["protocol_tables", "rescored_rows"]

Rows = list[tuple[str, list[str]]]
_SEMEVAL_COUNTS = ("correct", "incorrect", "partial", "missed", "spurious")


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _prf(block: dict[str, Any]) -> str:
    """``P / R / F1 (F1's CI)`` of one block (its ``ci`` when it has one)."""
    text = " / ".join(_fmt(block.get(k)) for k in ("precision", "recall", "f1"))
    bounds = (block.get("ci") or {}).get("f1")
    if isinstance(bounds, dict) and isinstance(bounds.get("low"), (int, float)):
        text += f" ({bounds['low']:.3f}–{bounds['high']:.3f})"
    return text


def _counts(block: dict[str, Any], keys: Sequence[str]) -> str:
    return " / ".join(_fmt(block.get(k)) for k in keys)


def _rows(blocks: Sequence[dict[str, Any]], spec: Sequence[tuple[str, Callable[..., str]]]) -> Rows:
    return [(name, [cell(b) for b in blocks]) for name, cell in spec]


def _semeval(blocks: Sequence[dict[str, Any]]) -> Rows:
    rows: Rows = []
    for mode in ("strict", "exact", "partial", "ent_type"):
        rows += _rows(
            [b.get(mode) or {} for b in blocks],
            (
                (f"{mode} P / R / F1", _prf),
                (f"{mode} cor / inc / par / mis / spu", lambda b: _counts(b, _SEMEVAL_COUNTS)),
            ),
        )
    return rows


def _relext(blocks: Sequence[dict[str, Any]]) -> Rows:
    rows: Rows = []
    for name in ("re_strict", "re_boundaries"):
        rows += _rows(
            [b.get(name) or {} for b in blocks],
            (
                (f"{name} P / R / F1", _prf),
                (f"{name} tp / fp / fn", lambda b: _counts(b, ("tp", "fp", "fn"))),
            ),
        )
    return rows


def _docred(blocks: Sequence[dict[str, Any]]) -> Rows:
    return _rows(
        [b.get("docred") or {} for b in blocks],
        (
            ("P / R / F1", _prf),
            ("Ign F1 (--train)", lambda b: _fmt(b.get("ign_f1"))),
            ("evidence F1", lambda b: _fmt(b.get("evidence_f1"))),
            ("correct / submitted / gold", lambda b: _counts(b, ("correct", "submitted", "gold"))),
            ("endpoints ambiguous / unresolved", lambda b: _counts(b, ("ambiguous", "unresolved"))),
        ),
    )


_TABLES = (
    ("semeval", "SemEval-2013 NER modes (nervaluate)", _semeval),
    ("re", "End-to-end RE (Taillé et al. 2020)", _relext),
    ("docred", "DocRED (thunlp/DocRED evaluation)", _docred),
)


def protocol_tables(
    protocols: dict[str, Any] | None, labels: Sequence[str]
) -> list[dict[str, Any]]:
    """One table per protocol asked for (``title``, ``heads``, ``rows``), a column per run;
    for two runs a last table of B against A on each protocol F1 with the paired CI of Δ."""
    if not protocols:
        return []
    runs: list[dict[str, Any]] = protocols["runs"]
    tables = [
        {"title": title, "heads": list(labels), "rows": rows(runs)}
        for name, title, rows in _TABLES
        if name in protocols["names"]
    ]
    paired = protocols.get("paired")
    if paired:
        rows: Rows = []
        for metric, row in paired.items():
            if not metric.endswith(".f1"):
                continue  # P and R are in the page's data
            ci = row.get("ci")
            bounds = "—" if not ci else f"[{ci['low']:+.3f}, {ci['high']:+.3f}]"
            rows.append((metric, [_fmt(row["a"]), _fmt(row["b"]), f"{row['delta']:+.3f}", bounds]))
        heads = [f"A: {labels[0]}", f"B: {labels[1]}", "Δ B−A", "95% CI of Δ"]
        tables.append(
            {"title": "B against A (paired, items both runs have)", "heads": heads, "rows": rows}
        )
    return tables


def rescored_rows(rescored: dict[str, Any] | None) -> Rows:
    """Each run's headline P / R / F1 re-scored (``report --aliases`` / ``--no-aliases``) and
    the matches made through a mention or alias; none without a re-scoring."""
    if not rescored:
        return []
    reports: list[dict[str, Any]] = rescored["runs"]
    rows: Rows = []
    for title, block, prefix in HEADLINE:

        def cell(report: dict[str, Any], block: str = block, prefix: str = prefix) -> str:
            ci = (report.get("ci") or {}).get(f"{prefix}_f1")
            return _prf({**(report.get(block) or {}), "ci": {"f1": ci}})

        rows.append((f"{title} P / R / F1", [cell(r) for r in reports]))
    rows.append(
        (
            "matched through aliases",
            [_counts(r.get("alias_matches") or {}, ("entities", "relationships")) for r in reports],
        )
    )
    return rows
