"""A configuration matrix's axes and cells: one run per (model, prompt label, temperature[,
repeat]) on one dataset version (``MatrixConfig.cells``), and what each cell's run became
(``CellOutcome``). Running them is :mod:`extraction_eval.experiments.matrix`; the table over
the stored runs is :mod:`extraction_eval.analysis.matrix_table`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extraction_eval.backends.local import RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.evaluators.config import ScoringConfig
from extraction_eval.evaluators.stats.multiple_testing import CORRECTIONS, Correction
from extraction_eval.experiments.config import RunConfig
from extraction_eval.experiments.partition import resolve_shard
from extraction_eval.limits import DEFAULT_MAX_CELLS, DEFAULT_MAX_OBJECTS, MAX_REPEATS
from extraction_eval.pipeline.base import PipelineConfig
from extraction_eval.validation import check_choice, check_int, check_number, check_text

# A cell the matrix's cost ceiling kept from starting: its run's status.
NOT_STARTED = "not started: budget"


def temperature_tag(temperature: float) -> str:
    """``t0``, ``t0.7``, ``t1``: the shortest spelling that reads back as the same float."""
    text = repr(float(temperature))
    return "t" + (text[:-2] if text.endswith(".0") else text)


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: its name and parameters, and the full run config."""

    name: str
    model: str
    prompt_label: str | None
    temperature: float
    repeat: int | None
    config: RunConfig

    @property
    def group(self) -> str:
        """The cell without its repeat index: what repeats are compared within."""
        return self.name.rsplit("/", 1)[0] if self.repeat is not None else self.name

    def params(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt_label": self.prompt_label,
            "temperature": self.temperature,
            "repeat": self.repeat,
        }


@dataclass(frozen=True)
class MatrixConfig:
    """The axes of a matrix and what every cell shares (``base``: dataset, scoring,
    concurrency, limit, backend, timeout, prices...; its name, model, prompt label and
    temperature are replaced per cell).

    ``name`` is the prefix of every cell's run name, ``{name}/{model}/{label}/t{temp}[/r{k}]``
    (label ``bundled`` when no label is asked for). ``repeats`` > 1 runs each cell that many
    times, differing only in the repeat index of the response-cache key.
    """

    models: tuple[str, ...]
    prompt_labels: tuple[str | None, ...] = (None,)
    temperatures: tuple[float, ...] = (0.0,)
    repeats: int = 1
    name: str | None = None
    base: RunConfig = field(default_factory=RunConfig)
    # how the cells × metrics comparisons with the best cell are corrected (multiple.py)
    correction: Correction = "holm"
    # the most cells it may have: each is a full run, planned before the first starts
    max_cells: int = DEFAULT_MAX_CELLS

    def __post_init__(self) -> None:
        """Refuse axes that cannot make a matrix, before anything is read or written."""
        if not self.models:
            raise InvalidValue("model", "is needed at least once (one per model of the matrix)")
        check_int("max_cells", self.max_cells, minimum=1)
        check_int("repeats", self.repeats, minimum=1, maximum=MAX_REPEATS)
        cells = len(self.models) * len(self.prompt_labels) * len(self.temperatures) * self.repeats
        if cells > self.max_cells:  # before a cell (or a per-model check) is made
            raise InvalidValue(
                "max_cells",
                f"is {self.max_cells:,}: the matrix would have {cells:,} cells"
                f" ({len(self.models):,} models x {len(self.prompt_labels):,} prompt labels x"
                f" {len(self.temperatures):,} temperatures x {self.repeats} repeats); raise"
                " it or give fewer values",
            )
        for model in self.models:
            check_text("model", model)
        for label in self.prompt_labels:
            if label is not None:
                check_text("prompt_label", label)
        if not self.prompt_labels:
            raise InvalidValue("prompt_label", "needs at least one value (or none given at all)")
        if not self.temperatures:
            raise InvalidValue("temperature", "needs at least one value")
        for temperature in self.temperatures:
            check_number("temperature", temperature, minimum=0.0)
        _no_duplicates("model", self.models)
        _no_duplicates("prompt_label", self.prompt_labels)
        _no_duplicates("temperature", [float(t) for t in self.temperatures])
        if self.name is not None:
            check_text("name", self.name)
        if self.base.name is not None:
            raise InvalidValue("name", "is the matrix's prefix: set MatrixConfig.name")
        if self.base.retry_errors:
            raise InvalidValue("retry_errors", "is not supported by a matrix (use resume)")
        if self.base.resume and self.name is None:
            raise InvalidValue(
                "resume", "needs the matrix's {name} (the prefix of its runs)", mentions=("name",)
            )
        _distinct_names(self.models, self.prompt_labels)
        check_choice("correction", self.correction, CORRECTIONS)

    @classmethod
    def resolve(
        cls, file: Path | None = None, overrides: Mapping[str, Any] | None = None
    ) -> MatrixConfig:
        """A matrix from a ``matrix.toml`` (:func:`load_matrix_file`) and settings given over
        it by option name (``model``, ``prompt_label``, ``temperature`` as lists; ``None``
        or an empty list: not given): defaults, then the file, then ``overrides``."""
        return _resolve(file, overrides or {})

    def named(self) -> MatrixConfig:
        """This config with a prefix (``matrix-<timestamp>`` when none was given)."""
        if self.name is not None:
            return self
        return replace(self, name=f"matrix-{datetime.now(UTC):%Y%m%dT%H%M%SZ}")

    def cells(self) -> list[Cell]:
        """Every cell, in axis order (model, label, temperature, repeat)."""
        prefix = self.named().name
        repeats: list[int | None] = (
            [None] if self.repeats == 1 else list(range(1, self.repeats + 1))
        )
        out = []
        for model in self.models:
            for label in self.prompt_labels:
                for temperature in self.temperatures:
                    for repeat in repeats:
                        parts = [prefix, model, label or "bundled", temperature_tag(temperature)]
                        if repeat is not None:
                            parts.append(f"r{repeat}")
                        pipeline = replace(
                            self.base.pipeline,
                            model=model,
                            prompt_label=label,
                            temperature=float(temperature),
                            repeat=repeat or 0,  # 0: no repeat (the cache key as always)
                        )
                        name = "/".join(str(p) for p in parts)
                        config = replace(self.base, name=name, pipeline=pipeline)
                        out.append(Cell(name, model, label, float(temperature), repeat, config))
        return out


