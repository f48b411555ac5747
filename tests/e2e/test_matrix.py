"""``extraction-eval matrix`` end to end with the scripted fake provider: the cells' runs, their
names and configs, the best-cell table, one shared worker pool, repeats and their per-item
agreement (against a hand count), and ``--resume`` continuing only unfinished cells."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import main
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments import matrix as matrix_module
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.matrix import run_matrix
from extraction_eval.experiments.matrix_config import MatrixConfig
from extraction_eval.llm.base import CompletionRequest
from extraction_eval.llm.fake import SCRIPT_ENV, register_fake, unregister_fake
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.types import DatasetItem, Entity, Extraction, Relationship

DATASET = "mx"
TEXT = "Ada Lovelace worked with Charles Babbage in London."
ADA = {"name": "Ada Lovelace", "type": "person"}
BABBAGE = {"name": "Charles Babbage", "type": "person"}
BABBAGE_HUMAN = {"name": "Charles Babbage", "type": "human"}  # label y: a wrong type
LONDON = {"name": "London", "type": "location"}  # not in the gold: a false positive
COLLEAGUES = {"source": "Ada Lovelace", "type": "colleague_of", "target": "Charles Babbage"}


@pytest.fixture(autouse=True)
def _no_registered_fakes() -> Iterator[None]:
    yield
    unregister_fake()


def _items(n: int = 3) -> list[DatasetItem]:
    gold = Extraction(
        entities=[Entity(name="Ada Lovelace", type="person"), Entity(**BABBAGE)],
        relationships=[Relationship(**COLLEAGUES)],
    )
    # distinct texts: the response cache must not answer one item with another's answer
    return [
        DatasetItem(id=f"i{k}", text=f"{TEXT} (note {k})", expected=gold) for k in range(1, n + 1)
    ]


def _setup(n: int = 3) -> LocalStore:
    """A small dataset, and prompts x and y that differ by a marker the fake can see."""
    store = LocalStore()
    store.upload_items(DATASET, _items(n))
    for label in ("x", "y"):
        store.push_prompt(
            "extraction",
            [
                {"role": "system", "content": "Extract entities."},
                {"role": "user", "content": f"STYLE-{label.upper()} {{{{text}}}}"},
            ],
            labels=[label],
        )
    return store


# What each cell answers (model, label marker, temperature) -> its known scores on every item:
#   a/x/t0   Ada, Babbage                  entity 1.0  typed 1.0  rel 0.0
#   a/y/t0   Ada, Babbage(human)           entity 1.0  typed 0.5  rel 0.0
#   a/*/t0.7 Ada                           entity 2/3  typed 2/3  rel 0.0
#   b/x/t0   Ada, Babbage, London + rel    entity 0.8  typed 0.8  rel 1.0
#   b/y/t0   Ada, Babbage(human), London   entity 0.8  typed 0.4  rel 1.0
#   b/*/t0.7 Ada, London + rel             entity 0.5  typed 0.5  rel 1.0
ANSWERS: dict[tuple[str, str, float], dict[str, Any]] = {
    ("a", "X", 0.0): {"entities": [ADA, BABBAGE], "relationships": []},
    ("a", "Y", 0.0): {"entities": [ADA, BABBAGE_HUMAN], "relationships": []},
    ("a", "X", 0.7): {"entities": [ADA], "relationships": []},
    ("a", "Y", 0.7): {"entities": [ADA], "relationships": []},
    ("b", "X", 0.0): {"entities": [ADA, BABBAGE, LONDON], "relationships": [COLLEAGUES]},
    ("b", "Y", 0.0): {"entities": [ADA, BABBAGE_HUMAN, LONDON], "relationships": [COLLEAGUES]},
    ("b", "X", 0.7): {"entities": [ADA, LONDON], "relationships": [COLLEAGUES]},
    ("b", "Y", 0.7): {"entities": [ADA, LONDON], "relationships": [COLLEAGUES]},
}
EXPECTED = {  # cell -> (entity_f1, entity_typed_f1, relationship_f1)
    "a/x/t0": (1.0, 1.0, 0.0),
    "a/y/t0": (1.0, 0.5, 0.0),
    "a/x/t0.7": (2 / 3, 2 / 3, 0.0),
    "a/y/t0.7": (2 / 3, 2 / 3, 0.0),
    "b/x/t0": (0.8, 0.8, 1.0),
    "b/y/t0": (0.8, 0.4, 1.0),
    "b/x/t0.7": (0.5, 0.5, 1.0),
    "b/y/t0.7": (0.5, 0.5, 1.0),
}


def _script() -> dict[str, Any]:
    return {
        "rules": [
            {"model": m, "temperature": t, "contains": f"STYLE-{label}", "responses": [answer]}
            for (m, label, t), answer in ANSWERS.items()
        ],
        "default": {"text": "no rule matched"},  # a schema failure: a missing rule shows
    }


def _cell_name(prefix: str, short: str) -> str:
    model, label, temp = short.split("/")
    return f"{prefix}/fake:{model}/{label}/{temp}"


def test_a_2x2x2_matrix_makes_8_runs_with_names_configs_and_the_best_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _setup()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(_script()), encoding="utf-8")
    monkeypatch.setenv(SCRIPT_ENV, str(script))
    argv = ["matrix", "--dataset", DATASET, "--name", "exp", "--concurrency", "3"]
    for option, values in (
        ("--model", ["fake:a", "fake:b"]),
        ("--prompt-label", ["x", "y"]),
        ("--temperature", ["0", "0.7"]),
    ):
        for value in values:
            argv += [option, value]
    monkeypatch.setattr(sys, "argv", ["extraction-eval", *argv])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr().out
    assert done.value.code == 0, out

    runs = {r.name: r for r in store.list_runs(DATASET)}
    assert set(runs) == {_cell_name("exp", c) for c in EXPECTED}
    versions = {r.dataset_version for r in runs.values()}
    assert versions == {store.get_dataset(DATASET).version}
    prompt_hashes = {}
    for short, (entity, typed, rel) in EXPECTED.items():
        run = runs[_cell_name("exp", short)]
        model, label, temp = short.split("/")
        assert run.status == "finished"
        assert run.config["model"] == f"fake:{model}"
        assert run.config["temperature"] == float(temp[1:])
        assert run.config["prompt"]["label"] == label
        assert run.config["concurrency"] == 3  # the matrix's one budget, recorded on each
        assert run.config["matrix"]["name"] == "exp"
        assert run.config["matrix"]["cell"] == {
            "model": f"fake:{model}",
            "prompt_label": label,
            "temperature": float(temp[1:]),
            "repeat": None,
        }
        prompt_hashes.setdefault(label, set()).add(run.config["prompt_hash"])
        values = (run.summary or {})["values"]
        assert values["entity_f1"] == pytest.approx(entity)
        assert values["entity_typed_f1"] == pytest.approx(typed)
        assert values["relationship_f1"] == pytest.approx(rel)
        assert (run.summary or {})["errors"] == 0
    assert all(len(h) == 1 for h in prompt_hashes.values())
    assert prompt_hashes["x"] != prompt_hashes["y"]

    # the table: a row per cell (prefix left out), the best values starred; on 3 items no
    # cell can be told apart from the best (fewer than 10 shared items: insufficient), so
    # every other cell is marked ≈
    rows = {line.split()[0]: line.split()[1:4] for line in out.splitlines() if "fake:" in line}
    assert rows == {
        "fake:a/x/t0": ["1.000★", "1.000★", "0.000≈"],
        "fake:a/y/t0": ["1.000★", "0.500≈", "0.000≈"],
        "fake:a/x/t0.7": ["0.667≈", "0.667≈", "0.000≈"],
        "fake:a/y/t0.7": ["0.667≈", "0.667≈", "0.000≈"],
        "fake:b/x/t0": ["0.800≈", "0.800≈", "1.000★"],
        "fake:b/y/t0": ["0.800≈", "0.400≈", "1.000★"],
        "fake:b/x/t0.7": ["0.500≈", "0.500≈", "1.000★"],
        "fake:b/y/t0.7": ["0.500≈", "0.500≈", "1.000★"],
    }
    assert "with too few shared items for a verdict" in out


def test_the_best_cell_table_from_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _setup()
    register_fake("a", _script())
    register_fake("b", _script())
    outcome = run_matrix(
        MatrixConfig(
            models=("fake:a", "fake:b"),
            prompt_labels=("x", "y"),
            temperatures=(0.0, 0.7),
            name="lib",
            base=RunConfig(
                dataset=DATASET,
                concurrency=4,
                backend="local",
                pipeline=PipelineConfig(price_in=1.0, price_out=2.0),  # USD per 1M tokens
            ),
        ),
        store=store,
    )
    best = outcome.table.best
    assert best["entity_f1"] == (_cell_name("lib", "a/x/t0"), _cell_name("lib", "a/y/t0"))
    assert best["entity_typed_f1"] == (_cell_name("lib", "a/x/t0"),)
    assert best["relationship_f1"] == tuple(
        sorted(_cell_name("lib", c) for c in EXPECTED if c.startswith("b/"))
    )
    # the fake counts words as tokens: the shortest answer (Ada alone) is the cheapest
    assert best["cost_usd"] == (_cell_name("lib", "a/x/t0.7"), _cell_name("lib", "a/y/t0.7"))
    assert len(best["error_rate"]) == 8  # no cell failed anywhere: all tie
    rows = {r.name: r for r in outcome.table.rows}
    for short, (entity, _, _) in EXPECTED.items():
        row = rows[_cell_name("lib", short)]
        assert row.values["entity_f1"] == pytest.approx(entity)
        assert row.items == 3 and row.errors == 0


def test_cells_share_one_pool_and_interleave() -> None:
    """One budget for the whole matrix: never more than ``concurrency`` calls in flight over
    all cells together, and every cell starts at once (not one cell after another)."""
    store = _setup(4)
    in_flight, peak = [0], [0]
    order: list[tuple[str, float]] = []

    async def answer(request: CompletionRequest) -> dict[str, Any]:
        order.append((request.model, request.temperature))
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.01)
        in_flight[0] -= 1
        return {"entities": [ADA], "relationships": []}

    for name in ("a", "b"):
        register_fake(name, {"default": answer})
    run_matrix(
        MatrixConfig(
            models=("fake:a", "fake:b"),
            temperatures=(0.0, 0.3, 0.7),
            name="pool",
            base=RunConfig(dataset=DATASET, concurrency=3, backend="local"),
        ),
        store=store,
    )
    assert len(order) == 6 * 4
    assert peak[0] == 3  # the matrix's budget, not 3 per cell
    assert len(set(order[:6])) == 6  # the first six calls: one from every cell


def _extraction(*entities: dict[str, str]) -> dict[str, Any]:
    return {"entities": list(entities), "relationships": []}


def test_repeats_report_per_item_agreement_equal_to_a_hand_count() -> None:
    """Three repeats of one cell, concurrency 1 (calls in queue order: item by item, repeat
    r1, r2, r3 in turn). By hand:

    - i1: the same answer every time                         -> agrees
    - i2: A, then B for every later call (r1=A, r2=B, r3=B)  -> disagrees
    - i3: the same objects listed in another order (r2)      -> agrees (order ignored)
    - i4: r1 gets a broken answer (schema failure), then A   -> disagrees, errored
    => agreement 2 of 4 = 0.5, 1 errored, disagreeing i2 and i4.
    """
    store = _setup(4)
    a = _extraction(ADA, BABBAGE)
    b = _extraction(ADA)
    register_fake(
        "r",
        {
            "items": {
                "i1": [a],
                "i2": [a, b],
                "i3": [a, _extraction(BABBAGE, ADA), a],
                "i4": [{"text": "{not json"}, a],
            }
        },
    )
    outcome = run_matrix(
        MatrixConfig(
            models=("fake:r",),
            temperatures=(0.7,),
            repeats=3,
            name="rep",
            base=RunConfig(dataset=DATASET, concurrency=1, backend="local"),
        ),
        store=store,
    )
    names = [c.cell.name for c in outcome.cells]
    assert names == [f"rep/fake:r/bundled/t0.7/r{k}" for k in (1, 2, 3)]
    assert [c.run.config["pipeline"]["repeat"] for c in outcome.cells] == [1, 2, 3]
    assert all(c.run.summary and c.run.summary["cache_hits"] == 0 for c in outcome.cells)
    [group] = outcome.table.repeats
    assert group.name == "rep/fake:r/bundled/t0.7"
    agreement = group.agreement
    assert (agreement.compared, agreement.agreeing, agreement.errored) == (4, 2, 1)
    assert agreement.rate == 0.5
    assert agreement.disagreeing == ("i2", "i4")
    # run-to-run mean and std of each metric: over the three runs' own values
    per_run = [c.run.summary["values"]["entity_f1"] for c in outcome.cells if c.run.summary]
    assert len(set(per_run)) > 1  # the repeats really differ
    spread = group.spread["entity_f1"]
    assert spread.mean == pytest.approx(statistics.fmean(per_run))
    assert spread.std == pytest.approx(statistics.stdev(per_run))
    # pooled over the 3 runs with a cluster-bootstrap CI by item; the repeats differ on
    # items, so part of the variance is run-to-run
    v = group.variance["entity_f1"]
    assert (v.repeats, v.items) == (3, 4)
    assert v.ci is not None and v.ci[0] <= v.value <= v.ci[1]
    assert v.run_var > 0 and v.dominant in ("run-to-run", "item sampling")
    from rich.console import Console

    from extraction_eval.views.matrix import render_matrix_table

    console = Console(width=100, record=True)
    render_matrix_table(outcome.table, "rep", console)
    text = " ".join(console.export_text().split())
    assert f"entity F1 pooled over 3 runs {v.value:.3f}" in text and "dominates" in text


def test_resume_continues_only_the_unfinished_cells(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first invocation is interrupted after cells 0 and 1 finished and cell 2 did one
    item (cell 3 none); ``resume`` then calls the model only for what is left, and leaves
    the finished cells' runs as they were."""
    store = _setup(3)
    a = register_fake("a", {"default": _extraction(ADA)})
    b = register_fake("b", {"default": _extraction(ADA)})
    matrix = MatrixConfig(
        models=("fake:a", "fake:b"),
        temperatures=(0.0, 0.7),
        name="res",
        base=RunConfig(dataset=DATASET, concurrency=2, backend="local"),
    )
    real = matrix_module.run_bounded

    async def interrupted(units: list[Any], *args: Any, **kwargs: Any) -> None:
        first = [u for u in units if u[0] in (0, 1)] + [next(u for u in units if u[0] == 2)]
        await real(first, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(matrix_module, "run_bounded", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_matrix(matrix, store=store)
    runs = {r.name: r for r in store.list_runs(DATASET)}
    done_a = {name: r for name, r in runs.items() if "/fake:a/" in name}
    assert sorted(r.status for r in done_a.values()) == ["finished", "finished"]
    assert runs["res/fake:b/bundled/t0"].status == "interrupted"
    assert "res/fake:b/bundled/t0.7" not in runs  # nothing recorded: deleted, as a run is
    assert len(a.calls) == 6 and len(b.calls) == 1

    monkeypatch.setattr(matrix_module, "run_bounded", real)
    with pytest.raises(InvalidValue, match="exists already") as taken:  # the name is taken
        run_matrix(matrix, store=store)
    # the library names the field, the CLI its flag
    assert taken.value.field == "resume" and str(taken.value).endswith("choose another name)")
    argv = ["matrix", "--dataset", DATASET, "--name", "res", "--model", "fake:a", "--model"]
    assert _cli([*argv, "fake:b", "--temperature", "0", "--temperature", "0.7"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --resume is needed to continue matrix 'res'"), err
    assert "(or choose another --name)" in " ".join(err.split()), err
    resumed = run_matrix(
        MatrixConfig(
            models=matrix.models,
            temperatures=matrix.temperatures,
            name="res",
            base=RunConfig(dataset=DATASET, concurrency=2, backend="local", resume=True),
        ),
        store=store,
    )
    assert len(a.calls) == 6  # finished cells: not one call
    assert len(b.calls) == 1 + 2 + 3  # the rest of cell 2, all of cell 3
    assert [c.skipped for c in resumed.cells] == [True, True, False, False]
    assert [c.ran for c in resumed.cells] == [0, 0, 2, 3]
    after = {r.name: r for r in store.list_runs(DATASET)}
    for name, run in done_a.items():
        assert after[name].ended_at == run.ended_at  # left alone, not even re-finalized
    assert all(r.status == "finished" for r in after.values()) and len(after) == 4
    assert all(row.items == 3 for row in resumed.table.rows)


def test_matrix_toml_gives_the_same_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _setup(2)
    register_fake("a", {"default": _extraction(ADA)})
    config = tmp_path / "matrix.toml"
    config.write_text(
        f'dataset = "{DATASET}"\nname = "toml"\nmodel = ["fake:a"]\n'
        'prompt-label = ["x", "y"]\ntemperature = [0, 0.5]\nrepeats = 2\nconcurrency = 2\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(sys, "argv", ["extraction-eval", "matrix", "--config", str(config)])
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    names = sorted(r.name for r in store.list_runs(DATASET))
    assert names == sorted(
        f"toml/fake:a/{label}/{t}/r{k}" for label in "xy" for t in ("t0", "t0.5") for k in (1, 2)
    )
    assert "agreement" in out


def _cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["extraction-eval", *argv])
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code if isinstance(done.value.code, int) else 1


def test_cell_names_with_slashes_work_in_runs_show_export_and_compare(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _setup(2)
    register_fake("a", {"default": _extraction(ADA)})
    register_fake("b", {"default": _extraction(ADA, BABBAGE)})
    run_matrix(
        MatrixConfig(
            models=("fake:a", "fake:b"),
            name="sl",
            base=RunConfig(dataset=DATASET, backend="local"),
        ),
        store=store,
    )
    a, b = "sl/fake:a/bundled/t0", "sl/fake:b/bundled/t0"
    capsys.readouterr()
    assert _cli(["runs", "show", a], monkeypatch) == 0
    assert f"run '{a}'" in capsys.readouterr().out
    assert _cli(["runs", "export", b, "--deterministic"], monkeypatch) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["item_id"] for line in lines] == ["i1", "i2"]
    assert _cli(["compare", a, b], monkeypatch) == 0
    out = capsys.readouterr().out
    assert a in out and b in out


def test_cells_not_significantly_different_from_the_best_are_marked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten items. ``a`` is right on every one; ``b`` misses Babbage on i1 only; ``c`` on every
    item. Paired bootstrap of Δ = cell − a: a replicate that does not draw i1 (probability
    0.9^10 ≈ 0.35, far above 2.5%) has Δ = 0 for ``b``, so its CI reaches 0: not
    significantly different. ``c`` misses Babbage on every item but i2: Δ < 0 on every
    replicate that draws any other item (all but 0.1^10 of them): different, also after the
    Holm correction over the matrix's comparisons. (Had ``c`` missed it on every item, Δ would
    be the same on every replicate, a zero-width CI: "insufficient", not "different".)"""
    store = _setup(10)
    right = {"entities": [ADA, BABBAGE], "relationships": [COLLEAGUES]}
    register_fake("a", {"default": right})
    register_fake("b", {"default": right, "items": {"i1": _extraction(ADA)}})
    register_fake(
        "c",
        {
            "default": {"entities": [ADA], "relationships": [COLLEAGUES]},
            "items": {"i2": right},
        },
    )
    outcome = run_matrix(
        MatrixConfig(
            models=("fake:a", "fake:b", "fake:c"),
            name="sig",
            base=RunConfig(dataset=DATASET, backend="local"),
        ),
        store=store,
    )
    a, b, c = (f"sig/fake:{m}/bundled/t0" for m in "abc")
    table = outcome.table
    assert table.best["entity_f1"] == (a,)
    assert table.similar["entity_f1"] == (b,)
    assert table.best["relationship_f1"] == (a, c)  # tied; b misses i1's relationship
    assert table.similar["relationship_f1"] == (b,)
    from rich.console import Console

    from extraction_eval.views.matrix import render_matrix

    console = Console(width=80, record=True)
    render_matrix(outcome, console)
    text = console.export_text()
    grid = text.split("comparisons with the best cell")[0]  # the matrix table itself
    rows = {line.split()[0]: line.split()[1] for line in grid.splitlines() if "fake:" in line}
    assert rows == {
        "fake:a/bundled/t0": "1.000★",
        "fake:b/bundled/t0": "0.974≈",
        "fake:c/bundled/t0": "0.710",
    }
    worse = [t for t in table.tests if t["verdict"] == "regressed"]
    assert [(t["cell"], t["metric"]) for t in worse] == [(c, "entity_f1"), (c, "entity_typed_f1")]
    for t in worse:  # Holm over the 5 comparisons: 5 × the smallest raw p
        assert t["test"] == "paired bootstrap"
        assert t["p_adjusted"] == pytest.approx(5 * t["p_value"]) and t["p_adjusted"] < 0.05
    assert len(table.tests) == 5  # entity / typed F1: b, c; relationship F1: b (a, c tie)
    assert "5 comparisons with the best cell (paired bootstrap p), corrected: Holm" in text


def test_cells_of_one_model_share_one_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """One client (and connection pool) per model, not per cell: 2 models x 2 temperatures
    x 2 repeats make 8 cells and 2 providers."""
    from extraction_eval.llm import registry

    store = _setup(2)
    register_fake("a", {"default": _extraction(ADA)})
    register_fake("b", {"default": _extraction(ADA)})
    made: list[str] = []
    real = registry.make_provider

    def counting(config: Any) -> Any:
        made.append(config.model)
        return real(config)

    monkeypatch.setattr(registry, "make_provider", counting)
    outcome = run_matrix(
        MatrixConfig(
            models=("fake:a", "fake:b"),
            temperatures=(0.0, 0.7),
            repeats=2,
            name="share",
            base=RunConfig(dataset=DATASET, backend="local"),
        ),
        store=store,
    )
    assert len(outcome.cells) == 8 and sorted(made) == ["fake:a", "fake:b"]


def test_max_cost_is_one_ceiling_for_the_whole_matrix_and_resume_finishes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The estimate is small, but every answer reports 100,000 input tokens ($0.10 at $1 per
    1M): the first item reaches the matrix's $0.05 ceiling, so no other item of any cell
    starts. Resuming with a higher ceiling runs exactly the rest."""
    store = _setup(2)
    expensive = {"entities": [ADA], "relationships": [], "usage": {"input": 100_000, "output": 0}}
    a = register_fake("a", {"default": expensive})
    b = register_fake("b", {"default": expensive})

    def matrix(max_cost: float, resume: bool = False) -> MatrixConfig:
        return MatrixConfig(
            models=("fake:a", "fake:b"),
            temperatures=(0.0, 0.7),
            name="cost",
            base=RunConfig(
                dataset=DATASET,
                backend="local",
                concurrency=1,
                max_cost=max_cost,
                resume=resume,
                pipeline=PipelineConfig(price_in=1.0, price_out=1.0),
            ),
        )

    # --dry-run: each cell's estimate and the total, nothing created
    assert _cli(
        ["matrix", "--dataset", DATASET, "--name", "cost", "--model", "fake:a", "--model",
         "fake:b", "--price-in", "1", "--price-out", "1", "--dry-run"],
        monkeypatch,
    ) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "total" in out and "fake:b/bundled/t0" in out
    assert store.list_runs(DATASET) == [] and not a.calls

    first = run_matrix(matrix(0.05), store=store)
    assert len(a.calls) + len(b.calls) == 1  # one item, then the ceiling
    [stopped] = [c for c in first.cells if c.ran]
    assert stopped.run.status == "stopped: budget"
    not_started = [w for w in first.warnings if "not started: budget" in w]
    assert len(not_started) == 3  # the other three cells
    assert all(
        w.endswith("not started: budget; resume it with a higher ceiling") for w in not_started
    )
    assert sum(c.run.summary["items"] for c in first.cells if c.run.summary) == 1
    stop = first.budget_stop()  # what the CLI says, fields named by the library
    assert stop is not None and str(stop) == (
        "max_cost 0.05 reached; 1 cells have items not run"
        " (continue with resume and a higher max_cost)"
    )

    second = run_matrix(matrix(10.0, resume=True), store=store)
    assert len(a.calls) + len(b.calls) == 4 * 2  # the seven left, once each
    assert all(c.run.status == "finished" for c in second.cells)
    assert [row.items for row in second.table.rows] == [2, 2, 2, 2]
    assert second.budget_stop() is None


def test_shards_of_a_matrix_split_every_cell_s_items(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--shard i/N`` applies to every cell: two shard processes (two stores here) run
    disjoint halves of each cell's items, together all of them, under the same run names."""
    from extraction_eval.experiments.partition import Shard

    register_fake("a", {"default": _extraction(ADA)})
    seen: dict[str, list[str]] = {}
    for index in (1, 2):
        monkeypatch.setenv("EXTRACTION_EVAL_HOME", str(tmp_path / f"shard-{index}"))
        store = _setup(10)
        outcome = run_matrix(
            MatrixConfig(
                models=("fake:a",),
                temperatures=(0.0, 0.7),
                name="sh",
                base=RunConfig(dataset=DATASET, backend="local", shard=Shard(index, 2)),
            ),
            store=store,
        )
        for c in outcome.cells:
            ids = [r.item_id for r in store.results(c.run.id)]
            assert c.run.config["shard"]["index"] == index
            seen.setdefault(c.cell.name, []).extend(ids)
    assert set(seen) == {"sh/fake:a/bundled/t0", "sh/fake:a/bundled/t0.7"}
    for ids in seen.values():
        assert sorted(ids) == sorted(f"i{k}" for k in range(1, 11))  # each item exactly once
    # resuming a finished shard leaves its cells alone (finished = every item of the shard)
    again = run_matrix(
        MatrixConfig(
            models=("fake:a",),
            temperatures=(0.0, 0.7),
            name="sh",
            base=RunConfig(dataset=DATASET, backend="local", shard=Shard(2, 2), resume=True),
        ),
        store=LocalStore(),
    )
    assert [c.skipped for c in again.cells] == [True, True]


def test_the_whole_matrix_runs_with_the_collector_kept_off_earlier_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cells close one by one as their last item finishes: the first to close must not hand
    the objects alive before the matrix back to the collector while other cells still run."""
    import gc

    from tests.support.gc_watch import watch_freeze

    store = _setup()
    register_fake("a", _script())
    frozen = watch_freeze(monkeypatch)
    run_matrix(
        MatrixConfig(
            models=("fake:a",),
            prompt_labels=("x", "y"),
            name="gc",
            base=RunConfig(dataset=DATASET, concurrency=1, backend="local"),
        ),
        store=store,
    )
    assert len(frozen) == 6 and min(frozen) > 1000  # 2 cells x 3 items, the last ones too
    assert gc.get_freeze_count() == 0
