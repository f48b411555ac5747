"""A configuration matrix's axes and cells: one run per (model, prompt label, temperature[,
repeat]) on one dataset version (``MatrixConfig.cells``), and what each cell's run became
(``CellOutcome``). Running them is :mod:`extraction_eval.experiments.matrix`; the table over
the stored runs is :mod:`extraction_eval.analysis.matrix_table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from extraction_eval.backends.local import RunRecord
from extraction_eval.errors import InvalidValue
from extraction_eval.experiments.config import RunConfig
from extraction_eval.limits import MAX_REPEATS
from extraction_eval.validation import check_int, check_number, check_text

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

    def __post_init__(self) -> None:
        """Refuse axes that cannot make a matrix, before anything is read or written."""
        if not self.models:
            raise InvalidValue("model", "is needed at least once (one per model of the matrix)")
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
        check_int("repeats", self.repeats, minimum=1, maximum=MAX_REPEATS)
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
