"""A run's full configuration: what is recorded with the run so it describes itself."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators import ScoringConfig
from extraction_eval.experiments.partition import Shard
from extraction_eval.limits import MAX_CONCURRENCY, MAX_WORKERS
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.pipeline.pricing import Pricer
from extraction_eval.redact import safe_url
from extraction_eval.types import DatasetItem, Schema
from extraction_eval.validation import check_choice, check_int, check_number, check_text

Backend = Literal["auto", "local", "langfuse"]

# Packages whose versions change results; recorded with every run.
_TRACKED_PACKAGES = (
    "extraction-eval",
    "langfuse",
    "openai",
    "google-genai",
    "rapidfuzz",
    "scipy",
    "numpy",
    "pydantic",
    "genai-prices",
)


@dataclass(frozen=True)
class RunConfig:
    dataset: str = "extraction-eval"
    name: str | None = None  # run name; None -> "<model>-<timestamp>"
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    concurrency: int = 8
    limit: int | None = None
    resume: bool = False
    retry_errors: bool = False
    # take the run's lock from a process that holds it (one known to be gone; see run_locks)
    take_over_lock: bool = False
    fail_under: dict[str, float] = field(default_factory=dict)  # floors (higher is better)
    fail_over: dict[str, float] = field(default_factory=dict)  # ceilings (lower is better)
    backend: Backend = "auto"
    verify: bool = True  # LangFuse mode: read back what arrived
    dataset_version: int | str | None = None
    # ensemble gold: gold objects below this confidence are not scored against
    min_gold_confidence: float | None = None
    batch: bool = False  # model calls through OpenAI's Batch API (half price, up to 24 h)
    max_cost: float | None = None  # USD ceiling: refused above the estimate, stopped at it
    shard: Shard | None = None  # run only this shard's items (see experiments/partition.py)
    # the run's schema: replaces every item's own and the dataset's (recorded with the run)
    schema: Schema | None = None
    # local mode: run the items in this many worker processes (the run's process stores);
    # not recorded with the run: it changes no result
    workers: int = 1

    def __post_init__(self) -> None:
        """Refuse values that cannot work before a run exists (a notebook gets this too)."""
        check_text("dataset", self.dataset)
        if self.name is not None:
            check_text("name", self.name)
        check_int("concurrency", self.concurrency, minimum=1, maximum=MAX_CONCURRENCY)
        check_int("workers", self.workers, minimum=1, maximum=MAX_WORKERS)
        if self.limit is not None:
            check_int("limit", self.limit, minimum=1)
        check_choice("backend", self.backend, get_args(Backend))
        if self.max_cost is not None:
            check_number("max_cost", self.max_cost, minimum=0)
        check_fail_under(self.fail_under)
        check_fail_under(self.fail_over, ceilings=True)
        if self.batch and (
            self.pipeline.pipeline or self.pipeline.provider in ("offline", "fake", "gemini")
        ):
            raise InvalidValue(
                "batch",
                f"needs an OpenAI, OpenAI-compatible or Anthropic model;"
                f" {self.pipeline.model} is not one",
            )
        if self.min_gold_confidence is not None:
            check_number("min_gold_confidence", self.min_gold_confidence, minimum=0.0, maximum=1.0)
        if self.schema is not None and not isinstance(self.schema, Schema):
            raise InvalidValue("schema", f"must be a Schema, got {type(self.schema).__name__}")
        if self.shard is not None and not isinstance(self.shard, Shard):
            raise InvalidValue("shard", f"must be a Shard (parse_shard('1/4')), got {self.shard!r}")


def parse_fail_over(values: list[str]) -> dict[str, float]:
    """``error_rate=0.05`` strings -> ceilings for the lower-is-better figures."""
    out = _parse_thresholds(values, "fail_over")
    check_fail_under(out, ceilings=True)
    return out


def parse_fail_under(values: list[str]) -> dict[str, float]:
    """``entity_f1=0.8`` strings -> {"entity_f1": 0.8}; a malformed one is a usage error.

    ``attr.<key>`` names are accepted here by shape only: whether the dataset has that
    attribute is known once its items are loaded (:func:`check_fail_under_attributes`).
    """
    out = _parse_thresholds(values, "fail_under")
    check_fail_under(out)
    return out


def _parse_thresholds(values: list[str], field: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for raw in values:
        key, sep, val = raw.partition("=")
        try:
            if not sep or not key.strip():
                raise ValueError
            out[key.strip()] = float(val)
        except ValueError:
            raise InvalidValue(field, f"expects NAME=NUMBER, got {raw!r}") from None
    return out


def fail_under_range(name: str) -> tuple[float, float | None] | None:
    """The values a run-level figure can take (``None``: no upper bound), or ``None`` when
    ``--fail-under`` does not know the name. Rates, P/R/F1, accuracies and their CI bounds
    are in [0, 1]; ``hallucination_rate`` counts objects per gold-empty item (>= 0)."""
    from extraction_eval.experiments.summary import RUN_VALUE_NAMES

    if name == "hallucination_rate":
        return (0.0, None)
    if name in RUN_VALUE_NAMES or name.startswith("attr."):  # attr.<key>: per-attribute rates
        return (0.0, 1.0)
    return None


def check_fail_under(thresholds: Mapping[str, float], *, ceilings: bool = False) -> None:
    """Each threshold names a known run-level value and lies in that value's range; floors
    (``fail_under``) only for figures where higher is better, ceilings (``ceilings=True``,
    ``fail_over``) only for those where lower is better.

    ``attr.<key>`` names are accepted here by shape only: whether the dataset has that
    attribute is known once its items are loaded (:func:`check_fail_under_attributes`).
    """
    from extraction_eval.evaluators.metrics import LOWER_IS_BETTER
    from extraction_eval.experiments.summary import ATTRIBUTE_PREFIX, RUN_VALUE_NAMES

    field = "fail_over" if ceilings else "fail_under"
    for name, value in thresholds.items():
        if ceilings and name not in LOWER_IS_BETTER:
            known = ", ".join(sorted(LOWER_IS_BETTER))
            raise InvalidValue(
                field, f"takes figures where lower is better ({known}), got {name!r}"
            )
        if not ceilings and name in LOWER_IS_BETTER:
            raise InvalidValue(
                field, f"{name} is better when lower: give it a ceiling (fail_over) instead"
            )
        bounds = fail_under_range(name)
        if name.startswith(ATTRIBUTE_PREFIX) and not name[len(ATTRIBUTE_PREFIX) :].strip():
            raise InvalidValue(field, f"{name!r} names no attribute (attr.<key>)")
        if bounds is None:
            known = ", ".join(sorted(RUN_VALUE_NAMES))
            raise InvalidValue(field, f"unknown score {name!r}; known: {known}, attr.<key>")
        low, high = bounds
        try:
            check_number(name, value, minimum=low, maximum=high)
        except InvalidValue as exc:
            raise InvalidValue(field, f"{name}={value}: {exc}") from None


def dataset_attribute_keys(items: Iterable[DatasetItem]) -> set[str]:
    """Attribute keys a dataset has: declared in an item's schema, or on a gold object."""
    keys: set[str] = set()
    for item in items:
        if item.schema_ is not None:
            keys |= item.schema_.attribute_keys()
        for entity in item.expected.entities:
            keys.update(entity.attributes)
        for relationship in item.expected.relationships:
            keys.update(relationship.attributes)
    return keys


