"""User pipelines for end-to-end tests, loaded with ``--pipeline tests.support.pipelines:NAME``.

Behaviour is steered by environment variables so a subprocess run can be controlled:
``E2E_CALL_LOG`` (append each called item id), ``E2E_DELAY`` (seconds per call) and
``E2E_FAIL`` (comma-separated item ids that raise).
"""

from __future__ import annotations

import os
import time
from typing import Any


def _log(item_id: str) -> None:
    path = os.environ.get("E2E_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fp:
            fp.write(item_id + "\n")
            fp.flush()
            os.fsync(fp.fileno())


def first_entity(*, text: str, item: Any, **_: Any) -> dict[str, Any]:
    """Returns the first gold entity only (so recall is imperfect), or fails on request."""
    _log(item.id)
    delay = float(os.environ.get("E2E_DELAY", "0"))
    if delay:
        time.sleep(delay)
    if item.id in os.environ.get("E2E_FAIL", "").split(","):
        raise RuntimeError(f"scripted failure for {item.id}")
    ents = item.expected.entities[:1]
    return {"entities": [e.model_dump() for e in ents], "relationships": []}


async def async_empty(**_: Any) -> dict[str, Any]:
    return {"entities": [], "relationships": []}


def neighbour_entity(*, item: Any, **_: Any) -> dict[str, Any]:
    """Its item's first gold entity plus the previous bundled item's (a name from another
    item's text: context_bleed, which only a scorer that sees every item's text can tell);
    fails for the ids in ``E2E_FAIL``."""
    from extraction_eval.datasets.bundled import sample_items

    if item.id in os.environ.get("E2E_FAIL", "").split(","):
        raise RuntimeError(f"scripted failure for {item.id}")
    sample = sample_items()
    ids = [i.id for i in sample]
    before = sample[ids.index(item.id) - 1] if item.id in ids else item
    ents = [*item.expected.entities[:1], *before.expected.entities[:1]]
    return {"entities": [e.model_dump() for e in ents], "relationships": []}


def always_fails(*, item: Any, **_: Any) -> dict[str, Any]:
    """Raises on every item: a run of it must score as failures, never as passes."""
    raise RuntimeError(f"crash on {item.id}")


# --- in-process instrumentation (LangFuse experiment tests) ---------------------------------
# ``CALL_TIMES`` gets (item id, start, end) per call (time.perf_counter), so a test can measure
# how many calls overlapped; ``HOOK``, when set, is called with each item after its delay
# (e.g. to take a fake server down mid-run). Delay: ``E2E_DELAY`` seconds.

CALL_TIMES: list[tuple[str, float, float]] = []
HOOK: Any = None


def _first_gold_entity(item: Any) -> dict[str, Any]:
    ents = item.expected.entities[:1]
    return {"entities": [e.model_dump() for e in ents], "relationships": []}


def timed_sync(*, item: Any, **_: Any) -> dict[str, Any]:
    start = time.perf_counter()
    time.sleep(float(os.environ.get("E2E_DELAY", "0")))
    CALL_TIMES.append((item.id, start, time.perf_counter()))
    if HOOK is not None:
        HOOK(item)
    return _first_gold_entity(item)


async def timed_async(*, item: Any, **_: Any) -> dict[str, Any]:
    import asyncio

    start = time.perf_counter()
    await asyncio.sleep(float(os.environ.get("E2E_DELAY", "0")))
    CALL_TIMES.append((item.id, start, time.perf_counter()))
    if HOOK is not None:
        HOOK(item)
    return _first_gold_entity(item)


def by_mention(*, item: Any, **_: Any) -> dict[str, Any]:
    """The gold itself, each entity named by its last mention or alias (relationships name
    their endpoints alike): every answer right, none by the gold's own name where it has
    another."""
    names = []
    for e in item.expected.entities:
        others = [m.name for m in e.mentions if m.name != e.name] + list(e.aliases)
        names.append(others[-1] if others else e.name)
    by_name = {e.name: n for e, n in zip(item.expected.entities, names, strict=True)}
    return {
        "entities": [
            {"name": n, "type": e.type} for e, n in zip(item.expected.entities, names, strict=True)
        ],
        "relationships": [
            {
                "source": by_name.get(r.source, r.source),
                "type": r.type,
                "target": by_name.get(r.target, r.target),
            }
            for r in item.expected.relationships
        ],
    }


def echo_gold(*, item: Any, **_: Any) -> dict[str, Any]:
    """The item's whole gold (offsets, mentions, head/tail): every score is perfect."""
    return item.expected.model_dump(mode="json")


def fails_two_ways(*, item: Any, **_: Any) -> dict[str, Any]:
    """``first_entity``, except: the ids in ``E2E_FAIL`` raise, those in ``E2E_BAD`` answer
    something that is not an extraction; ``E2E_PID_LOG`` gets "item id, process id" per call
    (which worker process ran it)."""
    path = os.environ.get("E2E_PID_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fp:
            fp.write(f"{item.id} {os.getpid()}\n")
    if item.id in os.environ.get("E2E_BAD", "").split(","):
        return {"entities": "not a list", "relationships": []}
    return first_entity(text=item.text, item=item)


def upper_names(*, item: Any, **_: Any) -> dict[str, Any]:
    """The item's gold with every name in capitals: right under ``casefold`` or ``fuzzy``
    matching, wrong under ``exact`` (a scoring choice that shows)."""
    gold = item.expected.model_dump(mode="json")
    for entity in gold["entities"]:
        entity["name"] = entity["name"].upper()
    for rel in gold["relationships"]:
        rel["source"], rel["target"] = rel["source"].upper(), rel["target"].upper()
    return {"entities": gold["entities"], "relationships": gold["relationships"]}
