"""``seed-from-trace TRACE_ID... [--dataset] [--tag] [--since] [--score] [--dry-run]``.

The seeding and LangFuse modules are imported inside the command, so ``--help`` loads neither.
"""

from __future__ import annotations

from typing import Annotated

import typer

from extraction_eval.commands.common import console, err_console, handle_errors
from extraction_eval.errors import ConfigError, UsageError

# The --dataset default, shown in --help without importing the seeding module; a test holds
# it equal to seeds.from_trace.DEFAULT_DATASET.
DEFAULT_DATASET = "extraction-eval"


@handle_errors
def seed(
    trace_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Trace ids to seed from; omit to select with the filters below."),
    ] = None,
    dataset: Annotated[
        str, typer.Option("--dataset", "-d", help="Dataset to add the items to.")
    ] = DEFAULT_DATASET,
    tag: Annotated[
        str | None, typer.Option(help="Only traces with this tag, e.g. 'validated'.")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only traces started since: 7d, 24h, 30m, or an ISO date.")
    ] = None,
    score: Annotated[
        list[str] | None,
        typer.Option("--score", help="Only traces with this score, NAME=VALUE (repeatable)."),
    ] = None,
    input_path: Annotated[
        str | None,
        typer.Option(help="Dotted path to the text in the trace input (default: 'text')."),
    ] = None,
    output_path: Annotated[
        str | None,
        typer.Option(help="Dotted path to the extraction in the trace output (default: root)."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be created; write nothing.")
    ] = False,
) -> None:
    """Seed a dataset from production traces in LangFuse: each trace's input text and its
    validated extraction (a recorded human correction, else the trace output) become one
    item, linked back by source_trace_id. Seeding a trace again updates the same item."""
    from extraction_eval.backends.langfuse import close_client, connect, langfuse_configured
    from extraction_eval.seeds.from_trace import ScoreFilter, parse_since, seed_from_traces
    from extraction_eval.views.seeds import render_seed_report

    # Options are checked before LangFuse is needed: a typo is named even without keys.
    if not dataset.strip():
        raise UsageError("--dataset must not be empty")
    if since is not None:
        parse_since(since)
    for raw in score or ():
        ScoreFilter.parse(raw)
    if tag is not None and not tag.strip():
        raise UsageError("--tag must not be empty")
    for option, path in (("--input-path", input_path), ("--output-path", output_path)):
        if path is not None and not all(part.strip() for part in path.split(".")):
            raise UsageError(f"{option} must be a dotted path like a.b.0, got {path!r}")
    if not trace_ids and not (tag or since or score):
        raise UsageError("name trace ids, or select traces with --tag, --since or --score")
    if not langfuse_configured():
        raise ConfigError(
            "seed-from-trace reads LangFuse: set LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY"
            " and LANGFUSE_BASE_URL"
        )
    lf = connect()
    try:
        report = seed_from_traces(
            lf,
            dataset=dataset,
            trace_ids=trace_ids or (),
            tag=tag,
            since=since,
            score_filters=score or (),
            input_path=input_path,
            output_path=output_path,
            dry_run=dry_run,
        )
    finally:
        close_client(lf)
    render_seed_report(report, console, err_console)
    if report.explicit and report.skipped:
        raise typer.Exit(1)
