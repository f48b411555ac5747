"""The report's SVG charts, drawn from the runs' summaries: well-formed SVG, untrusted type names
escaped, one bar per run and value, CI whiskers where the summary has a CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from extraction_eval.reports import charts

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert(1)</script> & "x"'


def _summary(f1: float) -> dict:
    return {
        "report": {
            "entities": {"precision": 0.5, "recall": 0.25, "f1": f1},
            "ci": {"entity_f1": {"low": f1 - 0.1, "high": f1 + 0.1}},
            "per_type": {
                "entities": {HOSTILE: {"f1": f1, "tp": 3, "fn": 1}, "person": {"f1": 1.0}}
            },
            "taxonomy": {"missed": 4},
        }
    }


def test_charts_are_svg_with_escaped_names_and_a_bar_per_run() -> None:
    labels = charts.run_labels(["a", HOSTILE])
    summaries = [_summary(0.4), _summary(0.6)]
    per_type = charts.per_type_svg(labels, summaries, "entities")
    assert per_type is not None
    assert "<script" not in per_type and "&lt;script&gt;" in per_type
    root = ET.fromstring(per_type)  # well-formed
    bars = [r for r in root.iter(f"{NS}rect") if r.find(f"{NS}title") is not None]
    assert len(bars) == 4  # two types x two runs
    headline = ET.fromstring(charts.headline_svg(labels, summaries))
    whiskers = list(headline.iter(f"{NS}path"))
    assert len(whiskers) == 2 + 1  # entity F1's CI for each run, and the axis
    assert charts.per_type_svg(labels, summaries, "relationships") is None
    taxonomy = ET.fromstring(charts.taxonomy_svg(labels, summaries, ["missed", "spurious"]))
    texts = [t.text for t in taxonomy.iter(f"{NS}text")]
    assert "missed" in texts and "spurious" in texts
    hist = charts.latency_svg(labels, {"edges": [0.0, 1.0, 2.0], "counts": [[3, 0], [1, 2]]})
    assert hist is not None
    assert (
        len([r for r in ET.fromstring(hist).iter(f"{NS}rect") if r.find(f"{NS}title") is not None])
        == 3
    )
    assert charts.latency_svg(labels, {}) is None
