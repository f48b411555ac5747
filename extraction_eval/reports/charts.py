"""The report's charts: small SVG bar charts drawn here from aggregates (the runs' summaries
and a latency histogram: a few dozen bars), so the report needs no charting library, no
JavaScript engine at build time and no network when it is opened.

(Until 2026-11 they were Vega-Lite specs rendered by vl-convert: an 84 MB install that embeds
a V8 engine, took 2 s to start, and aborted the process under a 6 GB address-space limit
("Fatal process out of memory: Oilpan: CagedHeap reservation") whatever the chart's size.)
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
RUN_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
HEADLINE = (
    ("entity", "entities", "entity"),
    ("entity typed", "entities_typed", "entity_typed"),
    ("relationship", "relationships", "relationship"),
)
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
_LABEL_W = 190  # px for the row labels
_PLOT_W = 300
_BAR_H = 11
_GAP = 7


def run_labels(names: Sequence[str]) -> list[str]:
    """Runs are called A, B, C... in the charts, with the names in the legend."""
    return [f"{chr(ord('A') + i)}: {name}" if i < 26 else name for i, name in enumerate(names)]


def _colour(i: int) -> str:
    return RUN_COLOURS[i % len(RUN_COLOURS)]


def _text(x: float, y: float, s: str, anchor: str = "start", size: int = 11) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"'
        f' dominant-baseline="middle">{escape(s)}</text>'
    )


def _short(s: str, limit: int = 30) -> str:
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _legend(labels: Sequence[str], y: float) -> list[str]:
    out, x = [], 4.0
    for i, label in enumerate(labels):
        out.append(
            f'<rect x="{x:.1f}" y="{y - 5:.1f}" width="10" height="10" fill="{_colour(i)}"/>'
        )
        out.append(_text(x + 14, y, _short(label, 60)))
        x += 24 + 6.5 * min(len(label), 60)
    return out


def _svg(width: float, height: float, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}"'
        f' viewBox="0 0 {width:.0f} {height:.0f}" font-family="{_FONT}">'
        f"<title>{escape(title)}</title>"
        f'<rect width="100%" height="100%" fill="#fff"/>' + "".join(body) + "</svg>"
    )


Row = tuple[str, Sequence[float | None], Sequence[tuple[float, float] | None]]


def hbars(
    rows: Sequence[Row],
    labels: Sequence[str],
    *,
    title: str,
    axis: str,
    top: float | None = None,
) -> str:
    """Horizontal bars: per row, one bar per run (value, optional CI whisker); ``top`` fixes
    the axis maximum (1 for rates), else the largest value."""
    values = [v for _, vs, _ in rows for v in vs if v is not None]
    high = top if top is not None else max([*values, 0.0]) or 1.0
    n_runs = max(1, len(labels))
    group_h = n_runs * _BAR_H + _GAP
    y0 = 30.0
    body = _legend(labels, 12)
    x0 = _LABEL_W
    for r, (label, vs, cis) in enumerate(rows):
        gy = y0 + r * group_h
        body.append(_text(x0 - 6, gy + n_runs * _BAR_H / 2, _short(label), "end"))
        for i, v in enumerate(vs):
            y = gy + i * _BAR_H
            if v is None:
                continue
            w = max(0.0, min(1.0, v / high)) * _PLOT_W
            body.append(
                f'<rect x="{x0}" y="{y + 1:.1f}" width="{w:.1f}" height="{_BAR_H - 2}"'
                f' fill="{_colour(i)}"><title>{escape(f"{labels[i]}: {v:.4g}")}</title></rect>'
            )
            ci = cis[i] if i < len(cis) else None
            if ci is not None:
                lo, hi = (x0 + max(0.0, min(1.0, c / high)) * _PLOT_W for c in ci)
                mid = y + _BAR_H / 2
                body.append(
                    f'<path d="M{lo:.1f} {mid:.1f}H{hi:.1f}M{lo:.1f} {mid - 3:.1f}V{mid + 3:.1f}'
                    f'M{hi:.1f} {mid - 3:.1f}V{mid + 3:.1f}" stroke="#222" stroke-width="1.3"/>'
                )
    bottom = y0 + len(rows) * group_h
    body.append(f'<path d="M{x0} {y0 - 2}V{bottom}H{x0 + _PLOT_W}" stroke="#888" fill="none"/>')
    for k in range(5):
        x = x0 + k * _PLOT_W / 4
        body.append(_text(x, bottom + 10, f"{high * k / 4:.3g}", "middle", 10))
    body.append(_text(x0 + _PLOT_W / 2, bottom + 26, axis, "middle"))
    return _svg(x0 + _PLOT_W + 30, bottom + 36, body, title)


def histogram(
    edges: Sequence[float], counts: Sequence[Sequence[int]], labels: Sequence[str], *, title: str
) -> str:
    """Item counts per latency bin, one bar per run side by side in each bin."""
    width, height, x0, y0 = 420.0, 160.0, 50.0, 26.0
    high = max([c for run in counts for c in run] + [1])
    n_bins, n_runs = len(edges) - 1, max(1, len(counts))
    slot = width / max(1, n_bins)
    body = _legend(labels, 12)
    for i, run in enumerate(counts):
        for b, c in enumerate(run):
            if not c:
                continue
            h = c / high * height
            x = x0 + b * slot + i * slot / n_runs
            body.append(
                f'<rect x="{x:.1f}" y="{y0 + height - h:.1f}" width="{slot / n_runs:.2f}"'
                f' height="{h:.1f}" fill="{_colour(i)}" opacity="0.85"><title>'
                f"{escape(f'{labels[i]}: {c} items, {edges[b]:.4g}–{edges[b + 1]:.4g} ms')}"
                "</title></rect>"
            )
    body.append(f'<path d="M{x0} {y0}V{y0 + height}H{x0 + width}" stroke="#888" fill="none"/>')
    for k in range(5):
        x = x0 + k * width / 4
        v = edges[0] + (edges[-1] - edges[0]) * k / 4
        body.append(_text(x, y0 + height + 10, f"{v:.3g}", "middle", 10))
        body.append(_text(x0 - 4, y0 + height - k * height / 4, f"{high * k / 4:.3g}", "end", 10))
    body.append(_text(x0 + width / 2, y0 + height + 26, "latency per item (ms)", "middle"))
    return _svg(x0 + width + 20, y0 + height + 36, body, title)


def headline_svg(labels: Sequence[str], summaries: Sequence[dict[str, Any]]) -> str:
    """Micro P/R/F1 per run with the run summary's bootstrap CI as a whisker."""
    rows: list[Row] = []
    for title, block, prefix in HEADLINE:
        for metric in ("precision", "recall", "f1"):
            values: list[float | None] = []
            cis: list[tuple[float, float] | None] = []
            for summary in summaries:
                report = summary.get("report") or {}
                value = (report.get(block) or {}).get(metric)
                bounds = (report.get("ci") or {}).get(f"{prefix}_{metric}") or {}
                values.append(float(value) if isinstance(value, (int, float)) else None)
                lo, hi = bounds.get("low"), bounds.get("high")
                if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
                    cis.append((float(lo), float(hi)) if values[-1] is not None else None)
                else:
                    cis.append(None)
            rows.append((f"{title} {metric}", values, cis))
    return hbars(
        rows,
        labels,
        title="micro precision, recall, F1 with CIs",
        axis="micro value (95% CI)",
        top=1.0,
    )


