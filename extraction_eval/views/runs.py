"""Runs for people: the end-of-run summary, the runs list, one run's items, and the cost and
prompt lines they share."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from extraction_eval.evaluators.severity import item_severity
from extraction_eval.views.score_report import alias_line, fmt_number, render_report
from extraction_eval.views.tables import print_table

if TYPE_CHECKING:  # annotations only: importing a view loads no store and no runner
    from extraction_eval.analysis.worst import ItemsPage, WorstItem
    from extraction_eval.backends.local import RunRecord
    from extraction_eval.experiments.budget import CostEstimate
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.experiments.runner import RunOutcome
    from extraction_eval.types import ItemResult


def _fmt(value: Any, digits: int = 4) -> str:
    return fmt_number(value, digits)


def cost_text(cost_usd: float | None, unpriced_items: int, config: dict[str, Any]) -> str:
    """The run's cost and where its prices came from; never a bare dash: a cost we could not
    compute says why (offline, tokens not reported, or a model the price list lacks)."""
    pricing = config.get("pricing") or {}
    source = pricing.get("source")
    if source == "offline":
        return "0 (offline, no model call)"
    model = pricing.get("model_ref") or config.get("model")
    unknown = f"unknown price for {model}"
    if cost_usd is None:
        return unknown if unpriced_items else "not reported"
    if source == "override":
        where = (
            f"your prices: ${pricing.get('input_per_mtok')} in /"
            f" ${pricing.get('output_per_mtok')} out per 1M tokens"
        )
    elif source:
        where = f"{source} {pricing.get('version') or ''}".strip()
    else:
        where = ""
    parts = [where] if where else []
    if unpriced_items:
        parts.append(f"{unpriced_items} items not counted: {unknown}")
    return _fmt(cost_usd, 6) + (f" ({'; '.join(parts)})" if parts else "")


def render_run_summary(outcome: RunOutcome, console: Console, *, warnings: bool = True) -> None:
    """The run's tables; ``warnings=False`` when they were printed before (``views.doubts``)."""
    s = outcome.summary
    run = outcome.run
    report = s.report
    title = f"run {run.name!r} on {run.dataset!r} — {run.config.get('model')}"
    if str(run.config.get("model", "")).startswith("offline:"):
        title += " (offline baseline, not an LLM)"
    # run / run-experiment have no --format json: every type's F1 is in the HTML report
    more = f"`extraction-eval report {run.name}`"
    render_report(report, console, title=title, more=more, warnings=warnings)

    facts = Table(show_header=False, box=None)
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("items", f"{s.items} of {s.expected_items} ({outcome.ran} run now)")
    facts.add_row(
        "errored items",
        f"{s.errors} ({s.schema_failures} schema failures) of {s.items} items;"
        f" error_rate {_fmt(s.values.get('error_rate'))}",
    )
    facts.add_row(
        "schema_failure_rate",
        f"{_fmt(s.values.get('schema_failure_rate'))} ({s.schema_failures}/{s.items})",
    )
    facts.add_row(
        "latency p50 / p95 ms", f"{_fmt(s.latency_p50_ms, 1)} / {_fmt(s.latency_p95_ms, 1)}"
    )
    facts.add_row("tokens in / out", f"{s.tokens_in} / {s.tokens_out}")
    facts.add_row("cost USD", cost_text(s.cost_usd, s.unpriced_items, run.config))
    facts.add_row("cache hits", str(s.cache_hits))
    if s.repairs:
        facts.add_row("answers repaired", repairs_line(s.repairs, s.repaired_items, s.items))
    elif run.config.get("strict_json"):
        facts.add_row("answers repaired", "none: --strict-json (a reply needing one failed)")
    if fmt := response_format_summary(run.config):
        facts.add_row("response format", escape(fmt))
    if prompt := prompt_summary(run.config):
        facts.add_row("prompt", escape(prompt))
    if outcome.estimate is not None and outcome.estimate.calls:
        facts.add_row("cost estimate USD", estimate_text(outcome.estimate))
    if outcome.budget is not None:
        b = outcome.budget
        line = f"{_fmt(b['spent_usd'], 6)} spent of --max-cost {b['max_cost_usd']:g}"
        if b["stopped"]:
            line = f"[red]stopped: budget[/] — {line}; {b['not_run']} items not run (--resume)"
        facts.add_row("budget", line)
    if s.missing and not outcome.stopped_by_budget:
        facts.add_row("[red]missing", f"[red]{s.missing} items have no result (interrupted run)")
    print_table(console, facts)

    means = Table(title="item score means", title_justify="left")
    means.add_column("score")
    means.add_column("mean", justify="right")
    means.add_column("over items", justify="right")
    for name, value in s.score_means.items():
        means.add_row(name, _fmt(value), _fmt(s.score_counts.get(name)))
    print_table(console, means)
    if outcome.experiment_url:
        console.print(f"experiment: {outcome.experiment_url}", highlight=False, soft_wrap=True)
        run = outcome.run
        console.print(
            f"  in the LangFuse UI: Datasets > {run.dataset} > Experiments > {run.name}; a v4 UI"
            ' with a "V4 Preview" switch (sidebar, bottom) needs it on for this link',
            highlight=False,
            soft_wrap=True,
        )
    if outcome.langfuse_verified:
        console.print(outcome.langfuse_verified, highlight=False, soft_wrap=True)


