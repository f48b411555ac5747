"""``gold build`` on the bundled dataset: three scripted "models" that disagree in known ways."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
from extraction_eval.datasets.jsonl import read_items
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.vote import trusted_gold
from extraction_eval.llm.fake import FakeProvider, register_fake, unregister_fake
from extraction_eval.seeds.ensemble.build import build_gold, plan_gold
from extraction_eval.seeds.ensemble.config import GoldConfig, GoldModel, parse_models
from extraction_eval.seeds.ensemble.review import add_override, review_items
from extraction_eval.types import DatasetItem, Extraction, GoldOverride, Schema


def _payload(e: Extraction) -> dict[str, object]:
    return e.model_dump(mode="json")


def _scripts(items: list[DatasetItem]) -> dict[str, dict[str, object]]:
    """m1 answers the gold; m2 drops each item's last entity; m3 retypes the first to 'thing'."""
    m1, m2, m3 = {}, {}, {}
    for item in items:
        g = item.expected
        m1[item.id] = _payload(g)
        m2[item.id] = _payload(g.model_copy(update={"entities": g.entities[:-1]}))
        retyped = (
            [g.entities[0].model_copy(update={"type": "thing"}), *g.entities[1:]]
            if g.entities
            else []
        )
        m3[item.id] = _payload(g.model_copy(update={"entities": retyped}))
    return {"m1": {"items": m1}, "m2": {"items": m2}, "m3": {"items": m3}}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LocalStore]:
    with LocalStore(tmp_path / "store.db") as s:
        yield s


@pytest.fixture
def fakes(store: LocalStore) -> Iterator[dict[str, FakeProvider]]:
    items = store.get_items(SAMPLE_DATASET)
    yield {name: register_fake(name, script) for name, script in _scripts(items).items()}
    unregister_fake()


MODELS = "fake:m1:1:2,fake:m2:1:1,fake:m3:1:1"


def config(**kw: object) -> GoldConfig:
    return GoldConfig(dataset=SAMPLE_DATASET, models=parse_models([MODELS]), **kw)  # type: ignore[arg-type]


def test_aggregate_equals_the_hand_computed_table(
    store: LocalStore, fakes: dict[str, FakeProvider]
) -> None:
    before = store.get_items(SAMPLE_DATASET)
    version = store.get_dataset(SAMPLE_DATASET).version
    build = build_gold(config(), store)
    assert build.errors == [] and build.plan.calls == 3 * len(before)
    # total weight 4 (m1 2, m2 1, m3 1)
    for old, new in zip(before, build.items, strict=True):
        ents = old.expected.entities
        # every object wins its vote, so the built gold is the original gold
        assert new.expected == old.expected, old.id
        meta = new.metadata["gold"]
        want = []
        for k in range(len(ents)):
            support = 2 + (0 if k == len(ents) - 1 else 1) + 1  # m2 lacks the last entity
            want.append(support / 4)
        assert [m["confidence"] for m in meta["entities"]] == want, old.id
        assert all(m["confidence"] == 1.0 for m in meta["relationships"]), old.id
        if not ents:
            continue
        vote = build.votes[old.id]
        first = next(o for o in vote.objects if o.kind == "entity" and o.obj.name == ents[0].name)
        # the first entity's type: gold from m1 (2) and m2 (1 unless it was also the last)
        gold_type_weight = 2 + (1 if len(ents) > 1 else 0)
        assert first.fields["type"].value == ents[0].type
        assert first.fields["type"].confidence == gold_type_weight / 4
        assert first.fields["type"].ballots[-1][0] == "thing"
    # a literal spot check: sample-001 has three entities
    meta = build.items[0].metadata["gold"]
    assert build.items[0].id == "sample-001"
    assert [m["confidence"] for m in meta["entities"]] == [1.0, 1.0, 0.75]
    assert meta["min_confidence"] == 0.75  # the first entity's type (3/4) and the last entity
    assert meta["models"] == ["fake:m1:1:2", "fake:m2:1:1", "fake:m3:1:1"]
    # identical gold and new metadata: one new dataset version
    assert store.get_dataset(SAMPLE_DATASET).version == version + 1
    assert store.get_items(SAMPLE_DATASET)[0].metadata["gold"] == meta


