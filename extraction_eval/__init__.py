"""extraction-eval: score LLM extraction pipelines, locally or in LangFuse.

The public API, for a notebook or a script: the objects the CLI itself uses.

    from extraction_eval import PipelineConfig, RunConfig, compare_runs, run_experiment

    pipeline = PipelineConfig(model="offline:baseline")
    outcome = run_experiment(RunConfig(name="nb-1", pipeline=pipeline))
    outcome.summary.values["entity_f1"]

Every name is imported on first use (PEP 562), so ``import extraction_eval`` (and the CLI's
``--help``) loads none of the library behind it: no numpy, pydantic models, provider SDK or
langfuse until a name is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from extraction_eval.version import __version__

if TYPE_CHECKING:
    from extraction_eval.analysis.compare import CompareOptions, RunComparison, compare_runs
    from extraction_eval.analysis.compare.run_diff import diff_runs
    from extraction_eval.analysis.judged_runs import judge_run
    from extraction_eval.analysis.score_files import ScoredFiles, score_files
    from extraction_eval.analysis.stored import get_run
    from extraction_eval.analysis.worst import run_worst_items
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.errors import ExtractionEvalError, InvalidValue
    from extraction_eval.evaluators.config import ScoringConfig
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.matrix import run_matrix
    from extraction_eval.experiments.matrix_config import MatrixConfig
    from extraction_eval.experiments.partition import Shard
    from extraction_eval.experiments.run import arun_local, estimate_run, run_experiment
    from extraction_eval.experiments.runner import RunOutcome
    from extraction_eval.experiments.shards import finalize_run, merge_runs
    from extraction_eval.judge.factory import make_judge
    from extraction_eval.pipeline.base import PipelineConfig
    from extraction_eval.seeds.ensemble.build import build_gold
    from extraction_eval.seeds.ensemble.config import GoldConfig
    from extraction_eval.types import (
        DatasetItem,
        Entity,
        Extraction,
        ItemResult,
        Relationship,
        Schema,
        Score,
    )

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["arun_local", "estimate_run", "run_experiment"], "extraction_eval.experiments.run"
    ),
    **dict.fromkeys(["RunConfig"], "extraction_eval.experiments.config"),
    **dict.fromkeys(["RunOutcome"], "extraction_eval.experiments.runner"),
    **dict.fromkeys(["PipelineConfig"], "extraction_eval.pipeline.base"),
    **dict.fromkeys(["ScoringConfig"], "extraction_eval.evaluators.config"),
    **dict.fromkeys(["Shard"], "extraction_eval.experiments.partition"),
    **dict.fromkeys(["MatrixConfig"], "extraction_eval.experiments.matrix_config"),
    **dict.fromkeys(["run_matrix"], "extraction_eval.experiments.matrix"),
    **dict.fromkeys(["finalize_run", "merge_runs"], "extraction_eval.experiments.shards"),
    **dict.fromkeys(["ScoredFiles", "score_files"], "extraction_eval.analysis.score_files"),
    **dict.fromkeys(
        ["CompareOptions", "RunComparison", "compare_runs"], "extraction_eval.analysis.compare"
    ),
    **dict.fromkeys(["diff_runs"], "extraction_eval.analysis.compare.run_diff"),
    **dict.fromkeys(["judge_run"], "extraction_eval.analysis.judged_runs"),
    **dict.fromkeys(["make_judge"], "extraction_eval.judge.factory"),
    **dict.fromkeys(["get_run"], "extraction_eval.analysis.stored"),
    **dict.fromkeys(["run_worst_items"], "extraction_eval.analysis.worst"),
    **dict.fromkeys(["GoldConfig"], "extraction_eval.seeds.ensemble.config"),
    **dict.fromkeys(["build_gold"], "extraction_eval.seeds.ensemble.build"),
    **dict.fromkeys(["LocalStore"], "extraction_eval.backends.local"),
    **dict.fromkeys(["ExtractionEvalError", "InvalidValue"], "extraction_eval.errors"),
    **dict.fromkeys(
        ["DatasetItem", "Entity", "Extraction", "ItemResult", "Relationship", "Schema", "Score"],
        "extraction_eval.types",
    ),
}

__all__ = [
    "CompareOptions",
    "DatasetItem",
    "Entity",
    "Extraction",
    "ExtractionEvalError",
    "GoldConfig",
    "InvalidValue",
    "ItemResult",
    "LocalStore",
    "MatrixConfig",
    "PipelineConfig",
    "Relationship",
    "RunComparison",
    "RunConfig",
    "RunOutcome",
    "Schema",
    "Score",
    "ScoredFiles",
    "ScoringConfig",
    "Shard",
    "__version__",
    "arun_local",
    "build_gold",
    "compare_runs",
    "diff_runs",
    "estimate_run",
    "finalize_run",
    "get_run",
    "judge_run",
    "make_judge",
    "merge_runs",
    "run_experiment",
    "run_matrix",
    "run_worst_items",
    "score_files",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'extraction_eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
