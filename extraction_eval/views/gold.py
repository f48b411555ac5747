"""Ensemble gold for people: the plan of a build, what it built, and the items to review."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from extraction_eval.views.tables import print_table

if TYPE_CHECKING:  # annotations only: importing a view loads no scoring code
    from extraction_eval.seeds.ensemble.build import GoldBuild, GoldPlan
    from extraction_eval.seeds.ensemble.config import GoldConfig


def _say(out: Console, message: str) -> None:
    out.print(escape(message), highlight=False, soft_wrap=True)


def render_plan(plan: GoldPlan, out: Console) -> None:
    per_model = ", ".join(f"{m} {n}" for m, n in sorted(plan.calls_by_model.items()))
    _say(
        out,
        f"gold build would make {plan.calls} model calls ({per_model or 'none'}) for"
        f" {plan.items} items × {plan.runs} runs; {plan.cached} answers are cached"
        + (f", {plan.offline} come from offline pipelines" if plan.offline else "")
        + f"; schema hash {plan.schema_hash}",
    )
    e = plan.estimate
    usd = "unknown (" + "; ".join(e.unpriced) + ")" if e.usd is None else f"{e.usd:.6f}"
    _say(
        out,
        f"estimated: ~{e.tokens_in} tokens in, ~{e.tokens_out} out ({e.method}), USD {usd}"
        + (" (Batch API price)" if plan.batch else ""),
    )


def render_build(build: GoldBuild, config: GoldConfig, out: Console, err: Console) -> None:
    for line in build.notes:
        err.print(escape(line), highlight=False, soft_wrap=True)
    for line in build.errors:
        err.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)
    for line in build.override_problems:
        err.print(f"[yellow]override not applied:[/] {escape(line)}", highlight=False)
    kept = sum(len(i.expected.entities) + len(i.expected.relationships) for i in build.items)
    overridden = sum(
        1
        for i in build.items
        for m in (*i.metadata["gold"]["entities"], *i.metadata["gold"]["relationships"])
        if m.get("source") == "override"
    )
    _say(
        out,
        f"built gold for {len(build.items)} items of {config.dataset!r}: {kept} objects kept"
        f" ({overridden} from overrides), {build.ties} ties broken, {build.plan.calls} model"
        f" calls, {build.plan.cached} cached answers, {len(build.errors)} failed runs",
    )
    if build.upload is not None:
        u = build.upload
        where = f"new version {u.version}" if u.new_version else f"unchanged (version {u.version})"
        _say(out, f"dataset {u.dataset!r}: {where}; {u.created} new, {u.updated} changed items")
    if build.review:
        low = ", ".join(f"{i} ({c:.2f})" for i, c in build.review[:10])
        more = f" and {len(build.review) - 10} more" if len(build.review) > 10 else ""
        _say(
            out,
            f"{len(build.review)} items below {config.review_below:g} confidence: {low}{more};"
            f" see 'extraction-eval gold review {config.dataset}'",
        )


def render_review(found: Sequence[tuple[str, dict[str, Any]]], out: Console) -> None:
    """Each item's objects that are not unanimous, with every value's weight and runs."""
    if not found:
        _say(out, "no item needs review")
        return
    for item_id, agg in found:
        gold = agg.get("gold", {})
        _say(out, f"item {item_id}: min confidence {gold.get('min_confidence')}")
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        for col in ("object", "field", "kept", "value (weight: runs)"):
            table.add_column(col)
        for obj in agg.get("vote", {}).get("objects", []):
            o = obj["object"]
            name = o.get("name") or f"{o.get('source')} {o.get('type')} {o.get('target')}"
            disputed = [(f, v) for f, v in sorted(obj["fields"].items()) if len(v["ballots"]) > 1]
            if obj["confidence"] < 1.0:
                disputed.insert(0, ("(object)", None))
            for field_name, vote in disputed:
                ballots = (
                    f"found by {', '.join(obj['support'])} ({obj['confidence']:.2f})"
                    if vote is None
                    else "; ".join(
                        f"{b['value']!s}: {b['weight']:g} ({', '.join(b['runs'])})"
                        for b in vote["ballots"]
                    )
                )
                table.add_row(name, field_name, "yes" if obj["kept"] else "no", ballots)
        for o in agg.get("overrides", []):
            table.add_row(
                o.get("target") or "(added)",
                f"override #{o.get('id')}",
                o.get("action", ""),
                f"{o.get('field') or ''}={o.get('value') or ''} — {o.get('reason')}",
            )
        print_table(out, table)