def test_rebuild_calls_models_only_for_the_changed_item(
    store: LocalStore, fakes: dict[str, FakeProvider]
) -> None:
    build_gold(config(), store)
    for f in fakes.values():
        f.reset()
    items = store.get_items(SAMPLE_DATASET)
    changed = items[3].model_copy(update={"text": items[3].text + " Nothing else happened."})
    store.upload_items(SAMPLE_DATASET, [changed])
    assert plan_gold(config(), store).calls == 3
    again = build_gold(config(), store)
    assert again.plan.calls == 3 and again.plan.cached == 3 * (len(items) - 1)
    assert {name: f.call_count() for name, f in fakes.items()} == {"m1": 1, "m2": 1, "m3": 1}
    assert all(f.call_count(item_id=changed.id) == 1 for f in fakes.values())
    # the scripted answers to the changed text are the same as before: nothing to re-vote
    assert again.revoted == 0


def test_schema_change_invalidates_everything(
    store: LocalStore, fakes: dict[str, FakeProvider]
) -> None:
    build_gold(config(), store)
    items = store.get_items(SAMPLE_DATASET)
    schema = Schema(entity_types=["person", "organization", "location", "thing"])
    store.upload_items(SAMPLE_DATASET, [i.model_copy(update={"schema_": schema}) for i in items])
    plan = plan_gold(config(), store)
    assert (plan.calls, plan.cached) == (3 * len(items), 0)


def test_override_survives_a_rebuild_and_is_flagged(
    store: LocalStore, fakes: dict[str, FakeProvider]
) -> None:
    build_gold(config(), store)
    add_override(
        store,
        GoldOverride(
            dataset=SAMPLE_DATASET,
            item_id="sample-001",
            action="set",
            kind="entity",
            target="Port Ansel",
            field="type",
            value="city",
            reason="the guide says cities are typed city",
            author="ana",
        ),
    )
    add_override(
        store,
        GoldOverride(
            dataset=SAMPLE_DATASET,
            item_id="sample-001",
            action="remove",
            kind="entity",
            target="Nobody Here",
            reason="a stale override",
        ),
    )
    for revoted in (1, 0):  # and again: nothing is called, the override still applies
        build = build_gold(config(), store)
        assert build.revoted == revoted  # only the overridden item's inputs changed
        item = build.items[0]
        port = [e for e in item.expected.entities if e.name == "Port Ansel"]
        assert [e.type for e in port] == ["city"]
        meta = item.metadata["gold"]["entities"][-1]
        assert meta == {
            "confidence": 1.0,
            "source": "override",
            "reason": "the guide says cities are typed city",
        }
        assert build.override_problems == [
            "item sample-001: override #2 (remove entity 'Nobody Here'): no such entity in the"
            " gold any more; not applied"
        ]
    assert build.plan.calls == 0


def test_failed_run_abstains_and_is_reported(store: LocalStore) -> None:
    items = store.get_items(SAMPLE_DATASET)[:2]
    store.upload_items("two", items)
    register_fake("ok", {"items": {i.id: _payload(i.expected) for i in items}})
    register_fake("bad", {"items": {items[0].id: {"text": "{not json"}}})
    try:
        build = build_gold(
            GoldConfig(dataset="two", models=parse_models(["fake:ok", "fake:bad"])), store
        )
    finally:
        unregister_fake()
    assert len(build.errors) == 1 and build.errors[0].startswith(f"item {items[0].id}: fake:bad#1")
    assert build.votes[items[0].id].abstained == ("fake:bad#1",)
    assert build.items[0].expected == items[0].expected  # the one answer that came, unopposed
    # on the second item "bad" answered empty: half the weight, nothing kept — and the
    # item is up for review, its objects' absence being only half sure
    assert build.items[1].expected == Extraction()
    assert build.items[1].metadata["gold"]["min_confidence"] == 0.5
    assert build.review == [(items[1].id, 0.5)]


def test_out_file_and_review(
    store: LocalStore, fakes: dict[str, FakeProvider], tmp_path: Path
) -> None:
    out = io.StringIO()
    build = build_gold(config(review_below=0.8), store, write=False, out=out)
    path = tmp_path / "gold.jsonl"
    path.write_text(out.getvalue(), encoding="utf-8")
    read, warnings = read_items(path)
    assert warnings == [] and [i.expected for i in read] == [i.expected for i in build.items]
    assert json.loads(out.getvalue().splitlines()[0])["metadata"]["gold"]["min_confidence"] == 0.75
    # every item with an entity has a 0.75 one (the one m2 dropped): up for review below 0.8
    with_entities = [i.id for i in build.items if i.expected.entities]
    assert [i for i, _ in build.review] == with_entities
    listed = review_items(store, SAMPLE_DATASET, below=0.8)
    assert [i for i, _ in listed] == with_entities
    (only,) = review_items(store, SAMPLE_DATASET, item="sample-001")
    objects = only[1]["vote"]["objects"]
    assert objects[0]["fields"]["type"]["ballots"][1] == {
        "value": "thing",
        "weight": 1.0,
        "runs": ["fake:m3#1"],
    }


