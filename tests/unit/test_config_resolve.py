"""A config file and the options given over it are merged by the library (``MatrixConfig.
resolve``, ``GoldConfig.resolve``), and a run's closing verdict (budget, thresholds, baseline
gate) is a library call (``check_run``): a notebook gets what the CLI gets, and the library's
messages name fields, the CLI's the flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from extraction_eval.analysis.checks import check_run, find_baseline
from extraction_eval.commands.common import error_line
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.matrix_config import MatrixConfig
from extraction_eval.experiments.partition import Shard
from extraction_eval.experiments.run import run_experiment
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.seeds.ensemble.config import GoldConfig, GoldModel


def test_a_matrix_file_with_options_over_it(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(
        'model = ["fake:a", "fake:b"]\nconcurrency = 3\nprompt-label = "prod"\n'
        'temperature = [0, 0.7]\nshard = "auto"\nshard_count = 2\n',
        encoding="utf-8",
    )
    env = {"JOB_COMPLETION_INDEX": "1"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        mp.delenv("EXTRACTION_EVAL_SHARD_INDEX", raising=False)
        matrix = MatrixConfig.resolve(
            path, {"concurrency": 5, "model": None, "temperature": [], "limit": None}
        )
    assert matrix.models == ("fake:a", "fake:b")  # None / [] given: the file's
    assert matrix.temperatures == (0, 0.7) and matrix.prompt_labels == ("prod",)
    assert matrix.base.concurrency == 5  # given over the file: wins
    assert matrix.base.shard == Shard(2, 2) and matrix.base.dataset == "extraction-eval"
    assert MatrixConfig.resolve(None, {"model": ["fake:a"]}).base.concurrency == 8  # default
    # a matrix refused for a held lock can be told to take it over, as a run can
    assert not MatrixConfig.resolve(None, {"model": ["fake:a"]}).base.take_over_lock
    over = MatrixConfig.resolve(None, {"model": ["fake:a"], "take_over_lock": True})
    assert over.base.take_over_lock


def test_a_bad_matrix_file_names_the_config_field(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text('model = "fake:a"\ncolour = "red"\n', encoding="utf-8")
    with pytest.raises(InvalidValue) as info:
        MatrixConfig.resolve(path)
    assert info.value.field == "config" and "--" not in str(info.value)
    assert "unknown key 'colour'" in str(info.value)
    assert error_line(info.value).startswith(f"--config {path}: unknown key 'colour'")
    path.write_text("model = [", encoding="utf-8")
    with pytest.raises(InvalidValue, match="not valid TOML"):
        MatrixConfig.resolve(path)
    with pytest.raises(InvalidValue) as info:
        MatrixConfig.resolve(None, {})
    assert info.value.field == "model"


def test_a_gold_file_with_options_over_it(tmp_path: Path) -> None:
    path = tmp_path / "gold.toml"
    path.write_text(
        'dataset = "demo"\nmin_agreement = 0.6\nmodels = ["fake:a:2:1"]\n', encoding="utf-8"
    )
    config = GoldConfig.resolve(
        path, {"models": ["fake:b"], "min_agreement": 0.7, "dataset_version": "3", "batch": None}
    )
    assert config.models == (GoldModel("fake:a", 2, 1.0), GoldModel("fake:b", 1, 1.0))
    assert config.min_agreement == 0.7 and config.dataset_version == 3 and not config.batch
    assert GoldConfig.resolve(path).min_agreement == 0.6


@pytest.mark.parametrize(
    ("settings", "field", "library", "cli"),
    [
        (
            {"models": ["fake:a"]},
            "dataset",
            "dataset is required (or dataset in config)",
            "--dataset is required (or dataset in --config)",
        ),
        (
            {"dataset": "demo"},
            "models",
            "models is required (or models in config)",
            "--models is required (or models in --config)",
        ),
    ],
)
def test_gold_settings_that_are_missing(
    settings: dict[str, object], field: str, library: str, cli: str
) -> None:
    with pytest.raises(InvalidValue) as info:
        GoldConfig.resolve(None, settings)
    assert info.value.field == field and str(info.value) == library
    assert error_line(info.value) == cli


def test_the_runs_closing_checks_as_a_library_call() -> None:
    base = RunConfig(name="base", pipeline=PipelineConfig(model="offline:baseline"))
    run_experiment(base)
    with pytest.raises(InvalidValue) as info:
        find_baseline(None, ["entity_f1=0.01"], "extraction-eval")
    assert error_line(info.value) == (
        "--fail-on-regression needs --baseline RUN (the run to compare with)"
    )
    with pytest.raises(InvalidValue, match="baseline names no stored run: no run named 'nope'"):
        find_baseline("nope", [], "extraction-eval")
    baseline = find_baseline("base", ["entity_f1=0"], "extraction-eval")
    assert baseline is not None and baseline.run.name == "base"
    worse = RunConfig(
        name="worse",
        pipeline=PipelineConfig(pipeline="tests.support.pipelines:first_entity"),
        fail_under={"entity_f1": 0.99},
    )
    outcome = run_experiment(worse)
    checks = check_run(outcome, worse, baseline)
    assert checks.budget is None and checks.failed
    assert checks.thresholds and checks.thresholds[0].startswith("entity_f1=")
    assert checks.baseline is not None and checks.baseline.gate  # the gate failed
    assert checks.baseline.b.name == "worse" and checks.baseline.a.name == "base"
    again = RunConfig(name="again", pipeline=PipelineConfig(model="offline:baseline"))
    same = check_run(run_experiment(again), again, find_baseline("base", [], "extraction-eval"))
    assert not same.failed and same.baseline is not None and same.baseline.gate is None


def test_run_matrix_and_gold_build_share_each_option_declaration() -> None:
    """A flag the three commands have reads the same in each one's help (one declaration in
    ``commands/options.py``), whatever its type there."""
    import typer

    from extraction_eval.cli import app

    root: Any = typer.main.get_command(app)
    commands = {"run": root.commands["run"], "matrix": root.commands["matrix"]}
    commands["gold build"] = root.commands["gold"].commands["build"]
    helps: dict[str, dict[str, str | None]] = {}
    for name, command in commands.items():
        for param in command.params:
            if param.param_type_name == "option":
                helps.setdefault(param.opts[0], {})[name] = param.help
    shared = {flag: by for flag, by in helps.items() if len(by) > 1}
    assert {"--dataset", "--concurrency", "--max-cost", "--dry-run", "--shard"} <= set(shared)
    assert {"--temperature", "--base-url", "--config"} <= {
        flag for flag, by in shared.items() if "gold build" in by
    }
    different = {flag: by for flag, by in shared.items() if len(set(by.values())) > 1}
    assert different == {}


def test_a_matrix_files_cache_switches_and_the_options_meet(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text('model = "fake:a"\nno_cache = true\nmax_objects = 50\n', encoding="utf-8")
    matrix = MatrixConfig.resolve(path, {"no_cache": False, "refresh_cache": False})
    assert matrix.base.pipeline.cache == "off"  # the file's switch holds; False is not given
    assert matrix.base.scoring.max_objects == 50
    with pytest.raises(InvalidValue) as info:
        MatrixConfig.resolve(path, {"refresh_cache": True})
    assert str(info.value) == "no_cache and refresh_cache exclude each other; give one"
    assert error_line(info.value) == "--no-cache and --refresh-cache exclude each other; give one"


def test_strict_json_in_a_matrix_file_or_as_the_flag_reaches_every_cell(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text('model = ["fake:a", "fake:b"]\nstrict-json = true\n', encoding="utf-8")
    from_file = MatrixConfig.resolve(path, {"strict_json": False})  # False: not given
    assert [c.config.pipeline.strict_json for c in from_file.cells()] == [True, True]
    flag = MatrixConfig.resolve(None, {"model": ["fake:a"], "strict_json": True})
    assert flag.base.pipeline.strict_json
    assert not MatrixConfig.resolve(None, {"model": ["fake:a"]}).base.pipeline.strict_json


def test_a_protocol_metric_given_twice_is_refused_as_a_plain_one_is() -> None:
    """The gate keeps one tolerance a metric: two for one protocol metric is a mistake said
    at once (as for ``entity_f1``), not the last one silently kept."""
    twice = ["semeval.strict.f1=0.01", "semeval.strict.f1=0.5"]
    with pytest.raises(InvalidValue, match=r"semeval\.strict\.f1 given twice"):
        find_baseline("base", twice, "extraction-eval", protocols=["semeval"])
    with pytest.raises(InvalidValue, match="entity_f1 given twice"):
        find_baseline("base", ["entity_f1=0.01", "entity_f1=0.5"], "extraction-eval")


def test_the_stores_the_checks_open_for_themselves_are_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``find_baseline`` and ``check_run`` given no store open one each (SQLite connections
    and files): both are closed when the checks are done, not left to the garbage collector."""
    import extraction_eval.analysis.checks as checks_module
    from extraction_eval.backends.local import LocalStore

    config = RunConfig(name="base", pipeline=PipelineConfig(model="offline:baseline"))
    outcome = run_experiment(config)
    opened: list[Any] = []
    closed: list[Any] = []

    class Recorded(LocalStore):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            opened.append(self)

        def close(self) -> None:
            closed.append(self)
            super().close()

    monkeypatch.setattr(checks_module, "LocalStore", Recorded)
    baseline = find_baseline("base", ["entity_f1=0.5"], "extraction-eval")
    assert baseline is not None
    checks = check_run(outcome, config, baseline, protocols=["semeval"])
    assert checks.protocols is not None and checks.protocols_paired is not None
    assert len(opened) == 2 and all(s in closed for s in opened)
