"""``gold build|review|override|triage|apply-reviews``: ensemble gold for a dataset, and review
queues that make gold better (parse, call, render).

Library modules are imported inside each command, so ``--help`` loads none of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer

from extraction_eval.commands import options as o
from extraction_eval.commands.common import (
    FormatOpt,
    check_readable,
    check_writable,
    console,
    err_console,
    handle_errors,
    output_format,
)

gold_app = typer.Typer(
    no_args_is_help=True,
    help="Ensemble gold: several models vote a dataset's expected output; people override and"
    " review likely gold gaps in a queue.",
)


@gold_app.command("build")
@handle_errors
def build_cmd(
    dataset: o.DatasetOrFile = None,
    models: Annotated[
        list[str] | None,
        typer.Option(
            "--models",
            help="provider:model[:runs[:weight]] (repeatable, or a comma list), e.g. "
            "openai:gpt-5-mini:1:2,openai:gpt-5-nano:3:1.",
        ),
    ] = None,
    config_file: o.ConfigFile = None,
    min_agreement: Annotated[
        float | None,
        typer.Option(help="Keep an object when more than this share of weight found it [0.5]."),
    ] = None,
    review_below: Annotated[
        float | None, typer.Option(help="List items whose lowest confidence is below [0.75].")
    ] = None,
    temperature: o.TemperatureOrFile = None,
    dataset_version: Annotated[
        str | None, typer.Option(help="Dataset version to build from (default: the latest).")
    ] = None,
    concurrency: o.ConcurrencyOrFile = None,
    batch: o.BatchOrFile = None,
    base_url: o.BaseUrl = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Also write the built items as JSONL (our gold format) here."),
    ] = None,
    no_upload: Annotated[
        bool, typer.Option("--no-upload", help="Do not add a dataset version (use with --out).")
    ] = False,
    dry_run: o.DryRun = False,
) -> None:
    """Run every model on every item, keep what the weighted majority agrees on, apply the
    overrides, and save the result as a new dataset version."""
    # the build's settings by name (None: not given), before anything else is bound here
    given = {k: v for k, v in locals().items() if k not in ("config_file", "out", "no_upload")}
    given.pop("dry_run")
    from extraction_eval.backends import get_dataset_backend
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.seeds.ensemble.build import build_gold, plan_gold
    from extraction_eval.seeds.ensemble.config import GoldConfig
    from extraction_eval.views.gold import render_build, render_plan

    if config_file is not None:
        check_readable("--config", config_file)
    if out is not None:
        check_writable("--out", out)
    config = GoldConfig.resolve(config_file, given)
    store = LocalStore()
    backend = get_dataset_backend()
    try:
        if dry_run:
            render_plan(plan_gold(config, store, backend), console)
            return
        if out is not None:
            from extraction_eval.atomic import atomic_text

            with atomic_text(out) as fp:  # whole or not at all
                build = build_gold(config, store, backend, write=not no_upload, out=fp)
        else:
            build = build_gold(config, store, backend, write=not no_upload)
    finally:
        backend.close()
    from extraction_eval.evaluators.stats.gold_agreement import gold_agreement

    render_build(build, config, console, err_console, agreement=gold_agreement(build.votes))


@gold_app.command("review")
@handle_errors
def review_cmd(
    dataset: Annotated[str, typer.Argument(help="Dataset whose last build to review.")],
    item: Annotated[str | None, typer.Option(help="Show this item only.")] = None,
    below: Annotated[float, typer.Option(help="Items whose lowest confidence is below.")] = 0.75,
    fmt: FormatOpt = "table",
    queue: Annotated[
        str | None,
        typer.Option(help="Show this review queue's candidates (gold triage) and their state."),
    ] = None,
) -> None:
    """Items of the last build that need a person: each object with the disagreeing votes;
    with --queue, the candidates triage sent and what became of them."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.seeds.ensemble.review import review_items
    from extraction_eval.views.gold import render_review

    fmt = output_format(fmt)
    if queue is not None:
        from extraction_eval.seeds.review.triage import queue_state
        from extraction_eval.views.review import render_candidates

        rows = queue_state(LocalStore(), queue, dataset)
        if fmt == "json":
            out = [{**c.to_json(), "state": state} for c, state in rows]
            typer.echo(json.dumps(out, sort_keys=True, indent=1))
            return
        render_candidates(rows, console)
        console.print(f"{len(rows)} candidates of {dataset} in queue {queue}", highlight=False)
        return
    found = review_items(LocalStore(), dataset, below=below, item=item)
    if fmt == "json":
        typer.echo(json.dumps([{"item_id": i, **a} for i, a in found], sort_keys=True, indent=1))
        return
    render_review(found, console)