def per_type_svg(
    labels: Sequence[str], summaries: Sequence[dict[str, Any]], kind: str
) -> str | None:
    """F1 per entity type (``kind="entities"``) or relationship type, one bar per run."""
    by_type: dict[str, list[float | None]] = {}
    support: dict[str, int] = {}
    for i, summary in enumerate(summaries):
        per_type = ((summary.get("report") or {}).get("per_type") or {}).get(kind) or {}
        for type_name, counts in per_type.items():
            f1 = counts.get("f1")
            if isinstance(f1, (int, float)):
                by_type.setdefault(type_name, [None] * len(summaries))[i] = float(f1)
                support[type_name] = int(counts.get("tp", 0)) + int(counts.get("fn", 0))
    if not by_type:
        return None
    rows: list[Row] = [(f"{t} ({support[t]})", by_type[t], []) for t in sorted(by_type)]
    what = "entity" if kind == "entities" else "relationship"
    return hbars(rows, labels, title=f"F1 per {what} type", axis="F1 (type, gold support)", top=1.0)


def taxonomy_svg(
    labels: Sequence[str], summaries: Sequence[dict[str, Any]], categories: Sequence[str]
) -> str:
    """Objects per failure category, per run (every category shown, zeros too)."""
    rows: list[Row] = []
    for cat in categories:
        values: list[float | None] = []
        for summary in summaries:
            counts = (summary.get("report") or {}).get("taxonomy") or {}
            values.append(float(counts.get(cat, 0)))
        rows.append((cat, values, []))
    return hbars(rows, labels, title="failure categories", axis="objects")


def latency_svg(labels: Sequence[str], latency: dict[str, Any]) -> str | None:
    """Distribution of per-item latency (ms; cache hits left out), per run."""
    if not latency:
        return None
    return histogram(latency["edges"], latency["counts"], labels, title="latency per item")


def svg_data_uri(svg: str) -> str:
    """An ``<img>`` source: an SVG shown as an image runs no script and loads nothing."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