def repairs_line(repairs: dict[str, int], repaired: int, items: int) -> str:
    """``fence 10, wrapper 2 (12 of 40 answers; ...)``: the answers read leniently."""
    counts = ", ".join(f"{name} {count}" for name, count in repairs.items())
    return f"{counts} ({repaired} of {items} answers; --strict-json: schema failures instead)"


def response_format_summary(config: dict[str, Any]) -> str | None:
    """How the run asked its server for JSON, and why that way (None: not a model run)."""
    from extraction_eval.llm.formats import FormatChoice

    choice = FormatChoice.from_json(config.get("response_format_choice"))
    return choice.summary() if choice is not None else None


def estimate_text(estimate: CostEstimate) -> str:
    if estimate.usd is None:
        return "unknown (" + "; ".join(estimate.unpriced) + ")"
    return f"{estimate.usd:.6f} ({estimate.calls} calls, ~{estimate.tokens_in} tokens in /" + (
        f" ~{estimate.tokens_out} out)"
    )


def render_estimate(estimate: CostEstimate, config: RunConfig, console: Console) -> None:
    """``--dry-run``: what the run would call and cost, before any call."""
    facts = Table(
        title=f"cost estimate: {config.pipeline.model} on {config.dataset!r} (dry run,"
        " nothing was called or created)",
        title_justify="left",
        show_header=False,
        box=None,
    )
    facts.add_column(style="bold")
    facts.add_column()
    skipped = []
    if estimate.skipped_done:
        skipped.append(f"{estimate.skipped_done} done already")
    if estimate.skipped_cached:
        skipped.append(f"{estimate.skipped_cached} answered from the response cache")
    facts.add_row(
        "items to run",
        f"{estimate.items}" + (f" (not counted: {', '.join(skipped)})" if skipped else ""),
    )
    facts.add_row("model calls", f"{estimate.calls} (retries not included)")
    facts.add_row("tokens in", f"~{estimate.tokens_in} (rendered prompts; {estimate.method})")
    facts.add_row("tokens out", f"~{estimate.tokens_out} (the gold answers; {estimate.method})")
    usd = (
        "unknown: " + "; ".join(estimate.unpriced)
        if estimate.usd is None
        else (f"{estimate.usd:.6f}")
    )
    facts.add_row("est. USD", usd)
    if config.max_cost is not None:
        within = estimate.usd is not None and estimate.usd <= config.max_cost
        facts.add_row("--max-cost", f"{config.max_cost:g} ({'within' if within else 'refused'})")
    print_table(console, facts)


def render_runs(runs: Sequence[RunRecord], console: Console) -> None:
    """One row per run. Names are never shortened (every other command takes them): dataset,
    model, status and start go on a second line so the table fits 80 columns."""
    table = Table(title="runs", box=box.SIMPLE_HEAD, show_edge=False, title_justify="left")
    table.add_column("run", min_width=max([3, *(len(r.name) for r in runs)]))
    table.add_column("items / errored", justify="right")
    table.add_column("entity F1", justify="right")
    table.add_column("rel F1", justify="right")
    for run in runs:
        summary = run.summary or {}
        values = summary.get("values") or {}
        model = str(run.config.get("model", ""))
        if run.backend != "local":
            model = f"{model} [{run.backend}]"
        started = run.started_at[5:16].replace("T", " ")
        cell = Text(run.name, style="bold")
        cell.append(f"\n{run.dataset} · {model} · {run.status} · {started}", style="dim")
        table.add_row(
            cell,
            f"{_fmt(summary.get('items'))} / {_fmt(summary.get('errors'))}",
            _fmt(values.get("entity_f1"), 3),
            _fmt(values.get("relationship_f1"), 3),
        )
    print_table(console, table)


