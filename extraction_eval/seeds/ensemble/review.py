"""People's side of ensemble gold: overrides (one at a time or from a JSONL file) that apply
from the next build on, and the items of the last build worth a look (low confidence)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extraction_eval.backends.base import canonical_json
from extraction_eval.backends.local import LocalStore
from extraction_eval.errors import UsageError, one_line
from extraction_eval.types import GoldOverride


def add_override(store: LocalStore, override: GoldOverride) -> int:
    """Store an override (checked first); it applies from the next build on."""
    from extraction_eval.evaluators.vote import check_override

    check_override(override)
    return store.add_gold_override(override.dataset, override)


def review_items(
    store: LocalStore, dataset: str, *, below: float = 0.75, item: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The last build's items whose min confidence is below ``below`` (or the one asked for),
    with their stored votes."""
    out = []
    for item_id, agg in store.iter_gold_aggregates(dataset):
        if item is not None:
            if item_id == item:
                out.append((item_id, agg))
            continue
        low = agg.get("gold", {}).get("min_confidence")
        if low is not None and low < below:
            out.append((item_id, agg))
    if item is not None and not out:
        raise UsageError(f"no built gold for item {item!r} of dataset {dataset!r}")
    return out


def _judged_pair(raw: dict[str, Any]) -> dict[str, Any]:
    """A judged pair as a person settles it, ``{"item_id", "pred_name", "gold_name", "same",
    "reason"}`` (a judged match as ``runs export`` writes it, with ``same`` set; ``a`` / ``b``
    work too), as the ``same`` / ``not_same`` override it is; any other line as it is."""
    if "action" in raw or "same" not in raw:
        return raw
    same = raw["same"]
    if not isinstance(same, bool):
        raise ValueError('"same" must be true or false')
    names = [
        raw.get(k) if raw.get(k) is not None else raw.get(alt)
        for k, alt in (("pred_name", "a"), ("gold_name", "b"))
    ]
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError('a judged pair needs "pred_name" and "gold_name" (or "a" and "b")')
    keep: dict[str, Any] = {k: raw[k] for k in ("item_id", "reason", "author") if k in raw}
    return {
        **keep,
        "action": "same" if same else "not_same",
        "kind": "entity",
        "target": names[0],
        "value": names[1],
    }


def read_overrides(path: Path, dataset: str) -> tuple[list[GoldOverride], list[str]]:
    """An overrides file (JSONL: item_id, action, kind, target, field, value, reason, author;
    or a judged pair: item_id, pred_name, gold_name, same, reason).

    A bad line is one warning in the usual ``FILE:LINE (id X): problem; skipped`` form (the
    file by its name, as every JSONL reader) and the rest is read; ``value`` of an ``add``
    may be the object itself (it is stored as JSON)."""
    from extraction_eval.datasets.lines import decoded_lines, objects, warning
    from extraction_eval.evaluators.vote import check_override

    found: list[GoldOverride] = []
    problems: list[str] = []
    try:
        with path.open("rb") as fh:  # each line decoded on its own: one bad costs one line
            lines = list(decoded_lines(fh))
    except OSError as exc:
        raise UsageError(f"{path}: {one_line(exc)}") from None
    for number, raw, (problem, item_id) in objects(lines):
        try:
            if raw is None:
                raise ValueError(problem)
            item_id = raw.get("item_id")
            raw = _judged_pair(raw)
            if isinstance(raw.get("value"), (dict, list)):
                raw["value"] = canonical_json(raw["value"])
            override = GoldOverride.model_validate({**raw, "dataset": dataset})
            check_override(override)
        except (ValueError, TypeError, RecursionError) as exc:
            problems.append(warning(path.name, number, item_id, one_line(exc)))
            continue
        found.append(override)
        if problem:  # kept, repaired (lone surrogates)
            problems.append(f"{path.name}:{number} (id {item_id}): {problem}")
    return found, problems