def test_trusted_gold_drops_low_confidence_objects(
    store: LocalStore, fakes: dict[str, FakeProvider]
) -> None:
    build = build_gold(config(), store)
    first = build.items[0]
    kept, dropped = trusted_gold(first.expected, first.metadata, 0.9)
    assert dropped == 1 and [e.name for e in kept.entities] == [
        "Mara Velloso",
        "Quillfeather Analytics",
    ]
    plain = store.get_items(SAMPLE_DATASET, version=1)[0]
    # an item without ensemble confidences is trusted as it is
    assert trusted_gold(plain.expected, plain.metadata, 0.9) == (plain.expected, 0)


def test_repeated_runs_get_their_own_answers(store: LocalStore) -> None:
    items = store.get_items(SAMPLE_DATASET)[:1]
    store.upload_items("one", items)
    fake = register_fake(
        "r", {"items": {items[0].id: [_payload(items[0].expected), _payload(Extraction())]}}
    )
    try:
        build = build_gold(GoldConfig(dataset="one", models=(GoldModel("fake:r", runs=2),)), store)
    finally:
        unregister_fake()
    # two runs, two distinct cache keys, two calls: the second answered empty
    assert fake.call_count() == 2 and build.plan.calls == 2
    vote = build.votes[items[0].id]
    assert vote.voters == ("fake:r#1", "fake:r#2") and vote.total_weight == 2.0
    assert all(o.confidence == 0.5 and not o.kept for o in vote.objects)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("fake", "expected provider:model"),
        ("fake:m1:0", "runs must be >= 1"),
        ("fake:m1:1:-2", "weight > 0"),
        ("fake:m1:x", "runs must be an integer"),
        ("fake:m1,fake:m1:2", "given twice"),
    ],
)
def test_bad_model_specs(spec: str, problem: str) -> None:
    with pytest.raises(InvalidValue, match=problem):
        parse_models([spec])


