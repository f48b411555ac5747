"""``compare A B`` end to end on real local runs: the paired figures (JSON and text), byte
stability, refusals and ``--force``, the regression gate on ``compare`` and on
``run-experiment --baseline``."""

from __future__ import annotations

import html as html_mod
import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.evaluators.counts import METRICS

runner = CliRunner()
FIRST = "tests.support.pipelines:first_entity"  # the first gold entity only: recall < 1


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(_run_app, list(args), env=env)
    return result.exit_code, result.stderr


def _json(*args: str) -> dict[str, Any]:
    code, out, err = _invoke("compare", *args, "--format", "json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


@pytest.fixture
def two_runs() -> None:
    """'first' (first gold entity per item, item sample-003 fails) and 'base' (offline baseline)."""
    code, err = _run("--name", "first", "--pipeline", FIRST, env={"E2E_FAIL": "sample-003"})
    assert code == 0, err
    code, err = _run("--name", "base")
    assert code == 0, err


def test_json_has_each_runs_own_figures_and_a_paired_interval(two_runs: None) -> None:
    data = _json("first", "base", "--resamples", "2000")
    assert list(data) == [
        *("a", "b", "items", "bootstrap", "correction", "min_items", "metrics", "mcnemar"),
        *("per_type", "scoring", "scored_as", "scoring_b", "scored_with"),
        *("only_in_a", "only_in_b", "not_in_gold", "differences", "warnings", "power", "gate"),
        "diff",  # the extraction-aware diff (RunDiff.to_json)
    ]
    assert list(data["metrics"]) == list(METRICS)
    store = LocalStore()
    for side, name in (("a", "first"), ("b", "base")):
        run = store.get_run(name)
        assert run is not None and run.summary is not None
        values = run.summary["values"]
        for metric in METRICS:  # re-scored from the stored outputs: the run's own figures
            if metric in values:
                assert data["metrics"][metric][side] == pytest.approx(values[metric]), metric
    n = store.count_results(store.get_run("first").id)  # type: ignore[union-attr]
    assert data["items"] == n == 48
    f1 = data["metrics"]["entity_f1"]
    assert f1["delta"] == pytest.approx(f1["b"] - f1["a"])
    assert f1["ci"]["low"] <= f1["delta"] <= f1["ci"]["high"]
    err = data["metrics"]["error_rate"]
    assert (err["a"], err["b"]) == (pytest.approx(1 / 48), 0.0)
    mc = data["mcnemar"]
    assert mc["both_right"] + mc["b01"] + mc["b10"] + mc["both_wrong"] == 48
    assert data["gate"] is None
    assert set(data["per_type"]["entities"]) and all(
        t["support"] > 0 for t in data["per_type"]["entities"].values()
    )


def test_same_seed_same_bytes_other_seed_other_interval(two_runs: None) -> None:
    args = ("compare", "first", "base", "--format", "json", "--resamples", "500")
    first, again = _invoke(*args, "--seed", "3"), _invoke(*args, "--seed", "3")
    assert first[0] == 0 and first[1] == again[1]
    other = _invoke(*args, "--seed", "4")
    assert json.loads(other[1])["metrics"] != json.loads(first[1])["metrics"]


def test_text_view_shows_the_interval_verdict_mcnemar_and_types(two_runs: None) -> None:
    code, out, err = _invoke("compare", "first", "base", "--resamples", "1000")
    assert code == 0, err
    data = _json("first", "base", "--resamples", "1000")
    row = next(line for line in out.splitlines() if line.split()[:1] == ["entity_recall"])
    ci = data["metrics"]["entity_recall"]["ci"]
    assert f"[{ci['low']:+.3f}, {ci['high']:+.3f}]" in row
    assert data["metrics"]["entity_recall"]["verdict"] == "improved" and "improved" in row
    mc = data["mcnemar"]
    assert f"{mc['b01']} items wrong in A and right in B (b01)" in " ".join(out.split())
    assert "F1 per type" in out


def test_the_gate_fails_on_a_regression_and_passes_an_improvement(two_runs: None) -> None:
    # base -> first loses recall: the CI's low bound is far below -0.01
    code, out, err = _invoke("compare", "base", "first", "--fail-on-regression", "entity_f1=0.01")
    assert code == 1
    line = [x for x in err.splitlines() if "regression gate" in x]
    assert len(line) == 1 and "FAILED" in line[0] and "entity_f1" in line[0], err
    code, out, err = _invoke(
        "compare", "first", "base", "--fail-on-regression", "entity_f1=0.01",
        "--fail-on-regression", "error_rate=0",
    )  # fmt: skip
    assert code == 0, err
    assert "regression gate passed" in err
    # the JSON carries the gate too (the line goes to stderr: stdout stays pure JSON)
    code, out, err = _invoke(
        "compare", "base", "first", "--format", "json", "--fail-on-regression", "entity_f1=0.01"
    )
    assert code == 1
    gate = json.loads(out)["gate"]
    assert gate["passed"] is False and gate["failures"][0]["metric"] == "entity_f1"
    assert gate["failures"][0]["ci_bound"] < -0.01


def test_a_huge_tolerance_passes_even_a_regression(two_runs: None) -> None:
    code, _, err = _invoke("compare", "base", "first", "--fail-on-regression", "entity_f1=1")
    assert code == 0, err


def test_other_item_set_needs_force_and_is_named(two_runs: None) -> None:
    code, err = _run("--name", "short", "--limit", "5")
    assert code == 0, err
    code, out, err = _invoke("compare", "base", "short")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--force" in err and "item set" in err, err
    code, out, err = _invoke("compare", "base", "short", "--force", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["items"] == 5 and data["only_in_a"]["count"] == 43
    assert "item set: 43 items only in 'base'" in err


def test_other_dataset_version_needs_force(two_runs: None) -> None:
    store = LocalStore()
    items = store.get_items("extraction-eval")
    changed = items[0].model_copy(update={"text": items[0].text + " More."})
    store.upload_items("extraction-eval", [changed])  # version 2
    code, err = _run("--name", "v2")
    assert code == 0, err
    code, _, err = _invoke("compare", "base", "v2")
    assert code == 2 and "dataset version 1 vs 2" in err and "--force" in err, err
    code, _, err = _invoke("compare", "base", "v2", "--force")
    assert code == 0, err
    warning = "warning: the runs differ (compared anyway, forced): dataset version 1 vs 2"
    assert warning in " ".join(err.split()), err


def test_run_experiment_baseline_gate() -> None:
    code, err = _run("--name", "base")
    assert code == 0, err
    # a worse candidate: exit 1, the reason in one line
    code, err = _run(
        "--name", "cand", "--pipeline", FIRST, "--baseline", "base",
        "--fail-on-regression", "entity_f1=0.01",
    )  # fmt: skip
    assert code == 1, err
    gate = [x for x in err.splitlines() if "regression gate" in x]
    assert len(gate) == 1 and "FAILED" in gate[0] and "'cand' vs baseline 'base'" in gate[0]
    # the same model again: Δ = 0 everywhere, the gate passes
    code, err = _run(
        "--name", "again", "--baseline", "base", "--fail-on-regression", "entity_f1=0",
        "--fail-on-regression", "relationship_f1=0",
    )  # fmt: skip
    assert code == 0, err
    assert "regression gate passed" in err and "entity_f1 Δ CI low bound +0.0000" in err


def test_all_items_errored_in_b_is_a_regression() -> None:
    code, err = _run("--name", "base")
    assert code == 0, err
    code, err = _run("--name", "broken", "--pipeline", "tests.support.pipelines:always_fails")
    assert code == 0, err
    data = _json("base", "broken", "--resamples", "500")
    assert data["metrics"]["error_rate"]["b"] == 1.0
    assert data["metrics"]["error_rate"]["verdict"] == "regressed"
    assert data["metrics"]["entity_f1"]["b"] == 0.0
    assert data["mcnemar"]["b01"] == 0 and data["mcnemar"]["b10"] > 0


def test_an_unknown_gate_metric_is_refused_before_the_runs_are_read() -> None:
    # no run exists: the metric name is what the one error line is about
    code, out, err = _invoke("compare", "x", "y", "--fail-on-regression", "entity_f2=0.1")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "unknown metric 'entity_f2'" in err and "entity_f1" in err, err
    code, err = _run("--baseline", "nope", "--fail-on-regression", "entity_f1=0.1")
    assert code == 2 and "--baseline" in err and "no run named 'nope'" in err, err
    assert LocalStore().list_runs() == []


def test_run_experiment_baseline_on_another_dataset_version_is_refused_after_the_run() -> None:
    code, err = _run("--name", "base")
    assert code == 0, err
    store = LocalStore()
    items = store.get_items("extraction-eval")
    store.upload_items("extraction-eval", [items[1].model_copy(update={"text": "Changed."})])
    code, err = _run("--name", "cand", "--baseline", "base", "--fail-on-regression", "entity_f1=0")
    assert code == 2
    assert "--baseline 'base' cannot be compared with 'cand': dataset version 1 vs 2" in err, err
    cand = store.get_run("cand")
    assert cand is not None and store.count_results(cand.id) == 48  # the run itself is kept


def test_compare_on_two_items_is_insufficient_and_the_gate_fails() -> None:
    # Two items where B is better on both: the paired bootstrap has one CI of zero width and
    # would have said "improved"; on two documents no verdict is honest, and the gate fails
    # with one line saying why.
    code, err = _run("--name", "first2", "--pipeline", FIRST, "--limit", "2")
    assert code == 0, err
    code, err = _run("--name", "base2", "--limit", "2")
    assert code == 0, err
    data = _json("first2", "base2", "--resamples", "500")
    assert data["items"] == 2 and data["min_items"] == 10
    f1 = data["metrics"]["entity_f1"]
    assert f1["delta"] > 0 and f1["verdict"] == "insufficient"
    assert f1["insufficient"] == "2 paired items, fewer than the minimum of 10"
    assert {m["verdict"] for m in data["metrics"].values()} <= {"insufficient", "undefined"}
    code, out, err = _invoke("compare", "first2", "base2", "--fail-on-regression", "entity_f1=0.5")
    assert code == 1
    (line,) = [x for x in err.splitlines() if "regression gate" in x]
    assert "FAILED" in line and "entity_f1: insufficient evidence (2 paired items" in line
    assert "insufficient evidence: 2 paired items" in " ".join(out.split())
    # --min-items lowers the floor: then the verdicts are the intervals' again
    data = _json("first2", "base2", "--resamples", "500", "--min-items", "2")
    assert data["metrics"]["entity_f1"]["verdict"] != "insufficient"


def test_ci_method_and_correction_are_chosen_shown_and_recorded(two_runs: None) -> None:
    store = LocalStore()
    run = store.get_run("base")
    assert run is not None and run.config["scoring"]["ci"] == "expanded"  # the default
    expanded = _json("first", "base", "--resamples", "1000")
    plain = _json("first", "base", "--resamples", "1000", "--ci", "percentile")
    assert expanded["bootstrap"]["ci_method"] == "expanded"
    assert plain["bootstrap"]["method"] == "paired percentile bootstrap over items"
    lo_e, hi_e = (expanded["metrics"]["entity_recall"]["ci"][k] for k in ("low", "high"))
    lo_p, hi_p = (plain["metrics"]["entity_recall"]["ci"][k] for k in ("low", "high"))
    assert lo_e <= lo_p and hi_p <= hi_e and (lo_e, hi_e) != (lo_p, hi_p)  # same resamples
    recall = expanded["metrics"]["entity_recall"]["p_value"]
    assert recall["test"] == "paired bootstrap" and recall["raw"] <= recall["adjusted"]
    assert expanded["correction"]["method"] == "holm"
    assert expanded["mcnemar"]["p_adjusted"] >= expanded["mcnemar"]["p_value"]
    none = _json("first", "base", "--resamples", "1000", "--correction", "none")
    assert none["metrics"]["entity_recall"]["p_value"]["adjusted"] is None
    code, out, err = _invoke("compare", "first", "base", "--resamples", "1000")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "paired expanded percentile bootstrap (Hesterberg 2015)" in flat
    assert "adjusted: Holm (family-wise error) over" in flat
    code, out, err = _invoke("compare", "first", "base", "--correction", "sidak")
    assert code == 2 and "--correction must be one of holm, bh, none" in err, err
    code, err = _run("--name", "p", "--ci", "percentile", "--limit", "3")
    assert code == 0, err
    p_run = store.get_run("p")
    assert p_run is not None and p_run.config["scoring"]["ci"] == "percentile"
    assert "approximate below 50" in err or "approximate below 50" in json.dumps(p_run.summary)


UPPER = "tests.support.pipelines:upper_names"  # gold names in capitals: exact match fails


def _first_line(out: str) -> str:
    """The output's first line as printed (wrapped at the terminal's width: joined)."""
    head = out.split("compare A = ")[0]
    return " ".join(head.split())


@pytest.fixture
def two_match_modes() -> None:
    """The same outputs scored two ways: 'folded' (--match casefold), 'exact' (--match exact)."""
    for name, match in (("folded", "casefold"), ("exact", "exact")):
        code, err = _run("--name", name, "--pipeline", UPPER, "--match", match)
        assert code == 0, err


def test_default_scores_both_with_a_settings_and_says_so_first(two_match_modes: None) -> None:
    data = _json("folded", "exact", "--resamples", "200")
    f1 = data["metrics"]["entity_f1"]
    assert f1["delta"] == 0 and f1["a"] == f1["b"]  # the same outputs, one set of settings
    assert data["scored_as"] == "a" and data["scoring_b"]["match"] == "casefold"
    code, out, _ = _invoke("compare", "folded", "exact", "--resamples", "200")
    assert code == 0
    first = _first_line(out)
    assert first.startswith("both runs scored with A's settings (folded): match=casefold")
    assert "--as-recorded" in first  # the runs were scored differently: the way to see it


def test_as_recorded_scores_each_run_with_its_own_settings(two_match_modes: None) -> None:
    data = _json("folded", "exact", "--resamples", "200", "--as-recorded")
    assert data["scored_as"] == "recorded"
    assert (data["scoring"]["match"], data["scoring_b"]["match"]) == ("casefold", "exact")
    store = LocalStore()
    for side, name in (("a", "folded"), ("b", "exact")):
        run = store.get_run(name)
        assert run is not None and run.summary is not None  # each run's own figures
        assert data["metrics"]["entity_f1"][side] == pytest.approx(
            run.summary["values"]["entity_f1"]
        )
    f1 = data["metrics"]["entity_f1"]
    assert f1["delta"] < 0 and f1["verdict"] == "regressed"
    assert not any("different settings" in w for w in data["warnings"])
    code, out, _ = _invoke("compare", "folded", "exact", "--resamples", "200", "--as-recorded")
    assert code == 0
    assert _first_line(out).startswith(
        "each run scored with its own recorded settings: A match=casefold"
    )


def _paired_section(html: str) -> tuple[str, dict[str, list[str]]]:
    """The report's paired section: its first line (the settings) and its table by metric."""
    section = html.split('<section id="paired">', 1)[1].split("</section>", 1)[0]
    first = re.search(r'<p class="scored-with" id="paired-scored-with">(.*?)</p>', section, re.S)
    assert first is not None, section[:2000]
    rows = {
        m[0]: [v.strip() for v in re.findall(r'<td class="num">(.*?)</td>', m[1])]
        for m in re.findall(r"<tr[^>]*><th>(.*?)</th>(.*?)</tr>", section, re.S)
    }
    return html_mod.unescape(" ".join(first.group(1).split())), rows


@pytest.mark.parametrize("as_recorded", [False, True])
def test_report_paired_section_says_which_settings_and_as_recorded_uses_each_runs_own(
    two_match_modes: None, tmp_path: Path, as_recorded: bool
) -> None:
    """As compare: the default scores both runs with A's settings, --as-recorded each with its
    own, and the section's first line says which, in compare's words."""
    out = tmp_path / "r.html"
    args = ["report", "folded", "exact", "--out", str(out)]
    code, _, err = _invoke(*args, *(["--as-recorded"] if as_recorded else []))
    assert code == 0, err
    first, rows = _paired_section(out.read_text(encoding="utf-8"))
    _, printed, _ = _invoke(
        "compare", "folded", "exact", *(["--as-recorded"] if as_recorded else [])
    )
    assert first and _first_line(printed).startswith(first)  # compare's first line, word for word
    a, b = rows["entity_f1"][:2]
    if as_recorded:
        assert first.startswith("each run scored with its own recorded settings: A match=casefold")
        assert float(b) < float(a)  # exact matching fails on the capitalised names
        store = LocalStore()
        for value, name in ((a, "folded"), (b, "exact")):
            run = store.get_run(name)
            assert run is not None and run.summary is not None
            assert float(value) == pytest.approx(run.summary["values"]["entity_f1"], abs=1e-4)
    else:
        assert first.startswith("both runs scored with A's settings (folded): match=casefold")
        assert a == b
