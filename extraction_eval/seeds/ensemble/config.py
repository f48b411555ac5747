"""What an ensemble-gold build asks for: the models (``NAME[:RUNS][@WEIGHT]``), the vote's
settings and the dataset, from a TOML file and options (``GoldConfig``), checked before any
model is called."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.errors import InvalidValue, one_line
from extraction_eval.evaluators.config import ScoringConfig
from extraction_eval.experiments.config import scoring_record
from extraction_eval.limits import MAX_CONCURRENCY, MAX_REPEATS
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.validation import check_int, check_number

# A model run more than once samples at this temperature unless the user says otherwise:
# at 0 its runs would mostly repeat one answer and the vote would count it several times.
REPEAT_TEMPERATURE = 0.7


@dataclass(frozen=True, slots=True)
class GoldModel:
    """``provider:model:runs:weight`` (runs and weight optional: 1 and 1)."""

    model: str
    runs: int = 1
    weight: float = 1.0
    temperature: float | None = None

    def __post_init__(self) -> None:
        if ":" not in self.model:
            raise InvalidValue("models", f"{self.model!r}: expected provider:model")
        check_int("runs", self.runs, minimum=1, maximum=MAX_REPEATS)
        check_number("weight", self.weight, above=0.0)

    @classmethod
    def parse(cls, spec: str) -> GoldModel:
        parts = spec.strip().split(":")
        if len(parts) < 2 or not all(parts[:2]):
            raise InvalidValue("models", f"{spec!r}: expected provider:model[:runs[:weight]]")
        model, rest = ":".join(parts[:2]), parts[2:]
        if len(rest) > 2:
            raise InvalidValue("models", f"{spec!r}: expected provider:model[:runs[:weight]]")
        try:
            runs = int(rest[0]) if rest else 1
            weight = float(rest[1]) if len(rest) > 1 else 1.0
        except ValueError:
            raise InvalidValue(
                "models", f"{spec!r}: runs must be an integer and weight a number"
            ) from None
        if runs < 1 or not weight > 0:
            raise InvalidValue("models", f"{spec!r}: runs must be >= 1 and weight > 0")
        return cls(model, runs, weight)

    def label(self, run: int) -> str:
        return f"{self.model}#{run + 1}"

    def spec(self) -> str:
        return f"{self.model}:{self.runs}:{self.weight:g}"


# What a ``--config gold.toml`` may say; the command line wins over it.
CONFIG_KEYS = (
    "dataset",
    "dataset_version",
    "models",
    "min_agreement",
    "review_below",
    "temperature",
    "concurrency",
    "batch",
    "base_url",
)


def load_gold_config(path: Path) -> dict[str, Any]:
    """A TOML file with the build's settings, for model lists too long for a command line::

        dataset = "demo"
        min_agreement = 0.6
        models = [
          "openai:gpt-5-mini:1:2",
          { model = "openai:gpt-5-nano", runs = 3, weight = 1, temperature = 1.0 },
        ]

    ``models`` becomes a tuple of :class:`GoldModel`; unknown keys are refused."""
    from extraction_eval.tomlfile import TomlProblem, read_toml

    try:
        raw = read_toml(path)
    except TomlProblem as exc:
        raise InvalidValue("config", f"{path}: {one_line(exc)}") from None
    unknown = sorted(set(raw) - set(CONFIG_KEYS))
    if unknown:
        raise InvalidValue(
            "config", f"{path}: unknown key {unknown[0]!r}; known: {', '.join(CONFIG_KEYS)}"
        )
    out = dict(raw)
    if "models" in raw:
        entries = raw["models"]
        if not isinstance(entries, list):
            raise InvalidValue("config", f"{path}: models must be a list")
        models: list[GoldModel] = []
        for n, entry in enumerate(entries, start=1):
            if isinstance(entry, str):
                models.extend(parse_models([entry]))
            elif isinstance(entry, dict) and set(entry) <= {
                "model",
                "runs",
                "weight",
                "temperature",
            }:
                try:
                    models.append(GoldModel(**entry))
                except (TypeError, ValueError) as exc:
                    raise InvalidValue("config", f"{path}: models[{n}]: {one_line(exc)}") from None
            else:
                raise InvalidValue(
                    "config",
                    f"{path}: models[{n}] must be 'provider:model:runs:weight' or a"
                    " table with model, runs, weight, temperature",
                )
        out["models"] = tuple(models)
    return out


def parse_models(specs: Sequence[str]) -> tuple[GoldModel, ...]:
    """Repeatable and comma-separated forms together; the same model twice is refused."""
    models = [GoldModel.parse(s) for spec in specs for s in spec.split(",") if s.strip()]
    if not models:
        raise InvalidValue("models", "name at least one provider:model[:runs[:weight]]")
    return check_models(models)


def check_models(models: Sequence[GoldModel]) -> tuple[GoldModel, ...]:
    seen = [m.model for m in models]
    twice = sorted({m for m in seen if seen.count(m) > 1})
    if twice:
        raise InvalidValue("models", f"{', '.join(twice)} given twice; use its runs count")
    return tuple(models)


@dataclass(frozen=True)
class GoldConfig:
    dataset: str
    models: tuple[GoldModel, ...]
    dataset_version: int | str | None = None
    min_agreement: float = 0.5
    review_below: float = 0.75
    # None: REPEAT_TEMPERATURE for a model run more than once, else 0
    temperature: float | None = None
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    concurrency: int = 8
    batch: bool = False  # OpenAI Batch API: half price, answers within 24 h
    base_url: str | None = None
    timeout_s: float = 60.0
    max_attempts: int = 4

    def __post_init__(self) -> None:
        if not self.models:
            raise InvalidValue("models", "name at least one provider:model[:runs[:weight]]")
        check_number("min_agreement", self.min_agreement, minimum=0.0, maximum=1.0)
        if self.min_agreement >= 1.0:
            raise InvalidValue("min_agreement", "must be below 1 (an object needs more weight)")
        check_number("review_below", self.review_below, minimum=0.0, maximum=1.0)
        if self.temperature is not None:
            check_number("temperature", self.temperature, minimum=0.0)
        check_int("concurrency", self.concurrency, minimum=1, maximum=MAX_CONCURRENCY)

    @classmethod
    def resolve(
        cls, file: Path | None = None, overrides: Mapping[str, Any] | None = None
    ) -> GoldConfig:
        """A build's settings from a TOML file (:func:`load_gold_config`) and options given over
        it by name (``None``: not given); ``models`` (``provider:model[:runs[:weight]]``
        specs) add to the file's. ``dataset`` and at least one model are needed."""
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - set(CONFIG_KEYS))
        if unknown:
            raise TypeError(f"GoldConfig.resolve: unknown settings {unknown}")
        settings = load_gold_config(file) if file is not None else {}
        specs = overrides.pop("models", None)
        settings.update({k: v for k, v in overrides.items() if v is not None})
        if specs:
            settings["models"] = check_models([*settings.get("models", ()), *parse_models(specs)])
        if "dataset" not in settings:
            raise InvalidValue(
                "dataset", "is required (or dataset in {config})", mentions=("config",)
            )
        if not settings.get("models"):
            raise InvalidValue(
                "models", "is required (or models in {config})", mentions=("config",)
            )
        version = settings.get("dataset_version")
        if isinstance(version, str) and version.isdigit():
            settings["dataset_version"] = int(version)
        return cls(**settings)

    def runs(self) -> list[tuple[str, float, PipelineConfig]]:
        """(run label, weight, pipeline config) of every model run, run index in the key."""
        out = []
        for m in self.models:
            temperature = (
                m.temperature
                if m.temperature is not None
                else self.temperature
                if self.temperature is not None
                else (REPEAT_TEMPERATURE if m.runs > 1 else 0.0)
            )
            for k in range(m.runs):
                config = PipelineConfig(
                    model=m.model,
                    base_url=self.base_url,
                    temperature=temperature,
                    timeout_s=self.timeout_s,
                    max_attempts=self.max_attempts,
                    repeat=k,
                )
                out.append((m.label(k), m.weight, config))
        return out

    def record(self) -> dict[str, Any]:
        return {
            "models": [m.spec() for m in self.models],
            "runs": {label: {"temperature": c.temperature} for label, _, c in self.runs()},
            "min_agreement": self.min_agreement,
            "scoring": scoring_record(self.scoring),
        }
