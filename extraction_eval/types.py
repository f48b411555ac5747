"""Plain data shared by every layer: no I/O here.

Everything that enters the tool (JSONL lines, LangFuse dataset items, model replies) is
normalised into these models once, at the edge, so the rest of the code never asks
"dict or object?".
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from extraction_eval.limits import MAX_SURFACE_FORMS
from extraction_eval.redact import (
    configured_secrets,
    may_need_redaction,
    redact,
    redact_value,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


def _scan_text(model: BaseModel) -> str:
    """The model as one text to scan for secrets: its JSON, or, when a string holds a lone
    surrogate that JSON cannot encode (an answer stored as U+FFFD later), Python's own dump."""
    try:
        return model.model_dump_json()
    except ValueError:  # pydantic's PydanticSerializationError is a ValueError
        return json.dumps(model.model_dump(mode="python"), ensure_ascii=False, default=str)


class Mention(_Frozen):
    """One surface form of an entity in the text (Re-DocRED lists every one); offsets are
    half-open character offsets when given."""

    name: str
    start: int | None = None
    end: int | None = None
    sent_id: int | None = None


def _omit_empty(out: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    for key in keys:
        if out.get(key) in (None, []):
            out.pop(key, None)
    return out


class Entity(_Frozen):
    """``mentions`` (every surface form, with offsets) and ``aliases`` (other names of the same
    entity) make the entity a cluster: a prediction naming any of them names this entity."""

    name: str
    type: str
    evidence: str | None = None
    start: int | None = None
    end: int | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    mentions: list[Mention] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)

    @field_validator("mentions", "aliases")
    @classmethod
    def _bounded(cls, value: list[Any]) -> list[Any]:
        if len(value) > MAX_SURFACE_FORMS:
            raise ValueError(
                f"{len(value):,} surface forms, over the limit of {MAX_SURFACE_FORMS:,} per entity"
            )
        return value

    @model_serializer(mode="wrap")
    def _omit_empty_clusters(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # An entity without mentions or aliases serialises as before they existed: stored
        # payloads, content hashes and cache keys of existing datasets do not change.
        return _omit_empty(handler(self), ("mentions", "aliases"))


class Relationship(_Frozen):
    """``head`` / ``tail`` index the item's entities (the gold format of ../shared/data: names
    may repeat in a document); None when the endpoints are given by name only."""

    source: str
    type: str
    target: str
    evidence: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)
    head: int | None = None
    tail: int | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_indices(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_empty(handler(self), ("head", "tail"))


class Extraction(_Frozen):
    entities: list[Entity] = Field(default_factory=list)
    relationships: list[Relationship] = Field(default_factory=list)

    def redacted(self, *, text: str | None = None) -> tuple[Extraction, bool]:
        """This answer with configured secrets and token shapes masked in every string, and
        whether any was: a proxy or a pipeline may put a key into a valid answer, which is
        then stored, cached, exported and sent to LangFuse. ``text``: this answer's
        ``model_dump_json()`` when the caller made it already (the runner's surrogate test),
        so the answer is not dumped twice."""
        secrets = configured_secrets()
        if not may_need_redaction(text if text is not None else _scan_text(self), secrets):
            return self, False  # the common case: one JSON dump and a scan, no walk
        data, changed = redact_value(self.model_dump(mode="python"), secrets)
        return (Extraction.model_validate(data), True) if changed else (self, False)


# Attribute keys become score names (``attr.<key>``) and ``--fail-under attr.<key>=X``
# arguments, so they are plain identifiers.
ATTRIBUTE_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")

# type -> attribute key -> allowed values
AttributeDeclarations = dict[str, dict[str, list[str]]]


def _type_key(value: str) -> str:
    return " ".join(value.casefold().split())


def _check_declarations(value: AttributeDeclarations, what: str) -> AttributeDeclarations:
    for type_name, keys in value.items():
        if not type_name.strip():
            raise ValueError(f"{what}: empty type name")
        if not keys:
            raise ValueError(f"{what}[{type_name!r}]: declares no attribute")
        for key, allowed in keys.items():
            if not ATTRIBUTE_KEY.match(key):
                raise ValueError(
                    f"{what}[{type_name!r}]: attribute key {key!r} must be letters, digits, "
                    "'_' or '-', starting with a letter"
                )
            if not allowed or any(not v.strip() for v in allowed):
                raise ValueError(
                    f"{what}[{type_name!r}][{key!r}]: allowed values must be non-empty strings"
                )
            if len(set(allowed)) != len(allowed):
                raise ValueError(f"{what}[{type_name!r}][{key!r}]: duplicate allowed value")
    return value


class Schema(_Frozen):
    """What the pipeline is asked to extract; empty lists mean 'any type'.

    ``attributes`` (entity type -> key -> allowed values) and ``relationship_attributes``
    (relationship type -> ...) close the attributes of the types they name: only declared
    keys, only allowed values. Types not named there keep free-form attributes, so a schema
    without declarations means exactly what it did before they existed.
    """

    entity_types: list[str] = Field(default_factory=list)
    relationship_types: list[str] = Field(default_factory=list)
    attributes: AttributeDeclarations = Field(default_factory=dict)
    relationship_attributes: AttributeDeclarations = Field(default_factory=dict)
    # gold label -> the label the pipeline is asked for and scored with (entity and
    # relationship types alike); a label not named here keeps its name
    labels: dict[str, str] = Field(default_factory=dict)
    # groups of names of one entity (an alias table for this dataset): a prediction naming any
    # name of a group matches a gold entity named by another
    aliases: list[list[str]] = Field(default_factory=list)

    @field_validator("aliases")
    @classmethod
    def _alias_groups(cls, value: list[list[str]]) -> list[list[str]]:
        if len(value) > MAX_SURFACE_FORMS * 10:
            raise ValueError(
                f"aliases: {len(value):,} groups, over the limit of {MAX_SURFACE_FORMS * 10:,}"
            )
        for group in value:
            if len(group) > MAX_SURFACE_FORMS:
                raise ValueError(
                    f"aliases: a group of {len(group):,} names, over the limit of "
                    f"{MAX_SURFACE_FORMS:,}"
                )
        return value

    @field_validator("labels")
    @classmethod
    def _label_map(cls, value: dict[str, str]) -> dict[str, str]:
        seen: dict[str, str] = {}
        for gold, asked in value.items():
            if not gold.strip() or not asked.strip():
                raise ValueError(f"labels: {gold!r} -> {asked!r}: labels must be non-empty")
            key = _type_key(gold)
            if key in seen:
                raise ValueError(f"labels: {gold!r} and {seen[key]!r} are the same label")
            seen[key] = gold
        return value

    @field_validator("attributes")
    @classmethod
    def _entity_declarations(cls, value: AttributeDeclarations) -> AttributeDeclarations:
        return _check_declarations(value, "attributes")

    @field_validator("relationship_attributes")
    @classmethod
    def _relationship_declarations(cls, value: AttributeDeclarations) -> AttributeDeclarations:
        return _check_declarations(value, "relationship_attributes")

    @model_validator(mode="after")
    def _declared_types_exist(self) -> Schema:
        for declared, types, what in (
            (self.attributes, self.entity_types, "attributes"),
            (self.relationship_attributes, self.relationship_types, "relationship_attributes"),
        ):
            known = {_type_key(t) for t in types}
            for type_name in declared:
                if known and _type_key(type_name) not in known:
                    raise ValueError(f"{what}: type {type_name!r} is not in the schema's types")
        return self

    @model_serializer(mode="wrap")
    def _omit_empty_declarations(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A schema without declarations serialises as before they existed: stored items,
        # exports, content hashes and cache keys of existing datasets do not change.
        out: dict[str, Any] = handler(self)
        for key in ("attributes", "relationship_attributes", "labels", "aliases"):
            if not out.get(key):
                out.pop(key, None)
        return out

    def map_label(self, label: str) -> str:
        """The label the pipeline is asked for in place of gold's ``label`` (compared as types
        are: casefolded, spaces collapsed); an unmapped label keeps its name."""
        if not self.labels:
            return label
        wanted = _type_key(label)
        for gold, asked in self.labels.items():
            if _type_key(gold) == wanted:
                return asked
        return label

    def asked(self) -> Schema:
        """The schema as the pipeline is asked it: types (and the types attributes are
        declared for) mapped through ``labels``, and no ``labels`` left. Without labels: self."""
        if not self.labels:
            return self

        def types(names: list[str]) -> list[str]:
            out: list[str] = []
            for name in names:
                mapped = self.map_label(name)
                if _type_key(mapped) not in {_type_key(t) for t in out}:
                    out.append(mapped)
            return out

        return Schema(
            entity_types=types(self.entity_types),
            relationship_types=types(self.relationship_types),
            attributes={self.map_label(t): k for t, k in self.attributes.items()},
            relationship_attributes={
                self.map_label(t): k for t, k in self.relationship_attributes.items()
            },
            aliases=self.aliases,  # names of one entity whatever the labels: scoring keeps them
        )

    @property
    def has_attributes(self) -> bool:
        return bool(self.attributes or self.relationship_attributes)

    def declared_for(
        self, kind: Literal["entity", "relationship"], type_name: str
    ) -> dict[str, list[str]] | None:
        """The declared attributes of a type (types compare casefolded), None if undeclared."""
        declared = self.attributes if kind == "entity" else self.relationship_attributes
        wanted = _type_key(type_name)
        for name, keys in declared.items():
            if _type_key(name) == wanted:
                return keys
        return None

    def attribute_keys(self) -> set[str]:
        """Every declared attribute key, entity and relationship types together."""
        return {
            key
            for declared in (self.attributes, self.relationship_attributes)
            for keys in declared.values()
            for key in keys
        }


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
    # what was wrong with the usage the server reported (negative, not a whole number, absurdly
    # large, missing): the tokens are then the estimate's (``pipeline.pricing``); the row
    # records it as its ``usage_estimated`` score, not in its usage columns
    problem: str | None = None


class TaxonomyTag(_Frozen):
    """One object of an item and its failure category (the scorer's ``TaxonomyEntry``, as
    stored with the result so runs can be filtered by category without re-scoring)."""

    category: str
    kind: str  # "entity" | "relationship"
    side: str  # "gold" (missed) | "pred"
    index: int  # into the gold or predicted list of that kind
    label: str
    related: list[int] = Field(default_factory=list)
    source_id: str | None = None


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
    trace_url: str | None = None  # LangFuse mode: the trace in the LangFuse UI
    # Per-object failure categories; None: not recorded (a row stored before taxonomy was kept)
    taxonomy: list[TaxonomyTag] | None = None
    # What reading the model's reply repaired (prompts/replies.py: fence, prose, wrapper);
    # empty for a bare-JSON reply, a failed item, and rows stored before repairs were kept
    repairs: list[str] = Field(default_factory=list)
    # The paired-comparison counts the runner scored (evaluators.counts.encode_counts), stored
    # so ``compare`` need not re-score; internal: never exported
    counts: str | None = Field(default=None, exclude=True, repr=False)

    def redacted(self) -> ItemResult:
        """This result with every text that may quote a key masked (output, raw answer, error,
        text scores and comments, taxonomy labels), for a result made elsewhere (a merged
        shard store): a value that is a key here may have been none where it was made."""
        secrets = configured_secrets()
        if not may_need_redaction(_scan_text(self), secrets):
            return self

        def text(value: str | None) -> str | None:
            return redact(value, secrets) if value else value

        scores = [
            s.model_copy(
                update={
                    "value": redact(s.value, secrets) if isinstance(s.value, str) else s.value,
                    "comment": text(s.comment),
                }
            )
            for s in self.scores
        ]
        tags = self.taxonomy
        return self.model_copy(
            update={
                "output": None if self.output is None else self.output.redacted()[0],
                "raw_output": text(self.raw_output),
                "error": text(self.error),
                "scores": scores,
                "taxonomy": None
                if tags is None
                else [t.model_copy(update={"label": redact(t.label, secrets)}) for t in tags],
            }
        )

    @property
    def categories(self) -> dict[str, int]:
        """Count per failure category present on the item (sorted by name; empty when clean)."""
        counts: dict[str, int] = {}
        for tag in self.taxonomy or ():
            counts[tag.category] = counts.get(tag.category, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def ok(self) -> bool:
        return self.error is None


class GoldOverride(_Frozen):
    """A person's correction of an ensemble-gold vote, applied on top of it at every build.

    ``add``: ``value`` is the object as JSON; ``remove``: ``target`` names the object (an
    entity's name, or ``source|type|target`` of a relationship); ``set``: ``target`` and
    ``field`` (``name``, ``type``, ``evidence``, ``attributes.<key>``) get ``value``.

    ``same`` / ``not_same`` overrule the semantic judge instead (the vote ignores them):
    on this item, the entity name ``target`` (predicted) and ``value`` (gold) are, or are
    not, one entity, whatever a judge would say (``--judge`` asks no judge about them)."""

    dataset: str
    item_id: str
    action: Literal["add", "remove", "set", "same", "not_same"]
    kind: Literal["entity", "relationship"]
    reason: str
    target: str | None = None
    field: str | None = None
    value: str | None = None
    author: str | None = None
    id: int | None = None
    created_at: str | None = None
