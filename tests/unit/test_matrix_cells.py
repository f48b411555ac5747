"""The matrix's pure parts: cells and their names, option checks, per-item agreement, spread
and the best cell per metric."""

from __future__ import annotations

from pathlib import Path

import pytest

from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.stats.repeat_spread import (
    best_cells,
    canonical_extraction,
    item_agreement,
    spread,
)
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.matrix import interleave
from extraction_eval.experiments.matrix_config import MatrixConfig, temperature_tag
from extraction_eval.types import DatasetItem, Entity, Extraction


def test_cells_are_named_prefix_model_label_temperature_repeat() -> None:
    matrix = MatrixConfig(
        models=("openai:gpt-4o-mini", "fake:b"),
        prompt_labels=("x", None),
        temperatures=(0, 0.7),
        repeats=2,
        name="exp",
    )
    cells = matrix.cells()
    assert len(cells) == 2 * 2 * 2 * 2
    assert cells[0].name == "exp/openai:gpt-4o-mini/x/t0/r1"
    assert cells[3].name == "exp/openai:gpt-4o-mini/x/t0.7/r2"
    assert cells[4].name == "exp/openai:gpt-4o-mini/bundled/t0/r1"
    assert cells[3].group == "exp/openai:gpt-4o-mini/x/t0.7"
    c = cells[3].config
    assert (c.name, c.pipeline.model, c.pipeline.prompt_label) == (
        cells[3].name,
        "openai:gpt-4o-mini",
        "x",
    )
    assert (c.pipeline.temperature, c.pipeline.repeat) == (0.7, 2)
    single = MatrixConfig(models=("fake:a",), name="p").cells()
    assert [s.name for s in single] == ["p/fake:a/bundled/t0"]
    assert single[0].config.pipeline.repeat == 0
    assert MatrixConfig(models=("fake:a",)).named().name.startswith("matrix-")


def test_temperature_tags_read_back_as_the_same_number() -> None:
    assert [temperature_tag(t) for t in (0, 0.0, 0.7, 1, 1.25, 1e-7)] == [
        "t0",
        "t0",
        "t0.7",
        "t1",
        "t1.25",
        "t1e-07",
    ]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"models": ()}, "model"),
        ({"models": ("fake:a", "fake:a")}, "model"),
        ({"models": ("",)}, "model"),
        ({"temperatures": (0.0, 0)}, "temperature"),
        ({"temperatures": (-1.0,)}, "temperature"),
        ({"temperatures": (float("nan"),)}, "temperature"),
        ({"temperatures": ()}, "temperature"),
        ({"prompt_labels": ("x", "x")}, "prompt_label"),
        ({"prompt_labels": (" ",)}, "prompt_label"),
        ({"repeats": 0}, "repeats"),
        ({"name": ""}, "name"),
        ({"base": RunConfig(resume=True)}, "resume"),
        ({"base": RunConfig(name="x")}, "name"),
        ({"base": RunConfig(retry_errors=True), "name": "n"}, "retry_errors"),
    ],
)
def test_bad_axes_are_refused_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"models": ("fake:a",), **kwargs}
    with pytest.raises(InvalidValue) as info:
        MatrixConfig(**args)  # type: ignore[arg-type]
    assert info.value.field == field


def test_interleave_takes_one_item_of_each_cell_in_turn() -> None:
    a = [DatasetItem(id=f"a{i}", text="t") for i in range(3)]
    b = [DatasetItem(id=f"b{i}", text="t") for i in range(1)]
    got = [(cell, item.id) for cell, item in interleave([a, b, []])]
    assert got == [(0, "a0"), (1, "b0"), (0, "a1"), (0, "a2")]


def test_the_repeat_index_is_in_the_cache_key_only_when_set() -> None:  # 0: not set
    from extraction_eval.llm.fake import FakeProvider
    from extraction_eval.pipeline.base import PipelineConfig
    from extraction_eval.pipeline.llm import LLMPipeline
    from extraction_eval.prompts.template import load_local_prompt
    from extraction_eval.types import DatasetItem

    item = DatasetItem(id="i", text="t")

    def key(repeat: int) -> str:
        config = PipelineConfig(model="fake:m", temperature=0.7, repeat=repeat)
        pipe = LLMPipeline(FakeProvider.from_script({}), load_local_prompt(), config)
        return pipe.key_for(item)

    plain = key(0)
    fields = LLMPipeline(
        FakeProvider.from_script({}), load_local_prompt(), PipelineConfig(model="fake:m")
    ).answer_fields(item)
    assert "repeat" not in {k for k, v in fields.items() if v is not None}
    keys = {key(k) for k in (1, 2, 3)}
    assert len(keys) == 3 and plain not in keys


def _ex(*names: str) -> Extraction:
    return Extraction(entities=[Entity(name=n, type="person") for n in names])


