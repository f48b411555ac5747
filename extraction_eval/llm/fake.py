"""A scripted model, registered like the real providers (``--model fake:<name>``).

It lets the whole pipeline (retries, caching, parsing, the runner, the CLI) run in tests
without network, with per-item answers and injected failures. Script format::

    {
      "default": {"entities": [], "relationships": []},   # any step; this is the default
      "latency_s": 0.0,                                    # added to every call
      "rules": [                                           # first matching rule wins
        {"item": "id-1",                                   # item id(s), and/or
         "contains": "Ada Lovelace",                       # substring(s) of the user message
         "model": "a",                                     # and/or model name(s) (fake:<name>)
         "temperature": 0.7,                               # and/or sampling temperature(s)
         "responses": [                                    # one per call for this item; the
           {"error": 429, "retry_after": 0.5},             # last one repeats when exhausted
           {"error": 500},
           {"error": "timeout"},                           # or "connection"
           {"sleep": 3},                                   # a real delay (trips the timeout)
           {"text": "{not json"},                          # raw answer text
           {"json": {"entities": [], "relationships": []}},
           {"entities": [...], "relationships": [...]}     # an extraction, as JSON
         ]}
      ],
      "items": {"id-2": <step or list of steps>},          # shorthand rules by item id
      "contains": {"Paris": <step or list of steps>}       # shorthand rules by substring
    }

A step may also be a plain string (the answer text) or, from Python, an ``Extraction`` or a
callable ``(CompletionRequest) -> step``. Any step may carry ``"usage": {"input": n,
"output": m}`` (and ``"cost_usd"``: the call's reported cost); otherwise word counts stand
in for tokens. Sequences are counted per rule
and item (or per distinct input when the item is unknown), so "429 then success" applies to
each matching item. The script comes from Python (``register_fake``) or from the JSON file
named by ``EXTRACTION_EVAL_FAKE_SCRIPT``; with ``EXTRACTION_EVAL_FAKE_LOG`` set, every call
is appended to that file as a JSON line, so tests can count calls made by a subprocess.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extraction_eval.errors import ConfigError, ProviderError
from extraction_eval.limits import MAX_FAKE_SCRIPT_BYTES
from extraction_eval.llm.base import Completion, CompletionRequest
from extraction_eval.llm.context import current_item_id
from extraction_eval.llm.retry import ProviderTimeout, retryable_status
from extraction_eval.regular_files import NotReadable, read_regular
from extraction_eval.types import Extraction, Usage

SCRIPT_ENV = "EXTRACTION_EVAL_FAKE_SCRIPT"
LOG_ENV = "EXTRACTION_EVAL_FAKE_LOG"

EMPTY_ANSWER = '{"entities": [], "relationships": []}'

_STEP_KEYS = frozenset(
    {"error", "retry_after", "message", "retryable", "sleep", "text", "json", "usage"}
    | {"entities", "relationships"}
)
_SCRIPT_KEYS = frozenset({"default", "latency_s", "rules", "items", "contains"})
_RULE_KEYS = frozenset({"item", "contains", "model", "temperature", "responses", "response"})


@dataclass(frozen=True)
class FakeCall:
    """One call the fake received, for assertions."""

    item_id: str | None
    user_text: str
    rule: int | None  # index into the normalised rules; None: the default answer
    index: int  # 0-based position in that rule's sequence for this item
    outcome: str  # "ok", "error:429", "error:timeout", ...
    request: CompletionRequest


@dataclass(frozen=True)
class _Rule:
    items: frozenset[str]
    contains: tuple[str, ...]
    responses: tuple[Any, ...]
    models: frozenset[str] = frozenset()
    temperatures: frozenset[float] = frozenset()

    def matches(self, item_id: str | None, user_text: str, request: CompletionRequest) -> bool:
        if self.items and item_id not in self.items:
            return False
        if self.models and request.model not in self.models:
            return False
        if self.temperatures and float(request.temperature) not in self.temperatures:
            return False
        return all(part in user_text for part in self.contains)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _check_step(step: Any, where: str) -> None:
    if isinstance(step, dict):
        unknown = set(step) - _STEP_KEYS
        if unknown:
            raise ConfigError(f"fake script: unknown key(s) {sorted(unknown)} in {where}")
    elif not (isinstance(step, (str, Extraction)) or callable(step)):
        raise ConfigError(f"fake script: {where} must be a string, object or callable")


def _rule(raw: Any, where: str) -> _Rule:
    if not isinstance(raw, dict):
        raise ConfigError(f"fake script: {where} must be an object")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise ConfigError(f"fake script: unknown key(s) {sorted(unknown)} in {where}")
    responses = _as_tuple(raw.get("responses", raw.get("response")))
    if not responses:
        raise ConfigError(f"fake script: {where} has no 'responses'")
    for i, step in enumerate(responses):
        _check_step(step, f"{where}.responses[{i}]")
    try:
        temperatures = frozenset(float(x) for x in _as_tuple(raw.get("temperature")))
    except (TypeError, ValueError):
        raise ConfigError(f"fake script: {where}.temperature must be a number") from None
    return _Rule(
        items=frozenset(str(x) for x in _as_tuple(raw.get("item"))),
        contains=tuple(str(x) for x in _as_tuple(raw.get("contains"))),
        responses=responses,
        models=frozenset(str(x) for x in _as_tuple(raw.get("model"))),
        temperatures=temperatures,
    )


def _responses(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class FakeScript:
    """A validated script: rules in priority order, a default step and a fixed latency."""

    rules: tuple[_Rule, ...] = ()
    default: Any = EMPTY_ANSWER
    latency_s: float = 0.0

    @classmethod
    def parse(cls, script: Any) -> FakeScript:
        if script is None:
            return cls()
        if isinstance(script, FakeScript):
            return script
        if isinstance(script, list):
            script = {"rules": script}
        if not isinstance(script, dict):
            raise ConfigError("fake script must be a JSON object or a list of rules")
        unknown = set(script) - _SCRIPT_KEYS
        if unknown:
            raise ConfigError(f"fake script: unknown key(s) {sorted(unknown)}")
        raw_rules = list(script.get("rules") or [])
        raw_rules += [
            {"item": k, "responses": _responses(v)} for k, v in (script.get("items") or {}).items()
        ]
        raw_rules += [
            {"contains": k, "responses": _responses(v)}
            for k, v in (script.get("contains") or {}).items()
        ]
        rules = tuple(_rule(r, f"rules[{i}]") for i, r in enumerate(raw_rules))
        default = script.get("default", EMPTY_ANSWER)
        _check_step(default, "default")
        latency = float(script.get("latency_s") or 0.0)
        return cls(rules=rules, default=default, latency_s=latency)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> FakeScript:
        try:
            data = json.loads(read_regular(path, MAX_FAKE_SCRIPT_BYTES).decode("utf-8"))
        except NotReadable as exc:
            raise ConfigError(f"{SCRIPT_ENV}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{SCRIPT_ENV}: {path} is not UTF-8 ({exc.reason})") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{SCRIPT_ENV}: {path} is not JSON: {exc.msg}") from None
        return cls.parse(data)


def _user_text(request: CompletionRequest) -> str:
    return "\n".join(m.content for m in request.messages if m.role == "user")


def _words(text: str) -> int:
    return len(text.split())


@dataclass
class FakeProvider:
    """The scripted fake; ``calls`` records every request it received, in order."""

    script: FakeScript = field(default_factory=FakeScript)
    model: str = "fake"
    log_path: Path | None = None
    name: str = "fake"
    calls: list[FakeCall] = field(default_factory=list)
    _counters: defaultdict[tuple[int | None, str], int] = field(
        default_factory=lambda: defaultdict(int), repr=False
    )

    @classmethod
    def from_script(cls, script: Any = None, *, model: str = "fake") -> FakeProvider:
        log = os.environ.get(LOG_ENV)
        return cls(
            script=FakeScript.parse(script), model=model, log_path=Path(log) if log else None
        )

    @classmethod
    def from_env(cls, model: str = "fake") -> FakeProvider:
        """Script from ``EXTRACTION_EVAL_FAKE_SCRIPT`` if set, else the default answer only."""
        path = os.environ.get(SCRIPT_ENV)
        script = FakeScript.from_file(path) if path else FakeScript()
        return cls.from_script(script, model=model)

    def call_count(self, *, item_id: str | None = None, contains: str | None = None) -> int:
        return sum(
            1
            for c in self.calls
            if (item_id is None or c.item_id == item_id)
            and (contains is None or contains in c.user_text)
        )

    def reset(self) -> None:
        self.calls.clear()
        self._counters.clear()

    def _select(
        self, item_id: str | None, user_text: str, request: CompletionRequest
    ) -> tuple[int | None, Any, int]:
        for index, rule in enumerate(self.script.rules):
            if rule.matches(item_id, user_text, request):
                key = (
                    item_id
                    if item_id is not None
                    else hashlib.sha256(user_text.encode("utf-8")).hexdigest()
                )
                n = self._counters[(index, key)]
                self._counters[(index, key)] = n + 1
                return index, rule.responses[min(n, len(rule.responses) - 1)], n
        return None, self.script.default, 0

    async def complete(self, request: CompletionRequest) -> Completion:
        item_id = current_item_id.get()
        user_text = _user_text(request)
        rule, step, index = self._select(item_id, user_text, request)
        outcome = "ok"
        try:
            if self.script.latency_s > 0:
                await asyncio.sleep(self.script.latency_s)
            return await self._play(step, request)
        except ProviderError as exc:
            outcome = f"error:{getattr(exc, 'fake_kind', 'provider')}"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"  # e.g. the per-call timeout fired during a scripted sleep
            raise
        finally:
            call = FakeCall(item_id, user_text, rule, index, outcome, request)
            self.calls.append(call)
            self._log(call)

    async def _play(self, step: Any, request: CompletionRequest) -> Completion:
        if callable(step) and not isinstance(step, (str, dict)):
            step = step(request)
            if inspect.isawaitable(step):
                step = await step
        usage: Mapping[str, Any] = {}
        if isinstance(step, dict):
            usage = step.get("usage") or {}
            if step.get("sleep"):
                await asyncio.sleep(float(step["sleep"]))
            if "error" in step:
                raise self._error(step)
            if "text" in step:
                text = str(step["text"])
            elif "json" in step:
                text = json.dumps(step["json"], ensure_ascii=False)
            elif "entities" in step or "relationships" in step:
                body = {k: v for k, v in step.items() if k in ("entities", "relationships")}
                text = json.dumps(body, ensure_ascii=False)
            else:
                text = EMPTY_ANSWER
        elif isinstance(step, Extraction):
            text = step.model_dump_json()
        else:
            text = str(step)
        prompt = "\n".join(m.content for m in request.messages)
        return Completion(
            text=text,
            model=self.model,
            usage=Usage(
                tokens_in=int(usage.get("input", _words(prompt))),
                tokens_out=int(usage.get("output", _words(text))),
                cost_usd=usage.get("cost_usd"),  # a priced call, for budget tests
            ),
        )

    def _error(self, step: Mapping[str, Any]) -> ProviderError:
        kind = step["error"]
        retry_after = step.get("retry_after")
        retry_after = float(retry_after) if retry_after is not None else None
        message = step.get("message")
        exc: ProviderError
        if kind == "timeout":
            exc = ProviderTimeout(message or "fake provider: scripted timeout", retryable=True)
        elif kind == "connection":
            exc = ProviderError(
                message or "fake provider: scripted connection error", retryable=True
            )
        else:
            try:
                status = int(kind)
            except (TypeError, ValueError):
                raise ConfigError(f"fake script: unknown error {kind!r}") from None
            exc = ProviderError(
                message or f"fake provider: HTTP {status} (scripted)",
                retryable=bool(step.get("retryable", retryable_status(status))),
                retry_after=retry_after,
            )
        exc.fake_kind = str(kind)  # type: ignore[attr-defined]
        return exc

    def _log(self, call: FakeCall) -> None:
        if self.log_path is None:
            return
        line = json.dumps(
            {
                "model": self.model,
                "item_id": call.item_id,
                "rule": call.rule,
                "index": call.index,
                "outcome": call.outcome,
                "pid": os.getpid(),
            }
        )
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")


_REGISTERED: dict[str, FakeProvider] = {}


def register_fake(name: str, script: Any = None) -> FakeProvider:
    """Make ``--model fake:<name>`` use this script (in this process) and return the provider,
    so a test can count the calls the run made."""
    provider = FakeProvider.from_script(script, model=name)
    _REGISTERED[name] = provider
    return provider


def unregister_fake(name: str | None = None) -> None:
    """Forget one registered fake, or all of them."""
    if name is None:
        _REGISTERED.clear()
    else:
        _REGISTERED.pop(name, None)


def get_fake(name: str) -> FakeProvider:
    """The registered fake for ``name``, else a fresh one scripted from the environment."""
    registered = _REGISTERED.get(name)
    return registered if registered is not None else FakeProvider.from_env(model=name)
