"""``extraction-eval report``: one self-contained HTML file (inline CSS, JS, data and SVG
charts; nothing is fetched when it is opened).

Untrusted text (item texts, names, errors) reaches the page three ways, all escaped: the
jinja2 template autoescapes; the run headers and the item table are JSON inside ``<script
type="application/json">`` with ``<``, ``>``, ``&`` and the JS line separators written as
``\\uXXXX`` escapes, so no text can close the script element; the items' details are base64
(of zlib-compressed JSON) in ``<script type="application/octet-stream">`` blocks, decoded
only when an item is expanded. The page's own script builds the item table and highlights
with ``textContent``, never ``innerHTML``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from extraction_eval.analysis.html_report.data import ReportData
from extraction_eval.atomic import atomic_text
from extraction_eval.reports import charts, require
from extraction_eval.reports.protocols import protocol_tables, rescored_rows

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_json(value: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (and still the same JSON)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def script_hash(js: str) -> str:
    """The CSP source that allows exactly our one inline script: with a hash and no
    ``'unsafe-inline'``, an inline event handler (``onclick=``, ``onerror=``) that ever got
    into the page would not run, nor would any other script."""
    digest = hashlib.sha256(js.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def _static(name: str) -> str:
    return (resources.files("extraction_eval.reports") / "static" / name).read_text("utf-8")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _config_rows(runs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The settings that tell runs apart, one row each (the full record is below them)."""

    def get(run: dict[str, Any], *path: str) -> Any:
        cur: Any = run["config"]
        for key in path:
            cur = cur.get(key) if isinstance(cur, dict) else None
        return cur

    def prompt(run: dict[str, Any]) -> str:
        p = get(run, "prompt") or {}
        if not p:
            return "—"
        bits = [str(p.get("name") or "")]
        if p.get("label"):
            bits.append(f"label {p['label']}")
        if p.get("version") is not None:
            bits.append(f"v{p['version']}")
        bits.append(f"({p.get('source')})")
        return " ".join(b for b in bits if b)

    def scoring(run: dict[str, Any]) -> str:
        s = get(run, "scoring") or {}
        match = s.get("match")
        limit = s.get("span_threshold") if match == "span" else s.get("threshold")
        return f"match {match} ≥ {limit}, evidence {s.get('evidence')}"

    def git(run: dict[str, Any]) -> str:
        g = get(run, "git") or {}
        if not g:
            return "—"
        return f"{str(g.get('commit', ''))[:12]}{' (dirty)' if g.get('dirty') else ''}"

    rows: list[tuple[str, list[str]]] = [
        ("dataset", [f"{r['dataset']} (version {_fmt(r['dataset_version'])})" for r in runs]),
        ("backend", [r["backend"] for r in runs]),
        ("status", [r["status"] for r in runs]),
        ("model", [_fmt(get(r, "model")) for r in runs]),
        ("prompt", [prompt(r) for r in runs]),
        ("temperature", [_fmt(get(r, "temperature")) for r in runs]),
        ("scoring", [scoring(r) for r in runs]),
        ("concurrency", [_fmt(get(r, "concurrency")) for r in runs]),
        ("started / ended", [f"{r['started_at']} / {_fmt(r['ended_at'])}" for r in runs]),
        ("git", [git(r) for r in runs]),
    ]
    return rows