def test_canonical_extraction_ignores_order_but_not_any_field() -> None:
    assert canonical_extraction(_ex("A", "B")) == canonical_extraction(_ex("B", "A"))
    assert canonical_extraction(_ex("A", "A")) != canonical_extraction(_ex("A"))  # a multiset
    typed = Extraction(entities=[Entity(name="A", type="org"), Entity(name="B", type="person")])
    assert canonical_extraction(typed) != canonical_extraction(_ex("A", "B"))
    quoted = Extraction(entities=[Entity(name="A", type="person", evidence="A")])
    assert canonical_extraction(quoted) != canonical_extraction(_ex("A"))
    assert canonical_extraction(None) is None


def test_item_agreement_counts_by_hand() -> None:
    a, b = canonical_extraction(_ex("A")), canonical_extraction(_ex("B"))
    r1 = {"i1": a, "i2": a, "i3": None, "i4": a, "i5": a}
    r2 = {"i1": a, "i2": b, "i3": None, "i4": a}  # i5 not run yet in r2
    got = item_agreement([r1, r2])
    # i1, i4 agree; i2 differs; i3 failed (in both: still not agreement); i5 incomplete
    assert (got.compared, got.agreeing, got.errored, got.incomplete) == (4, 2, 1, 1)
    assert got.rate == 0.5 and got.disagreeing == ("i2", "i3")
    assert item_agreement([{}, {}]).rate is None


def test_spread_is_mean_and_sample_std_over_defined_values() -> None:
    s = spread([0.5, 0.7, None, 0.9])
    assert s.n == 3 and s.mean == pytest.approx(0.7) and s.std == pytest.approx(0.2)
    assert spread([0.5]).std is None and spread([None]).mean is None


def test_best_cells_keeps_ties_and_knows_lower_is_better() -> None:
    rows = {
        "a": {"f1": 0.8, "cost": 2.0},
        "b": {"f1": 0.9, "cost": None},
        "c": {"f1": 0.9, "cost": 1.0},
    }
    best = best_cells(rows, ["f1", "cost", "other"], lower_is_better=["cost"])
    assert best == {"f1": ("b", "c"), "cost": ("c",), "other": ()}


@pytest.mark.parametrize(
    ("models", "labels", "field"),
    [
        (("fake:a",), ("bundled", None), "prompt_label"),  # no label is named "bundled"
        (("fake:a/x", "fake:a"), ("y", "x/y"), "prompt_label"),  # '/' makes names meet
    ],
)
def test_two_cells_with_one_run_name_are_refused(
    models: tuple[str, ...], labels: tuple[str | None, ...], field: str
) -> None:
    with pytest.raises(InvalidValue) as info:
        MatrixConfig(models=models, prompt_labels=labels, name="exp")
    assert info.value.field == field
    assert "same run name" in info.value.problem


def test_significance_rows_use_the_gold_the_run_was_scored_against(tmp_path: Path) -> None:
    """A cell run with --min-gold-confidence is compared on the gold it was scored against:
    the rows the paired bootstrap draws from sum to the run's own counts."""
    import asyncio

    from extraction_eval.analysis.matrix_table import _count_rows
    from extraction_eval.backends.local import SAMPLE_DATASET, LocalStore
    from extraction_eval.evaluators import ContextIndex, ScoringConfig
    from extraction_eval.evaluators.counts import COLUMNS
    from extraction_eval.experiments.run import arun_local
    from extraction_eval.pipeline.base import PipelineConfig

    store = LocalStore(tmp_path / "store.db")
    items = []
    for item in store.get_items(SAMPLE_DATASET)[:4]:
        ents = [{"confidence": 0.5, "source": "vote"} for _ in item.expected.entities]
        rels = [{"confidence": 1.0, "source": "vote"} for _ in item.expected.relationships]
        gold = {"entities": ents, "relationships": rels}
        items.append(item.model_copy(update={"metadata": {**item.metadata, "gold": gold}}))
    store.upload_items("voted", items)
    items = store.get_items("voted")
    config = RunConfig(
        dataset="voted",
        name="trusting",
        pipeline=PipelineConfig(model="offline:baseline"),
        min_gold_confidence=0.9,
    )
    outcome = asyncio.run(arun_local(config, store=store))
    report = (outcome.run.summary or {})["report"]
    rows, present = _count_rows(
        store, outcome.run, items, ScoringConfig(), ContextIndex({i.id: i.text for i in items})
    )
    assert present.all()
    sums = dict(zip(COLUMNS, rows.sum(axis=0).tolist(), strict=True))
    # every gold entity is below 0.9: none is scored against, so none is missed
    assert report["entities"]["fn"] == 0
    assert (sums["entity_tp"], sums["entity_fp"], sums["entity_fn"]) == (
        report["entities"]["tp"],
        report["entities"]["fp"],
        report["entities"]["fn"],
    )
    store.close()