def score_value(result: ItemResult, name: str) -> float | None:
    for s in result.scores:
        if s.name == name and isinstance(s.value, (int, float)):
            return float(s.value)
    return None


def prompt_summary(config: dict[str, Any]) -> str | None:
    """Which prompt a run sent (name, version, label, source, hash); None when it sent none."""
    prompt = config.get("prompt")
    if not isinstance(prompt, dict) or config.get("provider") in ("offline", "pipeline"):
        return None
    text = str(prompt.get("name"))
    if prompt.get("version") is not None:
        text += f" v{prompt['version']}"
    if prompt.get("label"):
        text += f" label={prompt['label']}"
    return f"{text} ({prompt.get('source')}, sha256 {str(config.get('prompt_hash'))[:12]})"


def _failures_cell(result: ItemResult) -> Text:
    """Failure categories (one per line, with their count) and the error, if any."""
    cell = Text()
    if result.taxonomy is None:
        cell.append("not recorded", style="dim")
    for category, count in result.categories.items():
        cell.append(("\n" if cell else "") + (f"{category} ×{count}" if count > 1 else category))
    if result.error:
        cell.append(("\n" if cell else "") + result.error, style="red")
    return cell


# ``runs show`` prints a longer run as consecutive tables of this many rows (header once).
ROWS_PER_TABLE = 500


def _display_order(r: ItemResult) -> tuple[float, int, str]:
    """Most severe first (``evaluators.severity``), as the store orders a page."""
    severity, wrong = item_severity(r)
    return (severity, -wrong, r.item_id)


def render_run_items(
    run: RunRecord,
    results: Iterable[ItemResult],
    console: Console,
    *,
    category: str | None = None,
    total: int | None = None,
) -> None:
    """Per-item table (``runs show --all``), most severe first (``evaluators.severity``);
    then each item's trace (the LangFuse URL when there is one), one per line so a URL is
    never cut.

    Up to ``ROWS_PER_TABLE`` items (or any number when ``total`` is not given) are one table,
    in whatever order they come. A stream of a longer run, with its ``total``, must already be
    in that order (``store.iter_results(order_by="severity")``): it prints as tables of
    ``ROWS_PER_TABLE`` rows, so only one table's rows are ever held."""
    scope = f" with category {category}" if category else ""
    prompt = prompt_summary(run.config)
    caption = escape(f"prompt: {prompt}") if prompt else None
    traced: list[tuple[str, str, bool]] = []
    if total is None or total <= ROWS_PER_TABLE:
        rows = sorted(results, key=_display_order)
        title = f"run {run.name!r} on {run.dataset!r}: {len(rows)} items{scope}"
        print_table(console, _items_table(rows, title=title, caption=caption, traced=traced))
    else:
        title = f"run {run.name!r} on {run.dataset!r}: {total} items{scope}"
        stream = iter(results)
        chunk = list(itertools.islice(stream, ROWS_PER_TABLE))
        while chunk:
            after = list(itertools.islice(stream, ROWS_PER_TABLE))
            table = _items_table(
                sorted(chunk, key=_display_order),
                title=title if title else None,
                caption=None if after else caption,
                traced=traced,
            )
            print_table(console, table)
            title, chunk = "", after
    _print_traces(traced, console)

    summary = run.summary or {}
    cost = cost_text(summary.get("cost_usd"), summary.get("unpriced_items") or 0, run.config)
    console.print(f"cost USD: {cost}", highlight=False, soft_wrap=True)


def _f1_line(report: dict[str, Any], kind: str) -> str:
    """``P / R / F1 [CI]`` of ``entities`` or ``relationships`` from a stored run report."""
    block = report.get(kind) or {}
    if block.get("f1") is None:
        return "-"
    metric = "entity_f1" if kind == "entities" else "relationship_f1"
    ci = (report.get("ci") or {}).get(metric) or {}
    text = f"P {_fmt(block.get('precision'), 3)} / R {_fmt(block.get('recall'), 3)}"
    text += f" / F1 {_fmt(block.get('f1'), 3)}"
    if ci.get("low") is not None and ci.get("high") is not None:
        text += f" [{_fmt(ci['low'], 3)}, {_fmt(ci['high'], 3)}]"
    return text