def _headline_rows(runs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    rows: list[tuple[str, list[str]]] = []
    for title, block, prefix in charts.HEADLINE:
        for metric in ("precision", "recall", "f1"):
            cells = []
            for run in runs:
                report = run["summary"].get("report") or {}
                value = (report.get(block) or {}).get(metric)
                bounds = (report.get("ci") or {}).get(f"{prefix}_{metric}") or {}
                ci = (
                    f" ({bounds['low']:.3f}–{bounds['high']:.3f})"
                    if isinstance(bounds.get("low"), (int, float))
                    and isinstance(bounds.get("high"), (int, float))
                    else ""
                )
                cells.append(f"{_fmt(value)}{ci}")
            rows.append((f"{title} {metric}", cells))
    for key in ("error_rate", "zero_fp_pass_rate", "hallucination_rate", "evidence_coverage_rate"):
        rows.append((key, [_fmt(r["summary"].get("values", {}).get(key)) for r in runs]))
    aliases = [(r["summary"].get("report") or {}).get("alias_matches") or {} for r in runs]
    if any(isinstance(v, int) and v for a in aliases for v in a.values()):
        # matches a gold entity's mention or alias made (issue 31): say so beside the F1s
        rows.append(
            (
                "matched through aliases",
                [
                    f"entities {a.get('entities', 0)} · relationships {a.get('relationships', 0)}"
                    for a in aliases
                ],
            )
        )
    return rows


def _judged_rows(judged: list[list[dict[str, Any]]]) -> list[tuple[str, list[str]]]:
    """Each run's newest judged block (``--judge``) as rows beside the string figures; none
    when no run has one."""
    if not any(judged):
        return []
    newest = [blocks[0] if blocks else {} for blocks in judged]
    rows: list[tuple[str, list[str]]] = [
        ("judge", [str(b.get("judge", "—")) for b in newest]),
        ("backing", [str(b.get("backing", "—")) for b in newest]),
    ]
    for title, block in (
        ("entities", "entities"),
        ("entities typed", "entities_typed"),
        ("relationships", "relationships"),
    ):
        for metric in ("precision", "recall", "f1"):
            rows.append(
                (
                    f"judged {title} {metric}",
                    [_fmt((b.get(block) or {}).get(metric)) for b in newest],
                )
            )
    rows.append(
        ("judged matches", [_fmt((b.get("matches") or {}).get("entities")) for b in newest])
    )
    rows.append(("judge errors", [_fmt((b.get("stats") or {}).get("errors")) for b in newest]))
    return rows


def _cost_rows(runs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    def s(run: dict[str, Any], key: str) -> Any:
        return run["summary"].get(key)

    def cost(run: dict[str, Any]) -> str:
        c = s(run, "cost_usd")
        unpriced = s(run, "unpriced_items") or 0
        shown = "—" if c is None else f"${c:.4f}"
        return shown + (f" ({unpriced} items unpriced)" if unpriced else "")

    return [
        ("items", [f"{_fmt(s(r, 'items'))} of {_fmt(s(r, 'expected_items'))}" for r in runs]),
        (
            "errored items",
            [f"{_fmt(s(r, 'errors'))} ({_fmt(s(r, 'schema_failures'))} schema)" for r in runs],
        ),
        (
            "latency p50 / p95 (ms)",
            [
                f"{_fmt(s(r, 'latency_p50_ms'), 1)} / {_fmt(s(r, 'latency_p95_ms'), 1)}"
                for r in runs
            ],
        ),
        (
            "tokens in / out",
            [f"{_fmt(s(r, 'tokens_in'))} / {_fmt(s(r, 'tokens_out'))}" for r in runs],
        ),
        ("cache hits", [_fmt(s(r, "cache_hits")) for r in runs]),
        ("cost", [cost(r) for r in runs]),
    ]


def _chart(svg: str | None, alt: str) -> dict[str, str] | None:
    return None if svg is None else {"src": charts.svg_data_uri(svg), "alt": alt}


_MARK = "\x00report-data\x00"


def _pieces(data: ReportData) -> Iterator[str]:
    """The document in pieces (the page around the data, the item table's JSON, then one
    ``<script>`` data block per details chunk), so writing it never holds it whole."""
    jinja2 = require("jinja2")
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("extraction_eval.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    runs = data.runs
    labels = charts.run_labels([r["name"] for r in runs])
    summaries = [r["summary"] for r in runs]
    js = _static("report.js")
    template = env.get_template("report.html.j2")
    html: str = template.render(
        title="extraction-eval report: " + " vs ".join(r["name"] for r in runs),
        runs=runs,
        labels=labels,
        colours=charts.RUN_COLOURS,
        config_rows=_config_rows(runs),
        configs=[json.dumps(r["config"], indent=2, sort_keys=True) for r in runs],
        headline_rows=_headline_rows(runs),
        cost_rows=_cost_rows(runs),
        judged_rows=_judged_rows(data.judged),
        protocol_tables=protocol_tables(data.protocols, labels),
        rescored_rows=rescored_rows(data.rescored),
        rescored_with=(data.rescored or {}).get("with", ""),
        headline=_chart(
            charts.headline_svg(labels, summaries), "micro precision, recall, F1 with CIs"
        ),
        ent_types=_chart(charts.per_type_svg(labels, summaries, "entities"), "F1 per entity type"),
        rel_types=_chart(
            charts.per_type_svg(labels, summaries, "relationships"), "F1 per relationship type"
        ),
        taxonomy=_chart(
            charts.taxonomy_svg(labels, summaries, data.categories), "failure categories"
        ),
        latency=_chart(charts.latency_svg(labels, data.latency), "latency per item"),
        comparison=data.comparison,
        n_items=data.n_items,
        coverage=data.coverage(),
        css=_static("report.css"),
        js=js,
        script_hash=script_hash(js),
        data_block=_MARK,
    )
    head, tail = html.split(_MARK)
    yield head
    yield '<script type="application/json" id="report-data">'
    yield script_json(data.meta())
    yield '</script>\n<script type="application/json" id="report-table">'
    yield script_json(data.table)
    yield "</script>\n"
    for n, chunk in enumerate(data.chunks):
        # base64 of zlib data: only [A-Za-z0-9+/=], nothing that can end the element
        yield f'<script type="application/octet-stream" id="chunk-{n}">'
        yield base64.b64encode(chunk).decode("ascii")
        yield "</script>\n"
    yield tail


def render_report(data: ReportData) -> str:
    """The report as one HTML document (a str; ``write_report`` streams it to a file)."""
    return "".join(_pieces(data))


def write_report(data: ReportData, out: Path) -> int:
    """Write the report to ``out``; returns its size in bytes."""
    size = 0
    with atomic_text(out) as fh:  # whole or not at all: never a truncated report
        for piece in _pieces(data):
            encoded = piece.encode("utf-8", "surrogatepass")
            size += len(encoded)
            fh.write(piece)
    return size