# What a matrix file (``matrix.toml``) may set: the matrix command's options (``-`` or ``_``),
# each once; the axes as lists (or one value).
FILE_AXES = ("model", "prompt_label", "temperature")
FILE_SETTINGS = (
    "dataset",
    "name",
    "repeats",
    "concurrency",
    "limit",
    "base_url",
    "response_format",
    "timeout",
    "max_attempts",
    "prompt_name",
    "match",
    "threshold",
    "backend",
    "price_in",
    "price_out",
    "max_cost",
    "shard",
    "shard_count",
    "max_objects",
    "no_cache",
    "refresh_cache",
    "strict_json",
    "ci",
    "correction",
    "max_cells",
)
# Given as options only (not in the file).
OPTION_ONLY = ("resume", "take_over_lock", "verify")
_DEFAULTS: dict[str, Any] = {
    "dataset": "extraction-eval",
    "repeats": 1,
    "concurrency": 8,
    "timeout": 60.0,
    "max_attempts": 4,
    "prompt_name": "extraction",
    "match": "fuzzy",
    "threshold": 0.85,
    "backend": "auto",
    "response_format": "auto",
    "max_objects": DEFAULT_MAX_OBJECTS,
    "ci": "expanded",
    "correction": "holm",
    "max_cells": DEFAULT_MAX_CELLS,
    "resume": False,
    "take_over_lock": False,
    "verify": True,
}


def load_matrix_file(path: Path) -> dict[str, Any]:
    """A ``matrix.toml``'s settings by option name (the axes as lists); an unknown key, bad
    TOML or an unreadable file is an ``InvalidValue`` naming ``config``."""
    from extraction_eval.tomlfile import TomlProblem, read_toml

    try:  # bounded in size and depth: a config file is outside input
        data = read_toml(path)
    except TomlProblem as exc:
        raise InvalidValue("config", f"{path}: {exc}") from None
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key in FILE_AXES:
            out[key] = value if isinstance(value, list) else [value]
        elif key in FILE_SETTINGS:
            out[key] = value
        else:
            known = ", ".join(k.replace("_", "-") for k in (*FILE_AXES, *FILE_SETTINGS))
            raise InvalidValue("config", f"{path}: unknown key {raw_key!r} (known: {known})")
    return out


