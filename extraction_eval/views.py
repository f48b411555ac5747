"""Rich views of runs: progress, the end-of-run summary, run lists, per-item tables, compare."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from extraction_eval.backends.local import RunRecord
from extraction_eval.experiments.runner import RunOutcome
from extraction_eval.render import fmt_number, render_report
from extraction_eval.types import ItemResult


def _fmt(value: Any, digits: int = 4) -> str:
    return fmt_number(value, digits)


class RichProgress:
    """Progress bar with done / errors / ETA, on stderr so stdout stays clean for data."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[errors]} errors"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task: TaskID | None = None
        self._errors = 0

    def __enter__(self) -> RichProgress:
        return self  # the display starts with the run (``start``): a refused setup prints 1 line

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._progress.stop()

    def start(self, *, total: int, done: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task("items", total=total, completed=done, errors=0)

    def advance(self, result: ItemResult) -> None:
        if self._task is None:
            return
        if not result.ok:
            self._errors += 1
        self._progress.update(self._task, advance=1, errors=self._errors)


def render_run_summary(outcome: RunOutcome, console: Console) -> None:
    s = outcome.summary
    run = outcome.run
    report = s.report
    title = f"run {run.name!r} on {run.dataset!r} — {run.config.get('model')}"
    if str(run.config.get("model", "")).startswith("offline:"):
        title += " (offline baseline, not an LLM)"
    render_report(report, console, title=title)

    facts = Table(show_header=False, box=None)
    facts.add_column(style="bold")
    facts.add_column()
    facts.add_row("items", f"{s.items} of {s.expected_items} ({outcome.ran} run now)")
    facts.add_row("failures", f"{s.errors} ({s.schema_failures} schema failures)")
    facts.add_row("schema_failure_rate", _fmt(s.values.get("schema_failure_rate")))
    facts.add_row(
        "latency p50 / p95 ms", f"{_fmt(s.latency_p50_ms, 1)} / {_fmt(s.latency_p95_ms, 1)}"
    )
    facts.add_row("tokens in / out", f"{s.tokens_in} / {s.tokens_out}")
    facts.add_row("cost USD", _fmt(s.cost_usd, 6))
    facts.add_row("cache hits", str(s.cache_hits))
    if s.missing:
        facts.add_row("[red]missing", f"[red]{s.missing} items have no result (interrupted run)")
    console.print(facts)

    means = Table(title="item score means", title_justify="left")
    means.add_column("score")
    means.add_column("mean", justify="right")
    for name, value in s.score_means.items():
        means.add_row(name, _fmt(value))
    console.print(means)
    if outcome.experiment_url:
        console.print(f"experiment: {outcome.experiment_url}", highlight=False, soft_wrap=True)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_runs(runs: Sequence[RunRecord], console: Console) -> None:
    """One line per run; long dataset and model names are shortened so a line fits."""
    table = Table(title="runs", box=box.SIMPLE_HEAD, title_justify="left")
    # the name is what every other command takes: never shortened
    table.add_column("name", no_wrap=True, min_width=max([4, *(len(r.name) for r in runs)]))
    table.add_column("dataset", no_wrap=True)
    table.add_column("model", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("items/err", justify="right", no_wrap=True)
    table.add_column("entity_f1", justify="right", no_wrap=True)
    table.add_column("rel_f1", justify="right", no_wrap=True)
    table.add_column("started", no_wrap=True)
    for run in runs:
        summary = run.summary or {}
        values = summary.get("values") or {}
        model = str(run.config.get("model", ""))
        if run.backend != "local":
            model = f"{model} [{run.backend}]"
        table.add_row(
            run.name,
            _short(run.dataset, 16),
            _short(model, 24),
            run.status,
            f"{_fmt(summary.get('items'))}/{_fmt(summary.get('errors'))}",
            _fmt(values.get("entity_f1"), 3),
            _fmt(values.get("relationship_f1"), 3),
            run.started_at[5:16].replace("T", " "),
        )
    console.print(table)


def score_value(result: ItemResult, name: str) -> float | None:
    for s in result.scores:
        if s.name == name and isinstance(s.value, (int, float)):
            return float(s.value)
    return None


def render_run_items(run: RunRecord, results: Sequence[ItemResult], console: Console) -> None:
    """Per-item table, failing items first, then the weakest entity F1."""
    ordered = sorted(
        results,
        key=lambda r: (r.ok, score_value(r, "entity_f1") or 0.0, r.item_id),
    )
    table = Table(title=f"run {run.name!r} on {run.dataset!r}: {len(results)} items")
    table.add_column("item", no_wrap=True)
    for col in ("entity_f1", "rel_f1", "type_acc", "attempts", "latency ms"):
        table.add_column(col, justify="right")
    table.add_column("error", overflow="fold")
    for r in ordered:
        table.add_row(
            r.item_id,
            _fmt(score_value(r, "entity_f1"), 3),
            _fmt(score_value(r, "relationship_f1"), 3),
            _fmt(score_value(r, "type_accuracy"), 3),
            str(r.attempts),
            _fmt(r.latency_ms, 1),
            f"[red]{r.error}" if r.error else "",
        )
    console.print(table)


def render_compare(comparison: dict[str, Any], console: Console) -> None:
    """Run-level values with their CIs side by side (bounds folded into their metric's row)."""
    a, b = comparison["a"], comparison["b"]
    rows = {name: (va, vb, delta) for name, va, vb, delta in comparison["run_level"]}
    table = Table(title=f"compare {a!r} → {b!r}", title_justify="left")
    table.add_column("run-level")
    for head in (a, "95% CI", b, "95% CI", "Δ"):
        table.add_column(head, justify="right")

    def ci(name: str, side: int) -> str:
        lo, hi = rows.get(f"{name}_ci_low"), rows.get(f"{name}_ci_high")
        if lo is None or hi is None or lo[side] is None or hi[side] is None:
            return ""
        return f"[{lo[side]:.3f}, {hi[side]:.3f}]"

    for name, (va, vb, delta) in rows.items():
        if name.endswith(("_ci_low", "_ci_high")):
            continue
        colour = "" if delta is None or delta == 0 else ("green" if delta > 0 else "red")
        if name in ("error_rate", "schema_failure_rate", "hallucination_rate") and colour:
            colour = "red" if colour == "green" else "green"  # lower is better
        shown = _fmt(delta) if delta is not None else "—"
        table.add_row(
            name,
            _fmt(va),
            ci(name, 0),
            _fmt(vb),
            ci(name, 1),
            f"[{colour}]{shown}" if colour else shown,
        )
    console.print(table)
    items = Table(title="items whose entity F1 changed most", title_justify="left")
    items.add_column("item", no_wrap=True)
    for col in (a, b, "Δ"):
        items.add_column(col, justify="right")
    for item_id, va, vb, delta in comparison["items"]:
        items.add_row(item_id, _fmt(va, 3), _fmt(vb, 3), _fmt(delta, 3))
    console.print(items)
    only = [
        f"{len(comparison[k])} items only in {r!r}" for k, r in (("only_in_a", a), ("only_in_b", b))
    ]
    if comparison["only_in_a"] or comparison["only_in_b"]:
        console.print("; ".join(only), highlight=False)