def render_run_header(run: RunRecord, console: Console, *, mistakes: int | None = None) -> None:
    """``runs show``'s first lines: what the run was and its stored summary (never its rows);
    ``mistakes``: its items with mistakes (errored items are counted apart)."""
    summary = run.summary or {}
    report = summary.get("report") or {}
    facts = Table(
        title=f"run {run.name!r} on {run.dataset!r} — {run.config.get('model')}",
        title_justify="left",
        show_header=False,
        box=None,
    )
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("status", f"{run.status} (started {run.started_at[:16].replace('T', ' ')})")
    if summary:
        line = f"{_fmt(summary.get('items'))} of {_fmt(summary.get('expected_items'))}"
        line += f"; {_fmt(summary.get('errors'))} errored"
        facts.add_row("items", line)
    if mistakes is not None:
        facts.add_row("items with mistakes", f"{mistakes} (an output scored below perfect)")
    if summary.get("repairs"):
        repairs = {str(k): int(v) for k, v in summary["repairs"].items()}
        items = int(summary.get("items") or 0)
        repaired = int(summary.get("repaired_items") or 0)
        facts.add_row("answers repaired", escape(repairs_line(repairs, repaired, items)))
    if report:
        facts.add_row("entities", _f1_line(report, "entities"))
        facts.add_row("relationships", _f1_line(report, "relationships"))
        if aliases := alias_line(report):
            facts.add_row("through aliases", aliases)
    if summary.get("latency_p50_ms") is not None:
        facts.add_row(
            "latency p50 / p95 ms",
            f"{_fmt(summary.get('latency_p50_ms'), 1)} / {_fmt(summary.get('latency_p95_ms'), 1)}",
        )
    if summary:
        cost = cost_text(summary.get("cost_usd"), summary.get("unpriced_items") or 0, run.config)
        facts.add_row("cost USD", cost)
    print_table(console, facts)
    if prompt := prompt_summary(run.config):  # one line of its own: never cut
        console.print(f"prompt: {prompt}", highlight=False, markup=False, soft_wrap=True)


def render_run_page(
    run: RunRecord, page: ItemsPage, console: Console, *, category: str | None = None
) -> None:
    """``runs show``: the header, one page of items most severe first, and how to see more."""
    render_run_header(run, console, mistakes=None if category else page.with_mistakes)
    scope = f" with category {category}" if category else ""
    if not page.results:
        console.print(
            f"no items{scope} on page {page.page} ({page.total} items, {page.pages} pages)",
            highlight=False,
        )
        return
    last = page.first + len(page.results) - 1
    title = (
        f"items {page.first}–{last} of {page.total}{scope}, most severe first"
        f" (page {page.page} of {page.pages})"
    )
    traced: list[tuple[str, str, bool]] = []
    print_table(console, _items_table(page.results, title=title, caption=None, traced=traced))
    _print_traces(traced, console)
    if page.page < page.pages:
        console.print(
            f"{page.total - last} more: --page {page.page + 1} for the next {page.limit},"
            " --limit N for longer pages, --all for every item",
            style="dim",
            highlight=False,
        )


def _print_traces(traced: list[tuple[str, str, bool]], console: Console) -> None:
    if traced:
        console.print(Text("traces", style="bold"))
        for item_id, target, is_url in traced:
            line = Text(f"  {item_id}  ")
            line.append(target, style=f"link {target}" if is_url else "")
            console.print(line, soft_wrap=True)


