"""The scoring report for people (``score``, and each run's). Each function takes plain JSON
(what the library returns) and a console, so a rendering can never change a number."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from extraction_eval.views.protocols import protocol_tables
from extraction_eval.views.tables import print_table

_MAX_TYPE_ROWS = 6
_MAX_WARNINGS = 5
_MAX_WARNINGS_ON_STDERR = 10


def fmt_number(value: Any, digits: int = 3) -> str:
    """One spelling of numbers across every view: fixed digits, '—' for missing."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ci(bounds: Any) -> str:
    if isinstance(bounds, dict) and bounds.get("low") is not None:
        return f"{bounds['low']:.3f}–{bounds['high']:.3f}"
    return "—"


def _counts_line(counts: dict[str, int], *, skip_zero: bool = True) -> str:
    parts = [f"{k} {v}" for k, v in counts.items() if v or not skip_zero]
    return " · ".join(parts) if parts else "none"


def _score_headline(report: dict[str, Any]) -> Table:
    ci = report.get("ci") or {}
    level = ci.get("level")
    ci_head = f"F1 {round(level * 100)}% CI" if isinstance(level, float) else "F1 CI"
    table = Table(title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("")
    for head in ("P", "R", "F1", ci_head, "tp", "fp", "fn"):
        table.add_column(head, justify="right")
    for label, key, prefix in (
        ("entities", "entities", "entity"),
        ("entities, typed", "entities_typed", "entity_typed"),
        ("relationships", "relationships", "relationship"),
    ):
        block = report.get(key) or {}
        table.add_row(
            label,
            fmt_number(block.get("precision")),
            fmt_number(block.get("recall")),
            Text(fmt_number(block.get("f1")), style="bold"),
            _ci(ci.get(f"{prefix}_f1")),
            fmt_number(block.get("tp")),
            fmt_number(block.get("fp")),
            fmt_number(block.get("fn")),
        )
    return table


def _per_type(report: dict[str, Any], more: str) -> Table | None:
    per_type = report.get("per_type") or {}
    rows: list[tuple[str, str, dict[str, Any]]] = []
    hidden = 0
    for kind in ("entities", "relationships"):
        types = per_type.get(kind) or {}
        ranked = sorted(types.items(), key=lambda kv: (-(kv[1]["tp"] + kv[1]["fn"]), kv[0]))
        hidden += max(0, len(ranked) - _MAX_TYPE_ROWS)
        label = "entity" if kind == "entities" else "relationship"
        rows += [(label, t, c) for t, c in ranked[:_MAX_TYPE_ROWS]]
    if not rows:
        return None
    table = Table(title="per type", title_justify="left", show_edge=False)
    table.add_column("kind")
    table.add_column("type")
    for head in ("P", "R", "F1", "support"):
        table.add_column(head, justify="right")
    for kind, name, c in rows:
        table.add_row(
            kind,
            escape(name),
            fmt_number(c.get("precision")),
            fmt_number(c.get("recall")),
            fmt_number(c.get("f1")),
            str(c["tp"] + c["fn"]),
        )
    if hidden:
        table.caption = f"{hidden} more types in {escape(more)}"
    return table


def alias_line(report: dict[str, Any]) -> str | None:
    """How many matches came through a gold entity's mention or alias ("entities 166 · ..."),
    or why none could (aliases off); None when nothing matched that way."""
    config = report.get("config") or {}
    if config.get("aliases") is False:
        return "off (--no-aliases): surface names only"
    alias = report.get("alias_matches") or {}
    if not any(isinstance(v, int) and v for v in alias.values()):
        return None
    return (
        f"entities {alias.get('entities', 0)} · typed {alias.get('entities_typed', 0)} · "
        f"relationships {alias.get('relationships', 0)} (matched by a mention or alias, not the"
        " gold's own name)"
    )


def _facts(report: dict[str, Any]) -> Table:
    facts = Table(show_header=False, box=None, pad_edge=False)
    facts.add_column(style="bold", no_wrap=True)
    facts.add_column()
    ents, rels = report.get("entities") or {}, report.get("relationships") or {}
    facts.add_row(
        "type accuracy",
        f"{fmt_number(report.get('type_accuracy'))} "
        f"({ents.get('type_correct', '?')}/{ents.get('tp', '?')} matched entities)",
    )
    rel_predicted = (
        rels["tp"] + rels["fp"] if isinstance(rels.get("tp"), int) and "fp" in rels else "?"
    )
    facts.add_row(
        "relationship accuracy",
        f"{fmt_number(report.get('relationship_accuracy'))} "
        f"({rels.get('tp', '?')}/{rel_predicted} predicted relationships)",
    )
    facts.add_row("relationship matches", _counts_line(report.get("match_types") or {}))
    if line := alias_line(report):
        facts.add_row("through aliases", line)
    failed = (report.get("no_prediction") or {}).get("count", 0)
    ev = report.get("evidence") or {}
    cov = ev.get("evidence_coverage_rate")
    facts.add_row(
        f"evidence ({ev.get('mode', '?')})",
        ("no predicted object carries evidence" if cov is None else f"{fmt_number(cov)} grounded")
        + f" ({ev.get('grounded')}/{ev.get('predicted')} predicted objects;"
        f" {ev.get('with_evidence')} carry evidence"
        + (f"; none from the {failed} errored item(s))" if failed else ")"),
    )
    attrs = report.get("attributes") or {}
    parts = [  # per key, kinds pooled: the attr.<key> values, with their bootstrap CI
        f"attr.{key} {fmt_number(v.get('accuracy'))} ({v.get('agree')}/{v.get('total')}"
        + (f", CI {fmt_number(ci['low'])}–{fmt_number(ci['high'])}" if (ci := v.get("ci")) else "")
        + ")"
        for key, v in sorted((attrs.get("keys") or {}).items())
    ]
    if parts:
        facts.add_row("attribute accuracy", " · ".join(parts))
    violations = attrs.get("violations") or {}
    if violations.get("declared"):
        facts.add_row(
            "attribute violations",
            f"{violations.get('objects')} of {violations.get('checked')} checked objects "
            f"({fmt_number(violations.get('attribute_violation_rate'))}); "
            f"{violations.get('count')} attribute(s) outside the schema",
        )
    neg = report.get("negative_space") or {}
    if neg.get("gold_empty_items"):
        n = neg["gold_empty_items"]
        errored = neg.get("errored", 0)
        with_output = neg.get("scored", n - errored)
        facts.add_row(
            "negative space",
            f"{n} gold-empty items: zero-FP pass {neg.get('zero_fp_pass_count')}/{n}"
            + (f" ({errored} errored)" if errored else "")
            + f" = {fmt_number(neg.get('zero_fp_pass_rate'))}"
            f" · hallucinated objects {neg.get('hallucination_count')}/{with_output} items"
            f" with output = {fmt_number(neg.get('hallucination_rate'))}",
        )
    else:
        facts.add_row("negative space", "no gold-empty items")
    taxonomy = report.get("taxonomy") or {}
    ranked = dict(sorted(taxonomy.items(), key=lambda kv: (-kv[1], kv[0])))
    facts.add_row("mistakes (objects)", _counts_line(ranked))
    if ignored := ignored_text(report):
        facts.add_row("ignored gold", ignored)
    macro = report.get("macro") or {}
    macro_n = (report.get("macro_items") or {}).get("entity_f1", report.get("items", "?"))
    facts.add_row(
        "macro F1",
        f"entities {fmt_number(macro.get('entity_f1'))}"
        f" · typed {fmt_number(macro.get('entity_typed_f1'))}"
        f" · relationships {fmt_number(macro.get('relationship_f1'))}"
        f" (means over {macro_n} items)",
    )
    return facts


def _shown(labels: list[str], limit: int = 12) -> str:
    more = f", … {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more


def _suggested_labels(gold: list[str], pred: list[str]) -> dict[str, str]:
    """A guess at the map, for the hint only: each gold label to the predicted label sharing
    its longest start (at least 2 letters, casefolded: Loc -> location, Peop -> person)."""
    out: dict[str, str] = {}
    for g in gold:
        best, best_len = None, 1
        for p in pred:
            a, b = g.casefold(), p.casefold()
            n = next(
                (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)),
            )
            if n > best_len:
                best, best_len = p, n
        if best is not None:
            out[g] = best
    return out


