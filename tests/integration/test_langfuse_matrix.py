"""A matrix in LangFuse mode: every cell an experiment on the same dataset, with the cell's
parameters in its metadata. Asserted on what the loopback fake LangFuse server received."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from extraction_eval.backends.langfuse import close_client, push_prompt
from extraction_eval.backends.local import LocalStore
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.matrix import run_matrix
from extraction_eval.experiments.matrix_config import MatrixConfig
from extraction_eval.llm.fake import register_fake, unregister_fake
from tests.integration.test_langfuse_experiment import (
    DATASET,
    item_runs,
    run_scores,
    upload,
    use_langfuse,
)
from tests.support.langfuse_server import FakeLangfuse, client_for

ANSWER = {"entities": [{"name": "Mara Velloso", "type": "person"}], "relationships": []}


@pytest.fixture(autouse=True)
def _fakes() -> Iterator[None]:
    for name in ("mx-a", "mx-b"):
        register_fake(name, {"default": {"json": ANSWER}})
    yield
    unregister_fake()


def test_every_cell_is_an_experiment_on_the_same_dataset_with_its_parameters(
    server: FakeLangfuse, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = LocalStore().get_items(DATASET)[:3]
    dataset_id = upload(server, items)
    helper = client_for(server, "push")
    assert push_prompt(helper, "extraction", label="x") == 1
    close_client(helper)
    use_langfuse(server, monkeypatch, "matrix")
    outcome = run_matrix(
        MatrixConfig(
            models=("fake:mx-a", "fake:mx-b"),
            prompt_labels=("x",),
            temperatures=(0.0, 0.7),
            repeats=2,
            name="lfm",
            base=RunConfig(dataset=DATASET, concurrency=4, backend="langfuse"),
        )
    )
    assert outcome.problems == []
    cells = {c.cell.name: c for c in outcome.cells}
    assert len(cells) == 8

    # what the server received: one experiment per cell, every item linked, same dataset
    roots = item_runs(server)
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for span in roots.values():
        by_experiment.setdefault(span["attributes"]["langfuse.experiment.id"], []).append(span)
    assert len(by_experiment) == 8
    names = set()
    for experiment_id, spans in by_experiment.items():
        assert len(spans) == len(items)
        attrs = spans[0]["attributes"]
        assert {s["attributes"]["langfuse.experiment.dataset.id"] for s in spans} == {dataset_id}
        name = attrs["langfuse.experiment.name"]
        names.add(name)
        cell = cells[name].cell
        assert cells[name].run.experiment_id == experiment_id
        meta = json.loads(attrs["langfuse.experiment.metadata"])
        assert meta["model"] == cell.model and meta["provider"] == "fake"
        assert meta["temperature"] == str(cell.temperature)
        assert (meta["prompt_label"], meta["prompt_source"]) == ("x", "langfuse")
        assert meta["matrix"] == "lfm" and meta["matrix_repeat"] == str(cell.repeat)
        assert meta["dataset"] == DATASET
        # run-level scores on each experiment
        assert run_scores(server, experiment_id)["items"]["value"] == len(items)
    assert names == set(cells)
    # one dataset version resolved for all cells; every cell finished in the mirror
    assert len({c.run.dataset_version for c in outcome.cells}) == 1
    assert all(c.run.status == "finished" and c.run.backend == "langfuse" for c in outcome.cells)
    groups = outcome.table.repeats
    assert len(groups) == 4  # 2 models x 2 temperatures, 2 repeats each
    assert all(g.agreement.rate == 1.0 for g in groups)  # the fake answers alike every time
