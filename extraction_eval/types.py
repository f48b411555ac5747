"""Plain data shared by every layer: no I/O here.

Everything that enters the tool (JSONL lines, LangFuse dataset items, model replies) is
normalised into these models once, at the edge, so the rest of the code never asks
"dict or object?".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Entity(_Frozen):
    name: str
    type: str
    evidence: str | None = None
    start: int | None = None
    end: int | None = None
    attributes: dict[str, str] = Field(default_factory=dict)


class Relationship(_Frozen):
    source: str
    type: str
    target: str
    evidence: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)


class Extraction(_Frozen):
    entities: list[Entity] = Field(default_factory=list)
    relationships: list[Relationship] = Field(default_factory=list)


class Schema(_Frozen):
    """What the pipeline is asked to extract; empty lists mean 'any type'."""

    entity_types: list[str] = Field(default_factory=list)
    relationship_types: list[str] = Field(default_factory=list)


class DatasetItem(_Frozen):
    """One evaluation item: the input text (+ schema) and the expected extraction."""

    id: str
    text: str
    schema_: Schema | None = Field(default=None, alias="schema")
    expected: Extraction = Field(default_factory=Extraction)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source_trace_id: str | None = None
    source_observation_id: str | None = None
    status: Literal["ACTIVE", "ARCHIVED"] = "ACTIVE"


ScoreType = Literal["NUMERIC", "BOOLEAN", "CATEGORICAL"]


class Score(_Frozen):
    """A named value on an item (trace) or on a run (experiment), LangFuse-compatible."""

    name: str
    value: float | bool | str
    data_type: ScoreType = "NUMERIC"
    comment: str | None = None


class Usage(_Frozen):
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    # of tokens_in, read from the provider's prompt cache (priced lower); not stored per row
    tokens_cached: int | None = None


class ItemResult(_Frozen):
    """What happened to one item in a run: an output or an error, never nothing."""

    item_id: str
    output: Extraction | None = None
    raw_output: str | None = None
    error: str | None = None
    error_kind: str | None = None  # "schema" | "provider" | "timeout" | "pipeline" | ...
    attempts: int = 0
    latency_ms: float | None = None
    usage: Usage = Field(default_factory=Usage)
    cache_hit: bool = False
    scores: list[Score] = Field(default_factory=list)
    trace_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
