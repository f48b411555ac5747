"""Command line: a thin layer over the Python API. Each command parses, calls, renders."""

from __future__ import annotations

import logging
import os

import typer
from dotenv import find_dotenv, load_dotenv

from extraction_eval.commands.datasets import datasets_app
from extraction_eval.commands.prompts import prompts_app
from extraction_eval.commands.run import run_cmd
from extraction_eval.commands.runs import compare_cmd, runs_app
from extraction_eval.commands.score import score
from extraction_eval.commands.seed import seed

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Evaluate LLM extraction pipelines (entities, relationships, evidence), "
    "locally or in LangFuse.",
)
app.command("score")(score)
app.command("run")(run_cmd)
app.command("compare")(compare_cmd)
app.command("seed")(seed)
app.add_typer(datasets_app, name="datasets")
app.add_typer(runs_app, name="runs")
app.add_typer(prompts_app, name="prompts")

_run_app = typer.Typer(add_completion=False)
_run_app.command()(run_cmd)
_seed_app = typer.Typer(add_completion=False)
_seed_app.command()(seed)


def _startup() -> None:
    """Read ``.env`` (never overriding the real environment) and keep library logs quiet."""
    load_dotenv(find_dotenv(usecwd=True), override=False)
    level = os.environ.get("EXTRACTION_EVAL_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":
        # The SDK logs export failures itself; we report what is missing after a read-back.
        logging.getLogger("langfuse").setLevel(logging.CRITICAL)


def main() -> None:
    _startup()
    app()


def run_experiment_main() -> None:
    _startup()
    _run_app()


def seed_from_trace_main() -> None:
    _startup()
    _seed_app()