def test_dry_run_estimates_the_cost_of_the_calls(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from extraction_eval.experiments.budget import estimate_cost
    from extraction_eval.pipeline.pricing import Pricer
    from extraction_eval.prompts.template import load_local_prompt

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    items = store.get_items(SAMPLE_DATASET)
    cfg = GoldConfig(dataset=SAMPLE_DATASET, models=parse_models(["openai:gpt-4o-mini:2:1"]))
    plan = plan_gold(cfg, store)
    one = estimate_cost(
        items, prompt=load_local_prompt(), pricer=Pricer.for_config(cfg.runs()[0][2])
    )
    assert one.usd is not None and one.usd > 0
    assert plan.calls == 2 * len(items) == plan.estimate.calls
    assert plan.estimate.usd == pytest.approx(2 * one.usd)
    batch = plan_gold(replace(cfg, batch=True), store)
    assert batch.estimate.usd == pytest.approx(one.usd)  # two runs at half price


def test_build_writes_a_new_langfuse_dataset_version(store: LocalStore) -> None:
    from extraction_eval.backends.langfuse import LangfuseDatasetBackend
    from tests.support.langfuse_server import client_for, running_fake_langfuse

    items = store.get_items(SAMPLE_DATASET)[:3]
    scripts = _scripts(items)
    for name, script in scripts.items():
        register_fake(name, script)
    try:
        with running_fake_langfuse() as server:
            lf = client_for(server, "gold")
            backend = LangfuseDatasetBackend(lf)
            backend.upload_items("lf-gold", items)
            build = build_gold(
                GoldConfig(dataset="lf-gold", models=parse_models([MODELS])), store, backend
            )
            lf.flush()
            stored = {i["id"]: i for i in server.dataset_items("lf-gold")}
    finally:
        unregister_fake()
    assert build.upload is not None and build.upload.updated == 3
    for item in build.items:
        got = stored.get(langfuse_id(item.id))
        assert got is not None, sorted(stored)
        assert got["metadata"]["gold"] == item.metadata["gold"]
        assert got["expectedOutput"]["entities"] == [
            e.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
            for e in item.expected.entities
        ]


def langfuse_id(item_id: str) -> str:
    from extraction_eval.backends.langfuse import langfuse_item_id

    return langfuse_item_id("lf-gold", item_id)


def test_a_bad_config_file_is_an_invalid_config_value(tmp_path: Path) -> None:
    from extraction_eval.seeds.ensemble.config import load_gold_config

    cfg = tmp_path / "gold.toml"
    cfg.write_text('dataset = "small"\ncolour = 1\n')
    with pytest.raises(InvalidValue) as info:
        load_gold_config(cfg)
    # the library names the field; the CLI turns it into --config (no flag in the library)
    assert info.value.field == "config"
    assert info.value.problem.startswith(f"{cfg}: unknown key 'colour'")
    assert "--" not in info.value.problem


def test_an_item_every_run_failed_on_keeps_its_gold(store: LocalStore) -> None:
    items = store.get_items(SAMPLE_DATASET)[:2]
    store.upload_items("two", items)
    # both models answer the second item; on the first both fail
    answers = {items[1].id: _payload(items[1].expected), items[0].id: {"text": "{not json"}}
    register_fake("bad1", {"items": answers})
    register_fake("bad2", {"items": answers})
    try:
        build = build_gold(
            GoldConfig(dataset="two", models=parse_models(["fake:bad1", "fake:bad2"])), store
        )
    finally:
        unregister_fake()
    assert len(build.errors) == 2
    assert build.votes[items[0].id].voters == ()
    # no vote is not a vote for an empty gold: the item keeps what it had, marked unvoted
    assert items[0].expected.entities
    assert build.items[0].expected == items[0].expected
    meta = build.items[0].metadata["gold"]
    assert meta["unvoted"] is True
    assert len(meta["entities"]) == len(items[0].expected.entities)
    assert any(items[0].id in n and "every run failed" in n for n in build.notes)
    assert store.get_items("two")[0].expected == items[0].expected
    assert build.items[1].expected == items[1].expected


def test_a_lone_surrogate_in_an_answer_is_voted_on_as_u_fffd(store: LocalStore) -> None:
    """Before: the build stopped with UnicodeEncodeError when storing the aggregate."""
    items = store.get_items(SAMPLE_DATASET)[:2]
    store.upload_items("two", items)
    broken = items[0].expected.model_copy(
        update={
            "entities": [
                items[0].expected.entities[0].model_copy(update={"name": "Ada \ud83d"}),
                *items[0].expected.entities[1:],
            ]
        }
    )
    answers = {items[0].id: _payload(broken), items[1].id: _payload(items[1].expected)}
    register_fake("s1", {"items": answers})
    register_fake("s2", {"items": answers})
    try:
        build = build_gold(
            GoldConfig(dataset="two", models=parse_models(["fake:s1", "fake:s2"])), store
        )
    finally:
        unregister_fake()
    assert build.errors == []
    assert build.items[0].expected.entities[0].name == "Ada \ufffd"
    assert any("2 answers had lone UTF-16 surrogates" in n for n in build.notes), build.notes
    assert store.get_items("two")[0].expected.entities[0].name == "Ada \ufffd"


def test_models_are_asked_with_the_datasets_schema(store: LocalStore) -> None:
    """Items without a schema of their own are asked about with the dataset's, as a run asks
    (before: gold build ignored it, so the models were never told the dataset's types); the
    built items keep their own (none), the dataset's still applying to them."""
    items = [i.model_copy(update={"schema_": None}) for i in store.get_items(SAMPLE_DATASET)[:2]]
    schema = Schema(entity_types=["Peop", "Org"], labels={"Peop": "person", "Org": "organization"})
    store.upload_items("typed", items, schema=schema)
    fake = register_fake("t", {"items": {i.id: _payload(i.expected) for i in items}})
    try:
        build = build_gold(GoldConfig(dataset="typed", models=parse_models(["fake:t"])), store)
    finally:
        unregister_fake()
    assert len(fake.calls) == 2
    for call in fake.calls:
        sent = " ".join(m.content for m in call.request.messages)
        assert "Peop" in sent and "Org" in sent, sent
    assert [i.schema_ for i in build.items] == [None, None]
    assert store.get_dataset("typed").schema == schema
