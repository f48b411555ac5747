"""The report's charts: Vega-Lite specs rendered to SVG at build time by vl-convert, so the
report needs no JavaScript charting library and no network when it is opened."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from extraction_eval.reports import require

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"  # an id, never fetched
# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
RUN_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
HEADLINE = (
    ("entity", "entities", "entity"),
    ("entity typed", "entities_typed", "entity_typed"),
    ("relationship", "relationships", "relationship"),
)
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


def run_labels(names: Sequence[str]) -> list[str]:
    """Runs are called A, B, C... in the charts, with the names in the legend."""
    return [f"{chr(ord('A') + i)}: {name}" if i < 26 else name for i, name in enumerate(names)]


def _colour(labels: Sequence[str]) -> dict[str, Any]:
    return {
        "field": "run",
        "type": "nominal",
        "title": "run",
        "scale": {"domain": list(labels), "range": list(RUN_COLOURS[: len(labels)] or ["#000"])},
        "legend": {"orient": "top", "labelLimit": 400},
    }


def _base(data: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "$schema": VEGA_LITE_SCHEMA,
        "data": {"values": data},
        "config": {"font": _FONT, "view": {"stroke": None}},
        **extra,
    }


def headline_spec(labels: Sequence[str], summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Micro P/R/F1 per run with the run summary's bootstrap CI as an error bar."""
    rows: list[dict[str, Any]] = []
    for label, summary in zip(labels, summaries, strict=True):
        report = summary.get("report") or {}
        ci = report.get("ci") or {}
        for title, block, prefix in HEADLINE:
            counts = report.get(block) or {}
            for metric in ("precision", "recall", "f1"):
                value = counts.get(metric)
                if not isinstance(value, (int, float)):
                    continue
                bounds = ci.get(f"{prefix}_{metric}") or {}
                rows.append(
                    {
                        "group": title,
                        "metric": metric,
                        "run": label,
                        "value": float(value),
                        "lo": bounds.get("low", value),
                        "hi": bounds.get("high", value),
                    }
                )
    x = {
        "field": "metric",
        "type": "nominal",
        "sort": ["precision", "recall", "f1"],
        "title": None,
        "axis": {"labelAngle": 0},
    }
    y = {"type": "quantitative", "scale": {"domain": [0, 1]}}
    return _base(
        rows,
        facet={
            "column": {
                "field": "group",
                "type": "nominal",
                "title": None,
                "sort": [h[0] for h in HEADLINE],
            }
        },
        spec={
            "width": max(90, 45 * len(labels) * 3 // 2),
            "height": 180,
            "layer": [
                {
                    "mark": {"type": "bar"},
                    "encoding": {
                        "x": x,
                        "xOffset": {"field": "run", "sort": list(labels)},
                        "y": {**y, "field": "value", "title": "micro value (95% CI)"},
                        "color": _colour(labels),
                        "tooltip": [{"field": "run"}, {"field": "value", "format": ".3f"}],
                    },
                },
                {
                    "mark": {"type": "rule", "color": "#222", "strokeWidth": 1.5},
                    "encoding": {
                        "x": x,
                        "xOffset": {"field": "run", "sort": list(labels)},
                        "y": {**y, "field": "lo"},
                        "y2": {"field": "hi"},
                    },
                },
            ],
        },
    )


def per_type_spec(
    labels: Sequence[str], summaries: Sequence[dict[str, Any]], kind: str
) -> dict[str, Any] | None:
    """F1 per entity type (``kind="entities"``) or relationship type, one bar per run."""
    rows: list[dict[str, Any]] = []
    for label, summary in zip(labels, summaries, strict=True):
        per_type = ((summary.get("report") or {}).get("per_type") or {}).get(kind) or {}
        for type_name, counts in per_type.items():
            f1 = counts.get("f1")
            if isinstance(f1, (int, float)):
                support = int(counts.get("tp", 0)) + int(counts.get("fn", 0))
                rows.append({"type": f"{type_name} ({support})", "run": label, "f1": float(f1)})
    if not rows:
        return None
    types = sorted({r["type"] for r in rows})
    return _base(
        rows,
        width=360,
        height={"step": max(8, 18 // max(1, len(labels)))},
        mark={"type": "bar"},
        encoding={
            "y": {
                "field": "type",
                "type": "nominal",
                "sort": types,
                "title": "type (gold support)",
                "axis": {"labelLimit": 220},
            },
            "yOffset": {"field": "run", "sort": list(labels)},
            "x": {
                "field": "f1",
                "type": "quantitative",
                "scale": {"domain": [0, 1]},
                "title": "F1",
            },
            "color": _colour(labels),
        },
    )


def taxonomy_spec(
    labels: Sequence[str], summaries: Sequence[dict[str, Any]], categories: Sequence[str]
) -> dict[str, Any]:
    """Objects per failure category, per run (every category shown, zeros too)."""
    rows = []
    for label, summary in zip(labels, summaries, strict=True):
        counts = (summary.get("report") or {}).get("taxonomy") or {}
        for cat in categories:
            rows.append({"category": cat, "run": label, "objects": int(counts.get(cat, 0))})
    return _base(
        rows,
        width=360,
        height={"step": max(8, 18 // max(1, len(labels)))},
        mark={"type": "bar"},
        encoding={
            "y": {"field": "category", "type": "nominal", "sort": list(categories), "title": None},
            "yOffset": {"field": "run", "sort": list(labels)},
            "x": {"field": "objects", "type": "quantitative", "title": "objects"},
            "color": _colour(labels),
        },
    )


def latency_spec(
    labels: Sequence[str], latencies: Sequence[Sequence[float]]
) -> dict[str, Any] | None:
    """Distribution of per-item latency (ms; cache hits left out), per run."""
    rows = [
        {"run": label, "ms": round(float(ms), 3)}
        for label, values in zip(labels, latencies, strict=True)
        for ms in values
    ]
    if not rows:
        return None
    return _base(
        rows,
        width=360,
        height=160,
        mark={"type": "bar", "opacity": 0.75},
        encoding={
            "x": {
                "field": "ms",
                "type": "quantitative",
                "bin": {"maxbins": 40},
                "title": "latency per item (ms)",
            },
            "y": {"aggregate": "count", "type": "quantitative", "stack": None, "title": "items"},
            "color": _colour(labels),
        },
    )


def to_svg(spec: dict[str, Any]) -> str:
    svg: str = require("vl_convert").vegalite_to_svg(spec, vl_version="5.21")
    return svg


def svg_data_uri(svg: str) -> str:
    """An ``<img>`` source: an SVG shown as an image runs no script and loads nothing."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