def _resolve(file: Path | None, overrides: Mapping[str, Any]) -> MatrixConfig:
    unknown = sorted(set(overrides) - {*FILE_AXES, *FILE_SETTINGS, *OPTION_ONLY})
    if unknown:
        raise TypeError(f"MatrixConfig.resolve: unknown settings {unknown}")
    opts = {**_DEFAULTS, **(load_matrix_file(file) if file is not None else {})}
    flags = ("no_cache", "refresh_cache", "strict_json")  # on in the file or the command line
    opts.update(
        {k: v for k, v in overrides.items() if v is not None and v != [] and k not in flags}
    )
    no_cache, refresh, strict_json = (bool(overrides.get(k) or opts.get(k)) for k in flags)
    if no_cache and refresh:
        raise InvalidValue(
            "no_cache", "and {refresh_cache} exclude each other; give one", mentions=flags[1:]
        )
    models = opts.get("model")
    if not models:
        raise InvalidValue("model", "is needed at least once (one per model of the matrix)")
    base = RunConfig(
        dataset=opts["dataset"],
        pipeline=PipelineConfig(
            model=models[0],
            base_url=opts.get("base_url"),
            response_format=opts["response_format"],
            prompt_name=opts["prompt_name"],
            timeout_s=opts["timeout"],
            max_attempts=opts["max_attempts"],
            price_in=opts.get("price_in"),
            price_out=opts.get("price_out"),
            cache="off" if no_cache else "refresh" if refresh else "use",
            strict_json=strict_json,
        ),
        scoring=ScoringConfig(
            match=opts["match"],
            threshold=opts["threshold"],
            max_objects=opts["max_objects"],
            ci=opts["ci"],
        ),
        concurrency=opts["concurrency"],
        limit=opts.get("limit"),
        resume=opts["resume"],
        take_over_lock=opts["take_over_lock"],
        backend=opts["backend"],
        verify=opts["verify"],
        max_cost=opts.get("max_cost"),
        shard=resolve_shard(
            None if opts.get("shard") is None else str(opts["shard"]),
            count=opts.get("shard_count"),
        ),
    )
    return MatrixConfig(
        models=tuple(models),
        prompt_labels=tuple(opts.get("prompt_label") or [None]),
        temperatures=tuple(opts.get("temperature") or [0.0]),
        repeats=opts["repeats"],
        name=opts.get("name"),
        base=base,
        correction=opts["correction"],
        max_cells=opts["max_cells"],
    )


def _distinct_names(models: Sequence[str], labels: Sequence[str | None]) -> None:
    """Two cells must not share a run name: no label and a label ``bundled``, or a ``/`` in a
    model or label (``a/x`` + ``y`` vs ``a`` + ``x/y``), would make them one run."""
    seen: dict[str, tuple[str, str | None]] = {}
    for model in models:
        for label in labels:
            key = f"{model}/{label or 'bundled'}"
            if key in seen:
                other = seen[key]
                raise InvalidValue(
                    "prompt_label",
                    f"model {model!r} with label {label!r} and model {other[0]!r} with label"
                    f" {other[1]!r} would give two cells the same run name ({key!r})",
                )
            seen[key] = (model, label)


def _no_duplicates(field_name: str, values: Sequence[object]) -> None:
    seen: set[object] = set()
    for value in values:
        if value in seen:
            raise InvalidValue(field_name, f"{value!r} is given twice")
        seen.add(value)


@dataclass
class CellOutcome:
    """One cell after the matrix: its stored run (with its summary) and what this invocation
    did with it (``ran`` items; ``skipped``: it was finished already and left alone)."""

    cell: Cell
    run: RunRecord
    ran: int = 0
    skipped: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        return self.run.summary or {}
