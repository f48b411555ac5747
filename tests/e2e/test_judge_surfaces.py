"""Judged matches where people look: each keeps its provenance (judge identity, verdict,
reason, cached or asked) with the run, and shows in ``runs show`` (the page and ``--item``),
``compare --item``, the HTML report's item details and the exports; a person overrules a
judged pair through the gold override store and the next ``--judge`` honours it without
asking the judge."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import app
from extraction_eval.llm.fake import FakeProvider, register_fake, unregister_fake
from tests.support.judging import last_word_answers

runner = CliRunner(env={"COLUMNS": "200"})  # a judged match on one line
HOSTILE = "renamed <b>x</b></script><script>alert(1)</script>"


@pytest.fixture
def fakes() -> Iterator[None]:
    yield
    unregister_fake()


def _last_word_run(name: str, n: int = 3) -> None:
    """A run whose model names every entity by its last word (string matching misses the
    multi-word names; a judge can credit them)."""
    items = LocalStore().get_items("extraction-eval")[:n]
    renamed = last_word_answers(items)
    register_fake(f"rn-{name}", {"items": renamed})
    done = runner.invoke(
        app, ["run", "--model", f"fake:rn-{name}", "--limit", str(n), "--name", name]
    )
    assert done.exit_code == 0, done.output


def _judge_says(
    reason: str, *, never: tuple[str, ...] = (), cost: float | None = None
) -> FakeProvider:
    """A scripted judge: every pair is the same (reason ``reason``), except pairs naming a
    word of ``never``; each call costs ``cost`` USD (None: unpriced); it records the pairs
    it was asked."""

    def answer(request: Any) -> dict[str, Any]:
        user = request.messages[-1].content
        pairs = [x for x in user.splitlines() if x[:1].isdigit() and " vs " in x]
        return {
            "json": {
                "verdicts": [
                    {"id": k, "same": not any(w in p for w in never), "reason": reason}
                    for k, p in enumerate(pairs, start=1)
                ]
            },
            "usage": {} if cost is None else {"cost_usd": cost},
        }

    return register_fake("judge", {"default": answer})


def _flat(out: str) -> str:
    """Printed tables as one line of words (column rules dropped)."""
    return " ".join(re.sub(r"[│┃]", " ", out).split())


def _asked(fake: FakeProvider, item_id: str | None = None) -> str:
    """The pair lines the judge was asked (not the context around them), on one item or
    all."""
    calls = [c for c in fake.calls if item_id is None or c.item_id == item_id]
    lines = (x for c in calls for x in c.user_text.splitlines())
    return "\n".join(x for x in lines if x[:1].isdigit() and " vs " in x)


def test_runs_show_and_exports_keep_each_judged_matchs_provenance(fakes: None) -> None:
    _last_word_run("r")
    fake = _judge_says("the surname names the person")
    first = runner.invoke(app, ["compare", "r", "r", "--resamples", "50", "--judge", "fake:judge"])
    assert first.exit_code == 0, first.output
    assert fake.calls  # asked once; the second judging is read from the cache
    exported = runner.invoke(app, ["runs", "export", "r"])
    rows = [json.loads(x) for x in exported.stdout.splitlines()]
    (identity,) = {j for row in rows for j in row["judged"]}
    matches = [m for row in rows for m in row["judged"][identity]]
    assert matches
    assert {m["judge"] for m in matches} == {identity} and identity.startswith("fake:judge ")
    assert "prompt judge-v" in identity  # the prompt version is part of who judged
    assert all(m["same"] is True and m["reason"] == "the surname names the person" for m in matches)
    assert {m["source"] for m in matches} == {"cache"}  # B's judging read A's verdicts
    assert all(m["cached"] is True for m in matches)
    csv_head = runner.invoke(app, ["runs", "export", "r", "--format", "csv"]).stdout.splitlines()
    assert "judged" in csv_head[0].split(",")
    assert any('""cached"": true' in line for line in csv_head[1:])

    item = next(row["item_id"] for row in rows if row["judged"][identity])
    m = rows[[r["item_id"] for r in rows].index(item)]["judged"][identity][0]
    page = runner.invoke(app, ["runs", "show", "r"])
    assert page.exit_code == 0, page.output
    assert "items on this page with judged matches" in page.stdout
    assert re.search(rf"{re.escape(item)}\s+\+\d+ judged", page.stdout)
    one = runner.invoke(app, ["runs", "show", "r", "--item", item])
    assert one.exit_code == 0, one.output
    text = _flat(one.stdout)
    assert "judged matches" in text and "model (cached)" in text
    assert m["pred_name"] in text and m["gold_name"] in text
    assert "the surname names the person" in text
    _last_word_run("never", n=1)  # a run never judged has no judged section
    plain = runner.invoke(app, ["runs", "show", "never", "--item", "sample-001"])
    assert plain.exit_code == 0 and "judged matches" not in plain.stdout


def test_compare_item_shows_judged_pairs_apart_from_string_matches(fakes: None) -> None:
    _last_word_run("a")
    items = LocalStore().get_items("extraction-eval")[:3]
    register_fake("gold", {"items": {i.id: i.expected.model_dump(mode="json") for i in items}})
    done = runner.invoke(app, ["run", "--model", "fake:gold", "--limit", "3", "--name", "b"])
    assert done.exit_code == 0, done.output
    judged = runner.invoke(
        app, ["compare", "a", "b", "--resamples", "50", "--judge", "offline:rules"]
    )
    assert judged.exit_code == 0, judged.output
    shown = runner.invoke(app, ["compare", "a", "b", "--item", "sample-001"])
    assert shown.exit_code == 0, shown.output
    text = _flat(shown.stdout)
    assert "judged matches in A — by offline:rules" in text
    assert "judged matches in B — by offline:rules" in text and ": none on this item" in text
    assert "Velloso ≈ Mara Velloso" in text  # A's surname, judged the person
    assert "rules" in text


def test_the_html_reports_item_details_carry_judged_matches_escaped(
    fakes: None, tmp_path: Path
) -> None:
    _last_word_run("h")
    _judge_says(HOSTILE)
    out = tmp_path / "r.html"
    done = runner.invoke(app, ["report", "h", "--out", str(out), "--judge", "fake:judge"])
    assert done.exit_code == 0, done.output
    page = out.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in page  # the reason is data, never markup
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert data is not None
    meta = json.loads(data.group(1))
    (run,) = meta["judged"]
    assert run["judge"].startswith("fake:judge ")
    found = [m for ms in run["items"].values() for m in ms]
    assert found and all(m["reason"] == HOSTILE and m["source"] == "model" for m in found)
    assert "judgedBlock" in page  # the item details render them (as text)


def test_a_person_overrules_a_judged_pair_through_the_gold_override_store(
    fakes: None, tmp_path: Path
) -> None:
    _last_word_run("o")
    fake = _judge_says("scripted")
    overrides = tmp_path / "people.jsonl"
    overrides.write_text(
        json.dumps(
            {
                "item_id": "sample-001",
                "pred_name": "Velloso",
                "gold_name": "Mara Velloso",
                "same": False,
                "reason": "a different Velloso",
            }
        )
        + "\n"
        + json.dumps({"item_id": "sample-002", "pred_name": "Achterberg", "same": True})
        + "\n"
        + json.dumps({"item_id": "sample-002", "a": "X", "b": "Y", "same": "yes"})
        + "\n",
        encoding="utf-8",
    )
    stored = runner.invoke(app, ["gold", "override", "extraction-eval", "--file", str(overrides)])
    assert stored.exit_code == 0, stored.output
    assert "stored 1 overrides" in stored.stdout
    bad = [x for x in stored.stderr.splitlines() if "people.jsonl:" in x]
    assert len(bad) == 2
    assert "people.jsonl:2" in bad[0] and "gold_name" in bad[0]
    assert "people.jsonl:3" in bad[1] and '"same" must be true or false' in bad[1]
    one = runner.invoke(
        app,
        [
            *("gold", "override", "extraction-eval", "sample-002"),
            *("--same", "Analytics=Quillfeather Analytics", "--reason", "house name"),
        ],
    )
    assert one.exit_code == 0, one.output
    assert "next --judge" in one.stdout
    refused = runner.invoke(
        app, ["gold", "override", "extraction-eval", "sample-002", "--same", "x", "--reason", "r"]
    )
    assert refused.exit_code != 0 and "PREDICTED=GOLD" in refused.output

    done = runner.invoke(
        app, ["report", "o", "--out", str(tmp_path / "o.html"), "--judge", "fake:judge"]
    )
    assert done.exit_code == 0, done.output
    asked = _asked(fake)
    assert "Velloso" not in asked  # settled by the person: the judge never saw it
    # an item's override settles the pair on that item only
    assert '"Analytics" vs' not in _asked(fake, "sample-002") and "Achterberg" in asked
    assert '"Analytics" vs' in _asked(fake, "sample-001")
    block = LocalStore().run_judged(LocalStore().get_run("o", "extraction-eval").id)[0]  # type: ignore[union-attr]
    assert block["overruled"] >= 2
    s1 = {m["pred_name"]: m for m in block["items"].get("sample-001", [])}
    assert "Velloso" not in s1  # "not the same": no match, whatever the judge would say
    s2 = {m["pred_name"]: m for m in block["items"]["sample-002"]}
    assert s2["Analytics"]["source"] == "person" and s2["Analytics"]["reason"] == "house name"
    assert s2["Achterberg"]["source"] == "model"  # the rest is still the judge's


def test_compare_pairs_the_judged_f1_with_a_ci_beside_the_string_delta(fakes: None) -> None:
    _last_word_run("ja", n=6)
    items = LocalStore().get_items("extraction-eval")[:6]
    register_fake("gold6", {"items": {i.id: i.expected.model_dump(mode="json") for i in items}})
    done = runner.invoke(app, ["run", "--model", "fake:gold6", "--limit", "6", "--name", "jb"])
    assert done.exit_code == 0, done.output
    args = ["compare", "ja", "jb", "--resamples", "200", "--seed", "7", "--judge", "offline:rules"]
    out = runner.invoke(app, [*args, "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    paired = data["judged_paired"]
    assert set(paired) == {
        f"{k}.{m}"
        for k in ("entities", "entities_typed", "relationships")
        for m in ("precision", "recall", "f1")
    }
    ent = paired["entities.f1"]
    assert ent["a"] == pytest.approx(data["judged"]["ja"]["entities"]["f1"])
    assert ent["b"] == pytest.approx(data["judged"]["jb"]["entities"]["f1"])
    assert ent["delta"] == pytest.approx(ent["b"] - ent["a"])
    assert ent["ci"]["low"] <= ent["delta"] <= ent["ci"]["high"]
    assert ent["items"] == data["items"]
    # the judge closes part of the string gap: the judged Δ is smaller than the string Δ
    assert 0 <= ent["delta"] < data["metrics"]["entity_f1"]["delta"]
    again = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert again["judged_paired"] == paired  # seeded: the same interval
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    flat = _flat(text.stdout)
    assert "judged F1, B vs A" in flat
    line = re.search(r"entities (\+|-)\d\.\d{3} \[.*?\] \d\.\d{3} \d\.\d{3} (\S+) \[", flat)
    assert line is not None and line.group(2) == f"{ent['delta']:+.3f}"


def _last_word_items(n: int) -> dict[str, Any]:
    items = LocalStore().get_items("extraction-eval")[:n]
    return last_word_answers(items)


PRICED = ("--price-in", "1", "--price-out", "1", "--max-cost", "0.5")


def _budget_lines(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if "stopped: budget" in x]


def test_max_cost_counts_the_judge_on_run_experiment(fakes: None) -> None:
    register_fake("lw", {"items": _last_word_items(3)})
    fake = _judge_says("scripted", cost=1.0)  # one judge call spends twice the ceiling
    done = runner.invoke(
        app,
        [
            *("run", "--model", "fake:lw", "--limit", "3", "--name", "budget", *PRICED),
            *("--judge", "fake:judge"),
        ],
    )
    assert done.exit_code == 0, done.output
    assert len(fake.calls) == 1  # the ceiling stopped the judge after its first call
    (line,) = _budget_lines(done.stderr)
    assert "--max-cost 0.5" in line and "judge budget of $" in line
    assert "pairs not judged" in line and "after 1 judge calls" in line
    run = LocalStore().get_run("budget", "extraction-eval")
    assert run is not None and run.summary is not None
    (block,) = LocalStore().run_judged(run.id)  # what was judged is kept
    stats = block["stats"]
    assert stats["calls"] == 1 and stats["budget_refused"] > 0
    assert stats["errors"] >= stats["budget_refused"]
    assert block["matches"]["entities"] > 0  # the first call's verdicts count
    assert run.summary["report"]["items"] == 3  # the run's own results are all there


def test_max_cost_counts_the_judge_on_matrix_across_cells(fakes: None) -> None:
    register_fake("c1", {"items": _last_word_items(3)})
    register_fake("c2", {"items": _last_word_items(3)})
    fake = _judge_says("scripted", cost=1.0)
    done = runner.invoke(
        app,
        [
            *("matrix", "--model", "fake:c1", "--model", "fake:c2", "--limit", "3"),
            *("--name", "mxb", *PRICED, "--judge", "fake:judge"),
        ],
    )
    assert done.exit_code == 0, done.output
    assert len(fake.calls) == 1  # the second cell's judge had nothing left
    (line,) = _budget_lines(done.stderr)
    assert "--max-cost 0.5" in line
    store = LocalStore()
    blocks = [
        store.run_judged(r.id)[0]
        for r in store.list_runs("extraction-eval")
        if r.name.startswith("mxb/")
    ]
    assert len(blocks) == 2  # both cells' judged figures kept
    assert sum(b["stats"]["calls"] for b in blocks) == 1
    assert all(b["stats"]["budget_refused"] > 0 for b in blocks)


def test_an_unpriced_judge_under_a_ceiling_stops_after_one_call(fakes: None) -> None:
    register_fake("lw2", {"items": _last_word_items(3)})
    fake = _judge_says("scripted")  # no cost reported: the budget cannot be checked
    done = runner.invoke(
        app,
        [
            *("run", "--model", "fake:lw2", "--limit", "3", "--name", "unpriced", *PRICED),
            *("--judge", "fake:judge"),
        ],
    )
    assert done.exit_code == 0, done.output
    assert len(fake.calls) == 1
    (line,) = _budget_lines(done.stderr)
    assert "cannot be priced" in line


def test_a_judged_pair_override_changes_no_gold(fakes: None, tmp_path: Path) -> None:
    """``same`` / ``not_same`` overrides are the judge's: a gold build neither applies them,
    nor reports them as stale, nor votes again because of them."""
    from extraction_eval.backends.local import SAMPLE_DATASET
    from extraction_eval.seeds.ensemble.build import build_gold
    from extraction_eval.seeds.ensemble.config import GoldConfig, parse_models
    from extraction_eval.seeds.ensemble.review import add_override
    from extraction_eval.types import GoldOverride

    with LocalStore(tmp_path / "store.db") as store:
        items = store.get_items(SAMPLE_DATASET)
        register_fake("g1", {"items": {i.id: i.expected.model_dump(mode="json") for i in items}})
        config = GoldConfig(dataset=SAMPLE_DATASET, models=parse_models(["fake:g1"]))
        first = build_gold(config, store)
        add_override(
            store,
            GoldOverride(
                dataset=SAMPLE_DATASET,
                item_id="sample-001",
                action="not_same",
                kind="entity",
                target="Velloso",
                value="Mara Velloso",
                reason="a different Velloso",
            ),
        )
        again = build_gold(config, store)
        assert again.revoted == 0 and again.override_problems == []
        assert [i.expected for i in again.items] == [i.expected for i in first.items]


def test_score_overrides_with_an_item_id_settle_the_pair_on_that_item_only(
    tmp_path: Path,
) -> None:
    gold, pred, people = tmp_path / "g.jsonl", tmp_path / "p.jsonl", tmp_path / "people.jsonl"
    text = "Barack Obama met the press."
    gold.write_text(
        "".join(
            json.dumps(
                {"id": i, "text": text, "entities": [{"name": "Barack Obama", "type": "PER"}]}
            )
            + "\n"
            for i in ("x", "y")
        ),
        encoding="utf-8",
    )
    pred.write_text(
        "".join(
            json.dumps({"id": i, "entities": [{"name": "Obama", "type": "PER"}]}) + "\n"
            for i in ("x", "y")
        ),
        encoding="utf-8",
    )
    people.write_text(
        json.dumps(
            {"a": "Obama", "b": "Barack Obama", "same": False, "item_id": "y", "reason": "no"}
        )
        + "\n",
        encoding="utf-8",
    )
    per_item = tmp_path / "items.jsonl"
    done = runner.invoke(
        app,
        [
            *("score", "--gold", str(gold), "--predictions", str(pred), "--format", "json"),
            *("--judge", "offline:rules", "--judge-overrides", str(people)),
            *("--per-item", str(per_item)),
        ],
    )
    assert done.exit_code == 0, done.output
    lines = {
        x["id"]: x["judged"]["matches"]
        for x in map(json.loads, per_item.read_text(encoding="utf-8").splitlines())
    }
    assert [m["source"] for m in lines["x"] if m["kind"] == "entities"] == ["rules"]
    assert lines["y"] == []  # the person said no on y, and only on y
    assert json.loads(done.stdout)["judged"]["overruled"] == 1
