"""Command line: a thin layer over the Python API. Each command parses, calls, renders."""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import typer
from dotenv import load_dotenv
from rich.markup import escape

from extraction_eval.commands.common import err_console
from extraction_eval.commands.compare import compare_cmd
from extraction_eval.commands.datasets import datasets_app
from extraction_eval.commands.gold import gold_app
from extraction_eval.commands.help_layout import keep_option_names_whole
from extraction_eval.commands.judge import judge_app
from extraction_eval.commands.matrix import matrix_cmd
from extraction_eval.commands.power import power_cmd
from extraction_eval.commands.prompts import prompts_app
from extraction_eval.commands.report import report_cmd
from extraction_eval.commands.run import run_cmd
from extraction_eval.commands.runs import runs_app
from extraction_eval.commands.score import score
from extraction_eval.commands.seed import seed
from extraction_eval.limits import MAX_DOTENV_BYTES
from extraction_eval.regular_files import NotReadable, read_regular

keep_option_names_whole()

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Evaluate LLM extraction pipelines (entities, relationships, evidence), "
    "locally or in LangFuse.",
)
app.command("score")(score)
app.command("run")(run_cmd)
app.command("compare")(compare_cmd)
app.command("report")(report_cmd)
app.command("matrix")(matrix_cmd)
app.command("power")(power_cmd)
app.command("seed")(seed)
app.add_typer(datasets_app, name="datasets")
app.add_typer(runs_app, name="runs")
app.add_typer(prompts_app, name="prompts")
app.add_typer(gold_app, name="gold")
app.add_typer(judge_app, name="judge")

_run_app = typer.Typer(add_completion=False)
_run_app.command()(run_cmd)
_seed_app = typer.Typer(add_completion=False)
_seed_app.command()(seed)


class RedactingFilter(logging.Filter):
    """Log lines pass the same redaction as error text: at DEBUG the SDKs log request and
    response details, and a body may echo a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        from extraction_eval.redact import redact

        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _error(message: str) -> None:
    err_console.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def load_env() -> None:
    """The current folder's ``.env``, never overriding the real environment.

    Only the current folder: searching the parent folders (python-dotenv's ``find_dotenv``)
    would let a ``.env`` planted in any ancestor folder send the API key to another server."""
    path = Path.cwd() / ".env"
    if not path.exists():
        return
    try:  # a regular file of a bounded size only: a FIFO or a huge file never stalls startup
        text = read_regular(path, MAX_DOTENV_BYTES).decode("utf-8")
    except (NotReadable, UnicodeDecodeError) as exc:
        message = str(exc) if isinstance(exc, NotReadable) else f"{path}: not UTF-8"
        err_console.print(f"[yellow]warning:[/] .env not read: {escape(message)}", highlight=False)
        return
    load_dotenv(stream=io.StringIO(text), override=False)


def _startup() -> None:
    """Read ``.env`` (never overriding the real environment) and keep library logs quiet."""
    load_env()
    level = os.environ.get("EXTRACTION_EVAL_LOG_LEVEL", "WARNING").strip().upper() or "WARNING"
    if level not in _LOG_LEVELS:
        _error(f"EXTRACTION_EVAL_LOG_LEVEL must be one of {', '.join(_LOG_LEVELS)}, got {level!r}")
        sys.exit(2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    # a pipeline's (or a library's) warnings.warn goes through the handlers below too, not
    # straight to stderr: its text may hold a key
    logging.captureWarnings(True)
    for handler in logging.getLogger().handlers:  # every library's records pass these
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    if level != "DEBUG":
        # The SDK logs export failures itself; we report what is missing after a read-back.
        logging.getLogger("langfuse").setLevel(logging.CRITICAL)


def invoke(cli: typer.Typer, argv: Sequence[str] | None, prog_name: str) -> int:
    """Run ``cli`` and return its exit code; a usage error (wrong type, unknown option,
    missing argument) is one ``error:`` line on stderr, not typer's boxed panel."""
    try:
        result = cli(args=argv, prog_name=prog_name, standalone_mode=False)
    except typer.TyperException as exc:  # click's UsageError, BadParameter, ...
        if type(exc).__name__ == "NoArgsIsHelpError":
            return exc.exit_code  # the help was printed already
        message = " ".join(exc.format_message().split())
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            message += f" (see '{ctx.command_path} --help')"
        _error(message)
        return exc.exit_code
    except typer.Abort:
        _error("aborted")
        return 1
    return result if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> NoReturn:
    _startup()
    sys.exit(invoke(app, argv, "extraction-eval"))


def run_experiment_main(argv: Sequence[str] | None = None) -> NoReturn:
    _startup()
    sys.exit(invoke(_run_app, argv, "run-experiment"))


def seed_from_trace_main(argv: Sequence[str] | None = None) -> NoReturn:
    _startup()
    sys.exit(invoke(_seed_app, argv, "seed-from-trace"))