def check_fail_under_attributes(
    fail_under: Mapping[str, float], items: Iterable[DatasetItem], dataset: str
) -> None:
    """Refuse ``--fail-under attr.<key>`` for a key the dataset never declares nor has: the
    threshold could never be met, and finding out after a paid run is too late."""
    from extraction_eval.experiments.summary import ATTRIBUTE_PREFIX

    wanted = [name for name in fail_under if name.startswith(ATTRIBUTE_PREFIX)]
    if not wanted:
        return
    keys = dataset_attribute_keys(items)
    for name in sorted(wanted):
        key = name[len(ATTRIBUTE_PREFIX) :]
        base = key.removesuffix("_ci_low").removesuffix("_ci_high")
        if key not in keys and base not in keys:
            known = ", ".join(sorted(keys)) or "none"
            raise InvalidValue(
                "fail_under",
                f"{name}: dataset {dataset!r} has no attribute {key!r} (its attributes: {known})",
            )


def package_versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for name in _TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def git_state(cwd: Path | None = None) -> dict[str, Any] | None:
    """The commit and dirty flag of the working directory, when it is a git checkout."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(dirty)}


def redact_url(url: str) -> str:
    """``url`` without what can hold a credential (``user:password@``, the query string): the
    record reaches exports, reports and LangFuse."""
    return safe_url(url)


def describe(config: RunConfig, **extra: Any) -> dict[str, Any]:
    """The JSON-able record of a run's configuration (no secrets: keys never enter RunConfig)."""
    pipeline = dataclasses.asdict(config.pipeline)
    if config.pipeline.base_url is not None:
        pipeline["base_url"] = redact_url(config.pipeline.base_url)
    user_pipeline = config.pipeline.pipeline
    pricer = Pricer.for_config(config.pipeline)
    record: dict[str, Any] = {
        "dataset": config.dataset,
        # a user's pipeline replaces the model: say so rather than record the unused default
        "provider": "pipeline" if user_pipeline else config.pipeline.provider,
        "model": f"pipeline:{user_pipeline}" if user_pipeline else config.pipeline.model,
        "pipeline": pipeline,
        "temperature": config.pipeline.temperature,
        "concurrency": config.concurrency,
        "limit": config.limit,
        "scoring": scoring_record(config.scoring),
        "min_gold_confidence": config.min_gold_confidence,
        # only when given, so records (and exports) of runs without one stay as they were
        **({"schema": config.schema.model_dump(mode="json")} if config.schema else {}),
        # only when on: --resume compares it (a lenient and a strict reading must not mix)
        **({"strict_json": True} if config.pipeline.strict_json else {}),
        "pricing": pricer.record(),
        # what --resume compares: results priced two ways must not be summed silently
        "price_override": [pricer.price_in, pricer.price_out] if pricer.override else None,
        # given in ``extra`` when the caller read them once for many runs (a matrix)
        "packages": extra["packages"] if "packages" in extra else package_versions(),
        "git": extra["git"] if "git" in extra else git_state(),
    }
    record.update(extra)
    return record


def scoring_record(scoring: ScoringConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(scoring):
        if f.name.startswith("_"):
            continue
        value = getattr(scoring, f.name)
        if isinstance(value, (set, frozenset)):
            value = sorted(value)
        elif isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else v for v in value]
        out[f.name] = value
    return out