@gold_app.command("override")
@handle_errors
def override_cmd(
    dataset: Annotated[str, typer.Argument(help="Dataset.")],
    item: Annotated[str | None, typer.Argument(help="Item id (not with --file).")] = None,
    add: Annotated[
        str | None, typer.Option(help="Add an object: its JSON (an entity or a relationship).")
    ] = None,
    remove: Annotated[
        str | None,
        typer.Option(help="Remove an object: an entity's name, or source|type|target."),
    ] = None,
    set_: Annotated[
        str | None,
        typer.Option("--set", help="TARGET.FIELD=VALUE, e.g. 'Port Ansel.type=city'."),
    ] = None,
    same: Annotated[
        str | None,
        typer.Option(
            "--same",
            help="PREDICTED=GOLD: overrule the --judge: on this item these two names are one"
            " entity (no judge is asked).",
        ),
    ] = None,
    not_same: Annotated[
        str | None,
        typer.Option(
            "--not-same",
            help="PREDICTED=GOLD: overrule the --judge: on this item these two names are not"
            " one entity (no judge is asked).",
        ),
    ] = None,
    kind: Annotated[
        Literal["entity", "relationship"], typer.Option(help="What the override is about.")
    ] = "entity",
    reason: Annotated[str | None, typer.Option(help="Why (kept with the gold).")] = None,
    author: Annotated[str | None, typer.Option(help="Who.")] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            help="JSONL of overrides: item_id, action, kind, target, field, value, reason, author."
        ),
    ] = None,
) -> None:
    """Correct the vote, or overrule the judge on a pair of names. A correction applies on
    top of the vote at every build (flagged source: override); --same / --not-same settle a
    judged pair for every --judge on the dataset's runs, and change no gold."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.errors import UsageError
    from extraction_eval.seeds.ensemble.review import add_override, read_overrides
    from extraction_eval.types import GoldOverride

    store = LocalStore()
    if file is not None:
        if item or add or remove or set_ or same or not_same:
            raise UsageError(
                "--file takes the overrides from the file: no ITEM, --add/--remove/--set,"
                " --same/--not-same"
            )
        overrides, problems = read_overrides(file, dataset)
        for p in problems:
            err_console.print(f"[yellow]warning:[/] {p}", highlight=False, soft_wrap=True)
        ids = [add_override(store, o) for o in overrides]
        console.print(f"stored {len(ids)} overrides for {dataset}", highlight=False)
        return
    options = (("add", add), ("remove", remove), ("set", set_))
    given = [(a, v) for a, v in (*options, ("same", same), ("not_same", not_same)) if v is not None]
    if item is None or len(given) != 1:
        raise UsageError(
            "give ITEM and exactly one of --add, --remove, --set, --same, --not-same (or --file)"
        )
    if reason is None:
        raise UsageError("--reason is required: say why (it is kept with the gold)")
    action, given_value = given[0]
    target, field, value = _override_target(action, given_value)
    override = GoldOverride(
        dataset=dataset,
        item_id=item,
        action=action,  # type: ignore[arg-type]
        kind=kind,
        target=target,
        field=field,
        value=value,
        reason=reason,
        author=author,
    )
    number = add_override(store, override)
    when = (
        "next --judge on the dataset's runs"
        if action in ("same", "not_same")
        else "next gold build"
    )
    console.print(f"override #{number} stored; it applies from the {when}", highlight=False)


def _override_target(action: str, given_value: str) -> tuple[str | None, str | None, str | None]:
    """(target, field, value) of one ``--add`` / ``--remove`` / ``--set`` / ``--same`` /
    ``--not-same`` value; a malformed one is refused naming its option."""
    from extraction_eval.errors import UsageError

    value: str | None = given_value
    target: str | None = None
    field: str | None = None
    if action == "remove":
        target, value = given_value, None
    elif action in ("same", "not_same"):
        target, sep, value = given_value.partition("=")
        if not sep or not target.strip() or not value.strip():
            flag = "--same" if action == "same" else "--not-same"
            raise UsageError(
                f"{flag} takes PREDICTED=GOLD, e.g. 'IBM=International Business Machines'"
            )
        target, value = target.strip(), value.strip()
    elif action == "set":
        left, sep, value = given_value.partition("=")
        target, dot, field = left.rpartition(".")
        if not sep or not dot or not target:
            raise UsageError("--set takes TARGET.FIELD=VALUE, e.g. 'Port Ansel.type=city'")
        if target.endswith(".attributes"):  # 'Ada.attributes.role=ceo'
            target, field = target.removesuffix(".attributes"), f"attributes.{field}"
    return target, field, value


@gold_app.command("triage")
@handle_errors
def triage_cmd(
    run: Annotated[str, typer.Argument(help="A finished run whose likely gold gaps to review.")],
    queue: Annotated[str, typer.Option(help="Review queue (LangFuse annotation queue) name.")],
    limit: Annotated[
        int | None, typer.Option(help="Send at most this many (most likely first).")
    ] = None,
    kinds: Annotated[
        list[str] | None,
        typer.Option(
            help="grounded_fp, weak_gold_miss, judge_disagreement (repeatable or a comma list;"
            " default all)."
        ),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(help="Local run: the review file [QUEUE.review.jsonl]."),
    ] = None,
) -> None:
    """Send a run's likely gold gaps to a review queue: a LangFuse annotation queue for a
    LangFuse-mode run, a review file for a local one; nothing is sent twice."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.seeds.review.triage import check_kinds, triage
    from extraction_eval.views.review import render_triage

    if file is not None:
        check_writable("--file", file)
    report = triage(LocalStore(), run, queue, kinds=check_kinds(kinds), limit=limit, file=file)
    render_triage(report, console, err_console)


@gold_app.command("apply-reviews")
@handle_errors
def apply_reviews_cmd(
    queue: Annotated[str, typer.Option(help="Review queue whose verdicts to apply.")],
    file: Annotated[
        Path | None,
        typer.Option(help="Local queue: the filled-in review file [QUEUE.review.jsonl]."),
    ] = None,
) -> None:
    """Turn the queue's new verdicts into a new dataset version (human-verified); each verdict
    applies once, a conflicting or changed one is reported, not guessed."""
    from extraction_eval.backends import get_dataset_backend
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.seeds.review.apply import apply_reviews
    from extraction_eval.views.review import render_apply

    if file is not None:
        check_readable("--file", file)
    store = LocalStore()
    # a queue triage sent to LangFuse has queue items; a local one has a review file
    langfuse = file is None and any(r.queue_item_id for r in store.review_candidates(queue))
    backend = store if not langfuse else get_dataset_backend()
    try:
        report = apply_reviews(store, backend, queue, file=file, langfuse=langfuse)
    finally:
        if backend is not store:
            backend.close()
    render_apply(report, console, err_console)