def label_warning(report: dict[str, Any]) -> str | None:
    """One line when predicted and gold entity types cannot meet (typed F1 is then 0 for a
    reason no model change fixes), naming both label sets and the fix; None otherwise."""
    mismatch = report.get("label_mismatch")
    if not isinstance(mismatch, dict):
        return None
    parts: list[str] = []
    example: dict[str, str] = {}
    for kind, what in (("entities", "entity types"), ("relationships", "relationship types")):
        sides = mismatch.get(kind)
        if not isinstance(sides, dict):
            continue
        pred, gold = sides.get("predicted") or [], sides.get("gold") or []
        parts.append(f"predicted {what} ({_shown(pred)}) never equal the gold's ({_shown(gold)})")
        example.update(_suggested_labels(gold, pred))
        if not example and gold:
            example[gold[0]] = "<predicted label>"
    if not parts:
        return None
    return (
        f"labels never meet: {'; '.join(parts)}, so their typed scores are 0; map gold labels"
        " to the pipeline's with a schema's \"labels\": --schema schema.json with"
        f" {json.dumps({'labels': example})}"
    )


def ignored_text(report: dict[str, Any]) -> str | None:
    """The ignore regions' line (gold below the confidence floor), when there were any."""
    ignored = report.get("ignored") or {}
    g, p = ignored.get("gold", 0), ignored.get("predictions", 0)
    if not g and not p:
        return None
    return (
        f"{g} gold objects below the confidence floor ignored, with the {p} predictions"
        " aligned with them (neither missed nor false positives)"
    )