def _items_table(
    ordered: Sequence[ItemResult],
    *,
    title: str | None,
    caption: str | None,
    traced: list[tuple[str, str, bool]],
) -> Table:
    """One table of ``render_run_items`` (without a title: a continuation, no header either);
    appends each traced item's (id, trace, is a URL) to ``traced``."""
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        show_header=title is not None,
        caption=caption,
    )
    table.add_column("item", no_wrap=True, min_width=max([4, *(len(r.item_id) for r in ordered)]))
    for col in ("entity F1", "rel F1", "type acc", "tries", "ms"):
        # a continuation has no header to give the column its width: keep it aligned
        table.add_column(col, justify="right", min_width=len(col) if title is None else None)
    table.add_column("failure categories / error", overflow="fold", ratio=1)
    for r in ordered:
        table.add_row(
            r.item_id,
            _fmt(score_value(r, "entity_f1"), 3),
            _fmt(score_value(r, "relationship_f1"), 3),
            _fmt(score_value(r, "type_accuracy"), 3),
            str(r.attempts),
            _fmt(r.latency_ms, 1),
            _failures_cell(r),
        )
        if r.trace_id or r.trace_url:
            traced.append((r.item_id, r.trace_url or r.trace_id or "", bool(r.trace_url)))
    return table


def _worst_table(rows: Sequence[WorstItem], *, title: str, first_col: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column(first_col, no_wrap=True)
    table.add_column("item", no_wrap=True)
    for col in ("F1", "ent F1", "rel F1", "wrong"):
        table.add_column(col, justify="right")
    table.add_column("failure categories / error", overflow="fold", ratio=1)
    return table


def _worst_cells(w: WorstItem) -> list[str | Text]:
    cell = Text()
    if w.categories is None:
        cell.append("not recorded", style="dim")
    for category, count in (w.categories or {}).items():
        cell.append(("\n" if cell else "") + (f"{category} ×{count}" if count > 1 else category))
    if w.error:
        cell.append(("\n" if cell else "") + w.error, style="red")
    return [
        w.item_id,
        "error" if w.error is not None else _fmt(w.combined_f1, 3),
        _fmt(w.entity_f1, 3),
        _fmt(w.relationship_f1, 3),
        str(w.wrong_objects),
        cell,
    ]


def _print_links(rows: Iterable[tuple[str, WorstItem]], console: Console) -> None:
    """Each item's trace on a line of its own (a URL is never cut): the LangFuse URL when the
    run has one, else the trace id."""
    links = [(label, w.trace_url or w.trace_id or "", bool(w.trace_url)) for label, w in rows]
    links = [link for link in links if link[1]]
    if not links:
        return
    console.print(Text("traces", style="bold"))
    for label, target, is_url in links:
        line = Text(f"  {label}  ")
        line.append(target, style=f"link {target}" if is_url else "")
        console.print(line, soft_wrap=True)


def render_worst(
    run: RunRecord,
    rows: Sequence[WorstItem],
    console: Console,
    *,
    category: str | None = None,
    first: int = 1,
) -> None:
    """``runs show --worst``: errored items and items with mistakes, most severe first
    (``analysis.worst``);
    ``first`` is the rank of the first row (a later ``--page``)."""
    scope = f" with category {category}" if category else ""
    if not rows:
        console.print(
            f"run {run.name!r} on {run.dataset!r}: no errored items and no items with"
            f" mistakes{scope}",
            highlight=False,
        )
        return
    title = f"run {run.name!r} on {run.dataset!r}: {len(rows)} worst items{scope}"
    table = _worst_table(rows, title=title, first_col="#")
    for rank, w in enumerate(rows, first):
        table.add_row(str(rank), *_worst_cells(w))
    print_table(console, table)
    _print_links(((w.item_id, w) for w in rows), console)


def render_worst_by_category(run: RunRecord, rows: dict[str, WorstItem], console: Console) -> None:
    """``runs show --worst --by-category``: the most severe item of each failure category."""
    if not rows:
        console.print(
            f"run {run.name!r} on {run.dataset!r}: no errored items and no items with mistakes",
            highlight=False,
        )
        return
    title = f"run {run.name!r} on {run.dataset!r}: worst item per failure category"
    table = _worst_table(list(rows.values()), title=title, first_col="category")
    for category, w in rows.items():
        table.add_row(category, *_worst_cells(w))
    print_table(console, table)
    _print_links(((f"{c}: {w.item_id}", w) for c, w in rows.items()), console)


def render_run_config(run: RunRecord, rows: Sequence[tuple[str, str]], console: Console) -> None:
    """A run's recorded parameters (``runs show --config``) as a two-column table."""
    table = Table(title=f"run {run.name} — configuration", show_header=False)
    table.add_column("parameter", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, value in rows:
        table.add_row(name, Text(value))
    console.print(table)