def print_warnings(warnings: list[str], err: Console) -> None:
    """With ``--format json`` the report is on stdout: its warnings go to stderr, the first few
    one per line, so a person still sees them."""
    for w in warnings[:_MAX_WARNINGS_ON_STDERR]:
        err.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
    if len(warnings) > _MAX_WARNINGS_ON_STDERR:
        rest = len(warnings) - _MAX_WARNINGS_ON_STDERR
        err.print(f"[yellow]warning:[/] … {rest} more in the report's warnings")


def render_report(
    report_json: dict[str, Any],
    console: Console,
    *,
    title: str = "score",
    more: str = "--format json",
    warnings: bool = True,
) -> None:
    """The scoring summary (``score``, and each run's): headline P/R/F1 with CIs, then one line
    per other figure. ``more``: where the rows left out are (a command without ``--format
    json`` names another place). ``warnings=False``: the caller printed them already (a run
    prints them before its tables: ``views.doubts``)."""
    r = report_json
    cfg = r.get("config") or {}
    match = cfg.get("match", "?")
    rule = (
        f"≥ {cfg.get('threshold')}"
        if match == "fuzzy"
        else f"Jaccard ≥ {cfg.get('span_threshold')}"
        if match == "span"
        else ""
    )
    missing = (r.get("no_prediction") or {}).get("count", 0)
    heading = Text.assemble(
        (title, "bold"),
        f" — {r.get('items', 0)} items",
        (f" ({missing} without prediction)" if missing else ""),
        f", match {match} {rule}".rstrip(),
    )
    parts: list[Any] = [heading, _score_headline(r)]
    ci = r.get("ci") or {}
    if ci.get("resamples"):
        parts.append(Text(f"CIs: {ci.get('method')}, {ci['resamples']} resamples", style="dim"))
    per_type = _per_type(r, more)
    if per_type is not None:
        parts.append(per_type)
    parts.append(_facts(r))
    parts += protocol_tables(r)
    shown = list(r.get("warnings") or []) if warnings else []
    if warnings and (labels := label_warning(r)):
        shown.insert(0, labels)
    if shown:
        lines = [Text(f"{len(shown)} warning(s):", style="yellow")]
        lines += [Text(f"  {w}", style="yellow") for w in shown[:_MAX_WARNINGS]]
        if len(shown) > _MAX_WARNINGS:
            lines.append(Text(f"  … {len(shown) - _MAX_WARNINGS} more in {more}"))
        parts.append(Group(*lines))
    for part in parts:
        print_table(console, part)  # a table too wide for the console is transposed
